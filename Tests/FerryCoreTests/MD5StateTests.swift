import FerryCore
import Testing

@Suite("MD5, one message or several side by side", .timeLimit(.minutes(10)))
struct MD5StateTests {
    /// The test suite of RFC 1321, appendix A.5.
    static let rfcVectors: [(String, String)] = [
        ("", "d41d8cd98f00b204e9800998ecf8427e"),
        ("a", "0cc175b9c0f1b6a831c399e269772661"),
        ("abc", "900150983cd24fb0d6963f7d28e17f72"),
        ("message digest", "f96b697d7cb7938d525a2f31aaf161d0"),
        ("abcdefghijklmnopqrstuvwxyz", "c3fcd3d76192e4007dfb496cca67e13b"),
        ("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789", "d174ab98d277d9f5a5611c2c9f419d9f"),
        (String(repeating: "1234567890", count: 8), "57edf4a22be3c955ac49da2e2107b67a"),
    ]

    @Test("The RFC 1321 test suite")
    func rfcTestSuite() {
        for (message, digest) in Self.rfcVectors {
            var state = MD5State()
            Array(message.utf8).withUnsafeBytes { state.update($0) }
            #expect(hex(state.finalize()) == digest, "\"\(message)\"")
        }
    }

    @Test("Every kernel gives swift-crypto's digests for messages of every length, fed in pieces", arguments: MD5Kernel.allCases)
    func kernelsAgree(kernel: MD5Kernel) {
        var random = SplitMix64(state: 0x5EED_0005)
        // Lengths around the block size, the padding boundary (56) and larger, plus a few large messages.
        let lengths = Array(0...200) + [447, 448, 449, 4096, 65_535, 65_536 + 17, 1 << 20, (1 << 20) + 61]
        let messages = lengths.map { length in (0..<length).map { _ in UInt8.random(in: 0...255, using: &random) } }
        var states = [MD5State](repeating: MD5State(), count: messages.count)
        var offsets = [Int](repeating: 0, count: messages.count)
        // Rounds in which every unfinished message gets its next piece, of a random size that is often not a whole
        // number of blocks, so tails are carried and completed across updates.
        while offsets.indices.contains(where: { offsets[$0] < messages[$0].count }) {
            let pieces = messages.indices.map { index -> Range<Int> in
                let remaining = messages[index].count - offsets[index]
                let size = min(remaining, [0, 1, 63, 64, 65, 640, 4096 + 5, 300_000].randomElement(using: &random)!)
                return offsets[index]..<(offsets[index] + size)
            }
            withPieces(messages, pieces) { MD5State.update(&states, with: $0, kernel: kernel) }
            for index in messages.indices { offsets[index] = pieces[index].upperBound }
        }
        for (message, state) in zip(messages, states) {
            var reference = Checksummer(.md5)
            reference.update(message)
            #expect(state.finalize() == reference.finalize(), "\(kernel.name), \(message.count) bytes")
            #expect(state.byteCount == UInt64(message.count))
        }
    }

    @Test("Any number of messages at once, of lengths that share no block count, comes out right", arguments: MD5Kernel.allCases)
    func anyNumberOfMessages(kernel: MD5Kernel) {
        // 1 to 19 messages cover one message alone, two and three interleaved, a vector round of 4 to 8, and
        // more messages than one round takes.
        for count in 1...19 {
            let messages = (0..<count).map { index in
                [UInt8](repeating: UInt8(index), count: 64 * (index + 1) + index)
            }
            var states = [MD5State](repeating: MD5State(), count: messages.count)
            withPieces(messages, messages.map { 0..<$0.count }) { MD5State.update(&states, with: $0, kernel: kernel) }
            for (message, state) in zip(messages, states) {
                var reference = Checksummer(.md5)
                reference.update(message)
                #expect(state.finalize() == reference.finalize(), "\(kernel.name), \(count) messages, \(message.count) bytes")
            }
        }
    }

    private func withPieces(_ messages: [[UInt8]], _ ranges: [Range<Int>], _ body: ([UnsafeRawBufferPointer]) -> Void) {
        func nest(_ index: Int, _ pointers: [UnsafeRawBufferPointer]) {
            if index == messages.count { return body(pointers) }
            messages[index].withUnsafeBytes { nest(index + 1, pointers + [UnsafeRawBufferPointer(rebasing: $0[ranges[index]])]) }
        }
        nest(0, [])
    }

    private func hex(_ bytes: [UInt8]) -> String {
        bytes.map { String($0, radix: 16) }.map { $0.count == 1 ? "0" + $0 : $0 }.joined()
    }
}
