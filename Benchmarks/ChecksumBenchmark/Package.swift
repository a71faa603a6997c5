// swift-tools-version:6.0
// Standalone throughput benchmark for FerryCore's checksums.
// Run from this directory: swift run -c release
import PackageDescription

let package = Package(
    name: "ChecksumBenchmark",
    platforms: [.macOS(.v14)],
    dependencies: [
        .package(name: "Ferry", path: "../..")
    ],
    targets: [
        .executableTarget(
            name: "ChecksumBenchmark",
            dependencies: [.product(name: "FerryCore", package: "Ferry")]
        )
    ],
    swiftLanguageModes: [.v6]
)
