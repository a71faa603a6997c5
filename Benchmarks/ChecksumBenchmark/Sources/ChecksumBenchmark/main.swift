// Prints the throughput (GB/s, 1 GB = 10^9 bytes) of every FerryCore checksum
// over one large in-memory buffer: each CRC with every kernel this CPU can
// run (down to the portable table code), SHA-1, SHA-256, MD5, and the
// server's one-pass MD5 + CRC64NVME combination.
//
// Usage: swift run -c release ChecksumBenchmark [--size-mib N] [--runs N]

import FerryCore

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

var sizeMiB = 256
var runs = 3
var arguments = CommandLine.arguments.dropFirst()
while let argument = arguments.popFirst() {
    switch argument {
    case "--size-mib":
        guard let value = arguments.popFirst().flatMap({ Int($0) }), value > 0 else {
            fatalError("--size-mib needs a positive integer")
        }
        sizeMiB = value
    case "--runs":
        guard let value = arguments.popFirst().flatMap({ Int($0) }), value > 0 else {
            fatalError("--runs needs a positive integer")
        }
        runs = value
    default:
        print("usage: ChecksumBenchmark [--size-mib N] [--runs N]")
        exit(argument == "--help" || argument == "-h" ? 0 : 2)
    }
}

/// Random-looking bytes (xorshift64), so no kernel sees a degenerate input.
func makeBuffer(byteCount: Int) -> [UInt8] {
    var buffer = [UInt8](repeating: 0, count: byteCount)
    var state: UInt64 = 0x9E37_79B9_7F4A_7C15
    buffer.withUnsafeMutableBytes { raw in
        let words = raw.count / 8
        let pointer = raw.baseAddress!
        for index in 0..<words {
            state ^= state << 13
            state ^= state >> 7
            state ^= state << 17
            pointer.storeBytes(of: state, toByteOffset: index * 8, as: UInt64.self)
        }
    }
    return buffer
}

/// Best-of-`runs` throughput of `body` over `bytes` bytes, in GB/s.
func measure(bytes: Int, runs: Int, _ body: () -> [UInt8]) -> (gbPerSecond: Double, digest: [UInt8]) {
    let clock = ContinuousClock()
    var best = Duration.seconds(1_000_000)
    var digest: [UInt8] = []
    for _ in 0..<runs {
        let elapsed = clock.measure { digest = body() }
        best = min(best, elapsed)
    }
    let seconds = Double(best.components.seconds) + Double(best.components.attoseconds) / 1e18
    return (Double(bytes) / seconds / 1e9, digest)
}

func pad(_ string: String, _ width: Int) -> String {
    string.count >= width ? string : string + String(repeating: " ", count: width - string.count)
}

func format(_ value: Double) -> String {
    let hundredths = Int((value * 100).rounded())
    let fraction = hundredths % 100
    return "\(hundredths / 100).\(fraction < 10 ? "0" : "")\(fraction)"
}

let byteCount = sizeMiB << 20
print("Filling a \(sizeMiB) MiB buffer…")
let buffer = makeBuffer(byteCount: byteCount)
print("CPU features: \(CRCAcceleration.available), best of \(runs) run(s) each")
print("")

var rows: [(String, String, Double)] = []

// Every distinct kernel each CRC can use on this CPU (all feature subsets).
let available = CRCAcceleration.available.rawValue
var subsets: [CRCAcceleration] = []
var mask = available
while true {
    subsets.append(CRCAcceleration(rawValue: mask))
    if mask == 0 { break }
    mask = (mask &- 1) & available
}

for algorithm in [ChecksumAlgorithm.crc32, .crc32c, .crc64nvme] {
    var seen = Set<String>()
    var reference: [UInt8]?
    for acceleration in subsets {
        let kernel = acceleration.kernelName(for: algorithm) ?? "?"
        guard seen.insert(kernel).inserted else { continue }
        let result = buffer.withUnsafeBytes { bytes in
            measure(bytes: byteCount, runs: runs) {
                var checksummer = Checksummer(algorithm, acceleration: acceleration)
                checksummer.update(bytes)
                return checksummer.finalize()
            }
        }
        if let reference, reference != result.digest {
            fatalError("\(algorithm) kernel \(kernel) disagrees with the other kernels")
        }
        reference = result.digest
        rows.append((algorithm.s3Name, kernel, result.gbPerSecond))
    }
}

for algorithm in [ChecksumAlgorithm.sha1, .sha256, .md5] {
    let result = buffer.withUnsafeBytes { bytes in
        measure(bytes: byteCount, runs: runs) {
            var checksummer = Checksummer(algorithm)
            checksummer.update(bytes)
            return checksummer.finalize()
        }
    }
    rows.append((algorithm.s3Name, "swift-crypto", result.gbPerSecond))
}

let combined = buffer.withUnsafeBytes { bytes in
    measure(bytes: byteCount, runs: runs) {
        var multi = MultiChecksummer([.md5, .crc64nvme])
        multi.update(bytes)
        return multi.finalize(.crc64nvme)!
    }
}
rows.append(("MD5+CRC64NVME", "MultiChecksummer", combined.gbPerSecond))

print("| Algorithm     | Kernel                 |   GB/s |")
print("|---------------|------------------------|-------:|")
for (algorithm, kernel, gbPerSecond) in rows {
    let value = format(gbPerSecond)
    print(
        "| \(pad(algorithm, 13)) | \(pad(kernel, 22)) | \(String(repeating: " ", count: max(0, 6 - value.count)))\(value) |"
    )
}
