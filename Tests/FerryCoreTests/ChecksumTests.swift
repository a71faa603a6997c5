import FerryCore
import Testing

/// Bit-at-a-time reference CRC (reflected, init and xorout all ones), written
/// independently of the library's tables and kernels.
private func referenceCRC(_ bytes: some Sequence<UInt8>, reflectedPoly: UInt64, width: Int) -> UInt64 {
    let mask: UInt64 = width == 64 ? .max : (1 << UInt64(width)) - 1
    var crc = mask
    for byte in bytes {
        crc ^= UInt64(byte)
        for _ in 0..<8 {
            crc = crc & 1 == 1 ? (crc >> 1) ^ reflectedPoly : crc >> 1
        }
    }
    return crc ^ mask
}

private func referenceDigest(_ algorithm: ChecksumAlgorithm, _ bytes: [UInt8]) -> [UInt8] {
    switch algorithm {
    case .crc32: return beBytes(UInt32(referenceCRC(bytes, reflectedPoly: 0xEDB8_8320, width: 32)))
    case .crc32c: return beBytes(UInt32(referenceCRC(bytes, reflectedPoly: 0x82F6_3B78, width: 32)))
    case .crc64nvme: return beBytes(referenceCRC(bytes, reflectedPoly: 0x9A6C_9329_AC4B_C9B5, width: 64))
    default: fatalError("not a CRC")
    }
}

private func beBytes<T: FixedWidthInteger>(_ value: T) -> [UInt8] {
    withUnsafeBytes(of: value.bigEndian) { Array($0) }
}

private let crcAlgorithms: [ChecksumAlgorithm] = [.crc32, .crc32c, .crc64nvme]

/// Deterministic xorshift64 generator so failures are reproducible.
private struct XorShift: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed == 0 ? 0x9E37_79B9_7F4A_7C15 : seed }
    mutating func next() -> UInt64 {
        state ^= state << 13
        state ^= state >> 7
        state ^= state << 17
        return state
    }
}

private func randomBytes(_ count: Int, seed: UInt64) -> [UInt8] {
    var rng = XorShift(seed: seed)
    var bytes = [UInt8](repeating: 0, count: count)
    var index = 0
    while index < count {
        let word = rng.next()
        for shift in stride(from: 0, to: 64, by: 8) where index < count {
            bytes[index] = UInt8(truncatingIfNeeded: word >> UInt64(shift))
            index += 1
        }
    }
    return bytes
}

/// Every subset of the CPU's CRC features (always includes `.none`, the
/// portable code, and the full set).
private func accelerationSubsets() -> [CRCAcceleration] {
    let available = CRCAcceleration.available.rawValue
    var subsets: [CRCAcceleration] = []
    var mask = available
    while true {
        subsets.append(CRCAcceleration(rawValue: mask))
        if mask == 0 { break }
        mask = (mask &- 1) & available
    }
    return subsets
}

private func crc(_ algorithm: ChecksumAlgorithm, _ bytes: UnsafeRawBufferPointer, _ acceleration: CRCAcceleration)
    -> [UInt8]
{
    var checksummer = Checksummer(algorithm, acceleration: acceleration)
    checksummer.update(bytes)
    return checksummer.finalize()
}

