// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "Ferry",
    platforms: [.macOS(.v14), .iOS(.v17)],
    products: [
        .library(name: "FerryCore", targets: ["FerryCore"]),
        .library(name: "Ferry", targets: ["Ferry"]),
        .library(name: "FerryAsyncHTTPClient", targets: ["FerryAsyncHTTPClient"]),
        .library(name: "FerryServer", targets: ["FerryServer"]),
        .executable(name: "ferry", targets: ["FerryCLI"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-crypto.git", "3.12.3"..<"5.0.0"),
        .package(url: "https://github.com/CoreOffice/XMLCoder.git", from: "0.18.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1"),
        .package(url: "https://github.com/groue/GRDB.swift.git", from: "7.10.0"),
        .package(url: "https://github.com/apple/swift-nio-extras.git", from: "1.35.2"),
        .package(url: "https://github.com/apple/swift-http-types.git", from: "1.8.0"),
        .package(url: "https://github.com/vapor/postgres-nio.git", from: "1.33.2"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        .package(url: "https://github.com/apple/swift-distributed-tracing.git", from: "1.7.3"),
        .package(url: "https://github.com/swift-otel/swift-otel.git", from: "1.6.0"),
        .package(url: "https://github.com/vapor/jwt-kit.git", from: "5.7.1"),
    ],
    targets: [
        .target(name: "CFerryChecksums"),
        .target(name: "CFerryProcess"),
        .target(
            name: "FerryCore",
            dependencies: [
                "CFerryChecksums",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "XMLCoder", package: "XMLCoder"),
            ]
        ),
        // The seam between Ferry's clients and the network (requests, body buffers, streamed bodies): Foundation only.
        .target(
            name: "FerryTransport",
            dependencies: ["FerryCore"]
        ),
        // The AsyncHTTPClient (SwiftNIO) transport, a product of its own so that an app on Apple platforms, where
        // URLSession is the default, links no SwiftNIO; the client SDK takes it as its default on Linux only.
        .target(
            name: "FerryAsyncHTTPClient",
            dependencies: [
                "FerryTransport",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ]
        ),
        .target(
            name: "Ferry",
            dependencies: [
                "FerryCore",
                "FerryTransport",
                .target(name: "FerryAsyncHTTPClient", condition: .when(platforms: [.linux])),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),
        // The server's storage and catalog layer: object semantics over blob storages (files in the data directory, an
        // S3-compatible store), the SQLite and PostgreSQL catalogs with every record they keep (objects, videos,
        // images, media jobs, webhook events, access keys, leases), and credentials at rest and their resolution. It
        // throws FerryDomainError and knows nothing of HTTP requests or media processing.
        .target(
            name: "FerryStorage",
            dependencies: [
                "FerryCore",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
            ]
        ),
        // The server's media layer, over the storage layer: the media library (videos and images advancing as storage
        // changes), media jobs and their pipeline (ffprobe, ffmpeg), the webhook outbox and its delivery, and the
        // collector of unfinished uploads. No HTTP server: the edge calls it.
        .target(
            name: "FerryMedia",
            dependencies: [
                "FerryStorage",
                "FerryCore",
                "CFerryProcess",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
            ]
        ),
        // The edge, and the service as a library: the Hummingbird router with its middleware and dialects, the routes
        // of every API (S3, media, form, publish, playback, console, part signing), the console's resources, and
        // FerryServer, which opens the layers below and runs them. The only server module that imports Hummingbird;
        // it re-exports FerryStorage and FerryMedia.
        .target(
            name: "FerryServer",
            dependencies: [
                "FerryStorage",
                "FerryMedia",
                "FerryCore",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "NIOHTTPTypesHTTP1", package: "swift-nio-extras"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "CryptoExtras", package: "swift-crypto"),
                .product(name: "JWTKit", package: "jwt-kit"),
            ],
            // The web console's static pages, styles and scripts, served under /console/.
            resources: [.copy("Console/Site")]
        ),
        .executableTarget(
            name: "FerryCLI",
            dependencies: [
                "Ferry",
                "FerryServer",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "OTel", package: "swift-otel"),
            ]
        ),
        .target(
            name: "FerryTestSupport",
            dependencies: [
                "FerryServer", "FerryCore", "Ferry", "FerryAsyncHTTPClient",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ],
            path: "Tests/FerryTestSupport"
        ),
        .testTarget(
            name: "FerryCoreTests",
            dependencies: ["FerryCore"]
        ),
        .testTarget(
            name: "FerryServerTests",
            dependencies: [
                "FerryServer", "FerryStorage", "FerryMedia", "FerryCore", "FerryTestSupport", "Ferry",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "JWTKit", package: "jwt-kit"),
            ]
        ),
        .testTarget(
            name: "FerryTests",
            dependencies: [
                "Ferry", "FerryCore", "FerryServer", "FerryTestSupport", "FerryAsyncHTTPClient", "FerryTransport",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            exclude: ["Scripts"]
        ),
        .testTarget(
            name: "TortureTests",
            dependencies: [
                "Ferry", "FerryServer", "FerryCore", "FerryTestSupport",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "JWTKit", package: "jwt-kit"),
            ]
        ),
        .testTarget(
            name: "InteropTests",
            dependencies: ["Ferry", "FerryServer", "FerryCore", "FerryTestSupport"],
            exclude: ["Scripts"]
        ),
    ],
    swiftLanguageModes: [.v6]
)