@Suite(.timeLimit(.minutes(10))) struct ChecksumTests {
    // MARK: Check values and known S3 values

    @Test func crcCheckValuesFor123456789() {
        let input = Array("123456789".utf8)
        for acceleration in accelerationSubsets() {
            var c32 = Checksummer(.crc32, acceleration: acceleration)
            c32.update(input)
            #expect(c32.finalize() == beBytes(UInt32(0xCBF4_3926)), "CRC32 \(acceleration)")
            var c32c = Checksummer(.crc32c, acceleration: acceleration)
            c32c.update(input)
            #expect(c32c.finalize() == beBytes(UInt32(0xE306_9283)), "CRC32C \(acceleration)")
            var c64 = Checksummer(.crc64nvme, acceleration: acceleration)
            c64.update(input)
            #expect(c64.finalize() == beBytes(UInt64(0xAE8B_1486_0A79_9888)), "CRC64NVME \(acceleration)")
        }
        // The test's own reference agrees with the published check values.
        #expect(referenceCRC(input, reflectedPoly: 0xEDB8_8320, width: 32) == 0xCBF4_3926)
        #expect(referenceCRC(input, reflectedPoly: 0x82F6_3B78, width: 32) == 0xE306_9283)
        #expect(referenceCRC(input, reflectedPoly: 0x9A6C_9329_AC4B_C9B5, width: 64) == 0xAE8B_1486_0A79_9888)
    }

    /// Values from Python: zlib.crc32, hashlib, and a bit-by-bit CRC32C /
    /// CRC64NVME, big-endian then base64 as S3 sends them.
    @Test(arguments: [
        ("", ChecksumAlgorithm.crc32, "AAAAAA=="),
        ("", .crc32c, "AAAAAA=="),
        ("", .crc64nvme, "AAAAAAAAAAA="),
        ("", .sha1, "2jmj7l5rSw0yVb/vlWAYkK/YBwk="),
        ("", .sha256, "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="),
        ("", .md5, "1B2M2Y8AsgTpgAmY7PhCfg=="),
        ("hello world", .crc32, "DUoRhQ=="),
        ("hello world", .crc32c, "yZRlqg=="),
        ("hello world", .crc64nvme, "jSnVw/bqjr4="),
        ("hello world", .sha1, "Kq5sNclPz7QV2+lfQIuc6R7oRu0="),
        ("hello world", .sha256, "uU0nuZNNPgilLlLX2n2r+sSE7+N6U4DukIj3rOLvzek="),
        ("hello world", .md5, "XrY7u+Ae7tCTyyK7j1rNww=="),
        ("123456789", .crc32, "y/Q5Jg=="),
        ("123456789", .crc32c, "4waSgw=="),
        ("123456789", .crc64nvme, "rosUhgp5mIg="),
        ("123456789", .sha256, "FeKw08M4keuw8e9gnsQZQgwg4yDOlMZfvIwzEkSOsiU="),
    ])
    func knownS3Base64Values(input: String, algorithm: ChecksumAlgorithm, expected: String) {
        var checksummer = Checksummer(algorithm)
        checksummer.update(input.utf8)
        #expect(checksummer.finalizeBase64() == expected)
        #expect(checksummer.finalize().count == algorithm.digestLength)
        #expect(Checksum.digest(algorithm, of: Array(input.utf8)) == Checksum.decodeBase64(expected))
        var portable = Checksummer(algorithm, acceleration: .none)
        portable.update(Array(input.utf8))
        #expect(portable.finalizeBase64() == expected)
    }

    // MARK: Kernels against the reference and against each other

    @Test func everyKernelMatchesBitwiseReference() {
        let data = randomBytes(70_000, seed: 1)
        var rng = XorShift(seed: 2)
        // Lengths around every kernel threshold plus random ones, at random offsets.
        var lengths = Array(0...80) + [127, 128, 129, 191, 255, 256, 257, 511, 512, 513, 767, 768, 769]
        lengths += [1023, 1024, 1025, 6143, 6144, 6145, 12_288, 18_431, 65_536]
        lengths += (0..<12).map { _ in Int(rng.next() % 60_000) }
        for length in lengths {
            let offset = Int(rng.next() % 64)
            let slice = Array(data[offset..<(offset + length)])
            for algorithm in crcAlgorithms {
                let expected = referenceDigest(algorithm, slice)
                data.withUnsafeBytes { raw in
                    let bytes = UnsafeRawBufferPointer(rebasing: raw[offset..<(offset + length)])
                    for acceleration in accelerationSubsets() {
                        #expect(
                            crc(algorithm, bytes, acceleration) == expected,
                            "\(algorithm) length \(length) offset \(offset) \(acceleration)")
                    }
                }
            }
        }
    }

    @Test func hardwareEqualsPortableForAllLengthsAndAlignments() {
        let data = randomBytes(4096 + 64, seed: 3)
        let subsets = accelerationSubsets()
        var mismatches = 0
        data.withUnsafeBytes { raw in
            for length in 0...4096 {
                // Cycle through all 64 alignments as the length grows.
                let offset = (length * 7) % 64
                let bytes = UnsafeRawBufferPointer(rebasing: raw[offset..<(offset + length)])
                for algorithm in crcAlgorithms {
                    let portable = crc(algorithm, bytes, .none)
                    for acceleration in subsets where acceleration != .none {
                        if crc(algorithm, bytes, acceleration) != portable {
                            mismatches += 1
                            Issue.record("\(algorithm) length \(length) offset \(offset) \(acceleration)")
                        }
                    }
                }
            }
        }
        #expect(mismatches == 0)
    }

    @Test func hardwareEqualsPortableOnLargeBuffers() {
        let data = randomBytes((3 << 20) + 100, seed: 4)
        data.withUnsafeBytes { raw in
            for (offset, length) in [(0, 3 << 20), (1, (3 << 20) + 99), (13, 1_000_003), (8, 2_097_152 + 17)] {
                let bytes = UnsafeRawBufferPointer(rebasing: raw[offset..<(offset + length)])
                for algorithm in crcAlgorithms {
                    let portable = crc(algorithm, bytes, .none)
                    for acceleration in accelerationSubsets() where acceleration != .none {
                        #expect(
                            crc(algorithm, bytes, acceleration) == portable, "\(algorithm) \(length) \(acceleration)")
                    }
                }
            }
        }
        // Portable is itself right on a large-ish buffer.
        let prefix = Array(data.prefix(200_000))
        for algorithm in crcAlgorithms {
            prefix.withUnsafeBytes { bytes in
                #expect(crc(algorithm, bytes, .none) == referenceDigest(algorithm, prefix))
            }
        }
    }

    @Test func kernelNames() {
        for algorithm in crcAlgorithms {
            #expect(CRCAcceleration.none.kernelName(for: algorithm) == "portable-slice8")
            let name = CRCAcceleration.automatic.kernelName(for: algorithm)
            #expect(name != nil && !name!.isEmpty)
            if CRCAcceleration.available.isEmpty {
                #expect(name == "portable-slice8")
            }
        }
        #expect(CRCAcceleration.automatic.kernelName(for: .sha256) == nil)
        #expect(CRCAcceleration.none.description == "[]")
    }

    #if arch(x86_64)
        /// Every x86-64 machine this is expected to run on (and the CI machine)
        /// has SSE4.2 and PCLMULQDQ; make sure detection finds them so the
        /// kernel tests above really exercise hardware code.
        @Test func x86FeaturesDetected() {
            let available = CRCAcceleration.available
            #expect(available.contains(.x86SSE42))
            #expect(available.contains(.x86PCLMUL))
            #expect(CRCAcceleration.automatic.kernelName(for: .crc32c) != "portable-slice8")
            #expect(CRCAcceleration.automatic.kernelName(for: .crc64nvme) != "portable-slice8")
        }
    #endif

    // MARK: Incremental updates

    @Test func incrementalOddPiecesEqualOneShot() {
        let data = randomBytes(150_000, seed: 5)
        let pieceSizes = [1, 2, 3, 5, 7, 11, 13, 17, 63, 64, 65, 255, 256, 257, 1021, 4099, 0, 16_411, 65_537]
        for algorithm in ChecksumAlgorithm.allCases {
            var oneShot = Checksummer(algorithm)
            oneShot.update(data)
            for acceleration in [CRCAcceleration.automatic, .none] {
                var incremental = Checksummer(algorithm, acceleration: acceleration)
                var offset = 0
                var pieceIndex = 0
                while offset < data.count {
                    let end = min(data.count, offset + pieceSizes[pieceIndex % pieceSizes.count])
                    incremental.update(data[offset..<end])
                    offset = end
                    pieceIndex += 1
                }
                #expect(incremental.finalize() == oneShot.finalize(), "\(algorithm) \(acceleration)")
                #expect(incremental.byteCount == UInt64(data.count))
            }
            if algorithm.supportsCombine {
                #expect(oneShot.finalize() == referenceDigest(algorithm, data))
            }
        }
    }

    @Test func finalizeDoesNotEndTheComputationAndCopiesFork() {
        let a = Array("hello ".utf8)
        let b = Array("world".utf8)
        for algorithm in ChecksumAlgorithm.allCases {
            var checksummer = Checksummer(algorithm)
            checksummer.update(a)
            let forked = checksummer
            let midway = checksummer.finalize()
            checksummer.update(b)
            #expect(checksummer.finalize() == Checksum.digest(algorithm, of: a + b))
            #expect(forked.finalize() == midway)
            #expect(midway == Checksum.digest(algorithm, of: a))
        }
    }

    @Test func nonContiguousCollectionsMatchContiguous() {
        let data = randomBytes(200_000, seed: 6)
        let lazyMapped = data.lazy.map { $0 }  // no contiguous storage
        let set: Set<UInt8> = Set(data.prefix(300))
        for algorithm in ChecksumAlgorithm.allCases {
            var viaArray = Checksummer(algorithm)
            viaArray.update(data)
            var viaLazy = Checksummer(algorithm)
            viaLazy.update(lazyMapped)
            #expect(viaLazy.finalize() == viaArray.finalize(), "\(algorithm)")

            var viaSet = Checksummer(algorithm)
            viaSet.update(set)
            #expect(viaSet.finalize() == Checksum.digest(algorithm, of: Array(set)), "\(algorithm)")
        }
    }

    @Test func concurrentUseFromManyTasks() async {
        let data = randomBytes(100_000, seed: 7)
        let expected = ChecksumAlgorithm.allCases.map { Checksum.digest($0, of: data) }
        await withTaskGroup(of: Bool.self) { group in
            for task in 0..<16 {
                group.addTask {
                    let algorithm = ChecksumAlgorithm.allCases[task % ChecksumAlgorithm.allCases.count]
                    var checksummer = Checksummer(algorithm)
                    checksummer.update(data)
                    return checksummer.finalize() == expected[task % expected.count]
                }
            }
            for await ok in group {
                #expect(ok)
            }
        }
    }

    // MARK: Combine

    @Test func combineEqualsChecksumOfConcatenation() {
        let data = randomBytes(40_000, seed: 8)
        var rng = XorShift(seed: 9)
        var splits = [0, 1, 7, 8, 16, 4095, 39_999, 40_000]
        splits += (0..<20).map { _ in Int(rng.next() % 40_001) }
        for algorithm in crcAlgorithms {
            let whole = Checksum.digest(algorithm, of: data)
            for split in splits {
                let a = Checksum.digest(algorithm, of: data[..<split])
                let b = Checksum.digest(algorithm, of: data[split...])
                let combined = Checksum.combine(algorithm, a, b, lengthOfB: UInt64(data.count - split))
                #expect(combined == whole, "\(algorithm) split \(split)")
            }
        }
    }

    @Test func combineWithLongZeroRuns() {
        // CRC(A || zeros(n)) computed directly vs. combined, n up to 16 MiB.
        let a = Array("ferry".utf8)
        let zeros = [UInt8](repeating: 0, count: 16 << 20)
        for algorithm in crcAlgorithms {
            let crcA = Checksum.digest(algorithm, of: a)
            for n in [1, 1000, 1 << 20, 16 << 20] {
                let crcZeros = Checksum.digest(algorithm, of: zeros[..<n])
                var direct = Checksummer(algorithm)
                direct.update(a)
                direct.update(zeros[..<n])
                #expect(Checksum.combine(algorithm, crcA, crcZeros, lengthOfB: UInt64(n)) == direct.finalize())
            }
        }
    }

    @Test func combineHandlesHugeLengthsConsistently() {
        // combine is associative: combine(combine(x, y, m), z, n) == combine(x, combine(y, z, n), m + n),
        // exercised with lengths far beyond memory (up to 2^62 bytes).
        var rng = XorShift(seed: 10)
        for algorithm in crcAlgorithms {
            for _ in 0..<20 {
                let x = Array(randomBytes(algorithm.digestLength, seed: rng.next()))
                let y = Array(randomBytes(algorithm.digestLength, seed: rng.next()))
                let z = Array(randomBytes(algorithm.digestLength, seed: rng.next()))
                let m = rng.next() >> 2
                let n = rng.next() >> 2
                let left = Checksum.combine(
                    algorithm, Checksum.combine(algorithm, x, y, lengthOfB: m)!, z, lengthOfB: n)
                let right = Checksum.combine(
                    algorithm, x, Checksum.combine(algorithm, y, z, lengthOfB: n)!, lengthOfB: m &+ n)
                #expect(left == right, "\(algorithm) m=\(m) n=\(n)")
                // Combining with an empty B is the identity on A.
                let empty = [UInt8](repeating: 0, count: algorithm.digestLength)
                #expect(Checksum.combine(algorithm, x, empty, lengthOfB: 0) == x)
            }
        }
    }

    @Test func combineRejectsNonCRCAndBadLengths() {
        let sha = Checksum.digest(.sha256, of: Array("a".utf8))
        #expect(Checksum.combine(.sha256, sha, sha, lengthOfB: 1) == nil)
        #expect(
            Checksum.combine(.md5, [UInt8](repeating: 0, count: 16), [UInt8](repeating: 0, count: 16), lengthOfB: 1)
                == nil)
        #expect(Checksum.combine(.crc32, [1, 2, 3], [1, 2, 3, 4], lengthOfB: 4) == nil)
        #expect(Checksum.combine(.crc64nvme, [1, 2, 3, 4], [1, 2, 3, 4], lengthOfB: 4) == nil)
        #expect(Checksum.combine(.sha1, parts: []) == nil)
    }

    @Test func fullObjectChecksumFromParts() {
        // Expected values: Python, CRC of b"The quick brown fox jumps over the lazy dog".
        let parts = ["The quick brown fox ", "jumps over ", "the lazy dog"].map { Array($0.utf8) }
        let expected: [ChecksumAlgorithm: String] = [
            .crc32: "QU+jOQ==", .crc32c: "ImIEBA==", .crc64nvme: "12xUBUlUwUM=",
        ]
        for algorithm in crcAlgorithms {
            let partInfo = parts.map { (checksum: Checksum.digest(algorithm, of: $0), length: UInt64($0.count)) }
            let full = Checksum.combine(algorithm, parts: partInfo)
            #expect(full.map { Checksum.base64($0) } == expected[algorithm], "\(algorithm)")
            #expect(full == Checksum.digest(algorithm, of: parts.flatMap { $0 }))
            #expect(Checksum.combine(algorithm, parts: []) == Checksum.digest(algorithm, of: [UInt8]()))
        }
    }

    // MARK: Composite checksums and ETags

    @Test func compositeChecksumsMatchHandComputedValues() {
        // Expected values from Python: base64(H(concat(part digests))) + "-3".
        let parts = ["The quick brown fox ", "jumps over ", "the lazy dog"].map { Array($0.utf8) }
        let expected: [ChecksumAlgorithm: String] = [
            .crc32: "xU/lUQ==-3",
            .crc32c: "jbcjnA==-3",
            .crc64nvme: "5O0l9pD+RPI=-3",
            .sha1: "35CNe/xk6dFHFPTTHUlYdG67E18=-3",
            .sha256: "zaqbqwxblBztGfNY1qTEjrTPj3X1KS6Vofi9Umh9oHU=-3",
        ]
        for algorithm in ChecksumAlgorithm.s3Algorithms {
            let partChecksums = parts.map { Checksum.digest(algorithm, of: $0) }
            #expect(Checksum.composite(algorithm, partChecksums: partChecksums) == expected[algorithm], "\(algorithm)")
        }
    }

    @Test func multipartETagMatchesHandComputedValues() {
        // Python: hashlib.md5(b"".join(md5(p).digest() for p in parts)).hexdigest() + "-3"
        let parts = ["The quick brown fox ", "jumps over ", "the lazy dog"].map { Array($0.utf8) }
        let md5s = parts.map { Checksum.digest(.md5, of: $0) }
        #expect(Checksum.multipartETag(partMD5s: md5s) == "29c86a1fb7cd57ab41849af95d74d794-3")
        #expect(
            Checksum.multipartETag(partMD5s: [Checksum.digest(.md5, of: Array("abc".utf8))])
                == "af5da9f45af7a300e3aded972f8ff687-1")
    }

    // MARK: Multi-algorithm

    @Test func multiChecksummerMatchesIndividualChecksummers() {
        let data = randomBytes(1_000_000, seed: 11)
        var multi = MultiChecksummer([.md5, .crc64nvme, .sha256, .crc32c, .md5, .crc32, .sha1])
        #expect(multi.algorithms == [.md5, .crc64nvme, .sha256, .crc32c, .crc32, .sha1])
        // Feed in uneven pieces, one larger than the internal chunk size.
        multi.update(data[..<3])
        multi.update(data[3..<400_003])
        multi.update(data[400_003...])
        #expect(multi.byteCount == UInt64(data.count))
        let digests = multi.finalize()
        #expect(digests.count == 6)
        for algorithm in multi.algorithms {
            #expect(digests[algorithm] == Checksum.digest(algorithm, of: data), "\(algorithm)")
            #expect(multi.finalize(algorithm) == digests[algorithm])
            #expect(multi.finalizeBase64()[algorithm] == Checksum.base64(Checksum.digest(algorithm, of: data)))
        }
        #expect(multi.finalize(.crc32) != nil)
        #expect(MultiChecksummer([.crc32]).finalize(.sha1) == nil)
    }

    // MARK: Algorithm metadata

    @Test func algorithmNamesAndMetadata() {
        #expect(ChecksumAlgorithm(name: "CRC32") == .crc32)
        #expect(ChecksumAlgorithm(name: "crc32c") == .crc32c)
        #expect(ChecksumAlgorithm(name: "Crc64Nvme") == .crc64nvme)
        #expect(ChecksumAlgorithm(name: "sha1") == .sha1)
        #expect(ChecksumAlgorithm(name: "SHA256") == .sha256)
        #expect(ChecksumAlgorithm(name: "md5") == .md5)
        #expect(ChecksumAlgorithm(name: " CRC32C ") == .crc32c)
        for bad in ["", "CRC", "CRC-32", "SHA-256", "crc64", "sha512", "CRC32CC", "ＣＲＣ32"] {
            #expect(ChecksumAlgorithm(name: bad) == nil, "\(bad)")
        }
        #expect(ChecksumAlgorithm.s3Algorithms.map(\.s3Name) == ["CRC32", "CRC32C", "CRC64NVME", "SHA1", "SHA256"])
        #expect(
            ChecksumAlgorithm.s3Algorithms.map(\.headerName) == [
                "x-amz-checksum-crc32", "x-amz-checksum-crc32c", "x-amz-checksum-crc64nvme",
                "x-amz-checksum-sha1", "x-amz-checksum-sha256",
            ])
        #expect(ChecksumAlgorithm.md5.headerName == "content-md5")
        #expect(ChecksumAlgorithm.allCases.map(\.digestLength) == [4, 4, 8, 20, 32, 16])
        #expect(ChecksumAlgorithm.allCases.filter(\.supportsCombine) == [.crc32, .crc32c, .crc64nvme])
        #expect(ChecksumAlgorithm.crc64nvme.description == "CRC64NVME")
        #expect(ChecksumAlgorithm(headerName: "X-Amz-Checksum-CRC64NVME") == .crc64nvme)
        #expect(ChecksumAlgorithm(headerName: "Content-MD5") == .md5)
        #expect(ChecksumAlgorithm(headerName: "x-amz-checksum-md5") == nil)
        #expect(ChecksumAlgorithm(headerName: "x-amz-checksum-type") == nil)
        #expect(ChecksumAlgorithm(headerName: "x-amz-checksum- crc32") == nil)
        for algorithm in ChecksumAlgorithm.allCases {
            #expect(ChecksumAlgorithm(name: algorithm.s3Name) == algorithm)
            #expect(ChecksumAlgorithm(headerName: algorithm.headerName) == algorithm)
        }
    }

    // MARK: Encodings

    @Test func base64AndHexEncoding() {
        // RFC 4648 test vectors.
        let vectors = [
            ("", ""), ("f", "Zg=="), ("fo", "Zm8="), ("foo", "Zm9v"), ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="), ("foobar", "Zm9vYmFy"),
        ]
        for (plain, encoded) in vectors {
            #expect(Checksum.base64(Array(plain.utf8)) == encoded)
            #expect(Checksum.decodeBase64(encoded) == Array(plain.utf8))
        }
        let all = (0...255).map { UInt8($0) }
        #expect(Checksum.decodeBase64(Checksum.base64(all)) == all)
        for bad in ["Zg", "Zg=", "Z===", "Zm9v!", "Zh==", "Zm9=Yg==", "=Zm9", "Zm 9v"] {
            #expect(Checksum.decodeBase64(bad) == nil, "\(bad)")
        }
        #expect(Hex.encode([0x00, 0x0F, 0xA5, 0xFF]) == "000fa5ff")
        #expect(Hex.decode("000fA5ff") == [0x00, 0x0F, 0xA5, 0xFF])
        #expect(Hex.decode(Hex.encode(all)) == all)
        for bad in ["0", "0g", "abc", " 0", "0x"] { #expect(Hex.decode(bad) == nil, "\(bad)") }
        let id = Hex.randomId()
        #expect(Hex.isRandomId(id) && id != Hex.randomId())
        #expect(Hex.isRandomId(Hex.randomId(byteCount: 32), byteCount: 32))
        for bad in [String(id.dropLast()), id.uppercased(), id.dropLast() + "g", id + "0"] {
            #expect(!Hex.isRandomId(bad), "\(bad)")
        }
        #expect(Checksum.decode(.crc32, base64: "DUoRhQ==") == [0x0D, 0x4A, 0x11, 0x85])
        #expect(Checksum.decode(.crc64nvme, base64: "DUoRhQ==") == nil)
        #expect(Checksum.decode(.crc32, base64: "not base64") == nil)
    }
}
