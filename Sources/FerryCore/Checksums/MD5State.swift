import CFerryChecksums

/// The running MD5 of one message, which can be advanced together with the MD5s of other messages.
///
/// MD5 is one long chain of dependent additions, so hashing one message leaves most of a core idle. Advancing
/// several states in one call (``update(_:with:kernel:)``) hashes their whole blocks side by side in the lanes of a
/// vector register (or, for two or three, interleaved in general registers), up to ``MD5Kernel/lanes`` messages for
/// about the time of one or two. The server uses this for the ETags of parts it receives at the same time.
package struct MD5State: Sendable {
    private var words: (UInt32, UInt32, UInt32, UInt32) = (0x6745_2301, 0xefcd_ab89, 0x98ba_dcfe, 0x1032_5476)
    /// Bytes passed to the updates so far.
    package private(set) var byteCount: UInt64 = 0
    /// The bytes of the last partial block (fewer than 64).
    private var tail: [UInt8] = []

    package init() {}

    /// Adds `bytes` to the message.
    package mutating func update(_ bytes: UnsafeRawBufferPointer) {
        var states = [self]
        Self.update(&states, with: [bytes], kernel: .portable)
        self = states[0]
    }

    /// The 16-byte digest of the message so far.
    package func finalize() -> [UInt8] {
        var state = self
        var padding: [UInt8] = [0x80] + [UInt8](repeating: 0, count: (55 - tail.count + 64) % 64)
        withUnsafeBytes(of: (byteCount &* 8).littleEndian) { padding += $0 }
        padding.withUnsafeBytes { state.update($0) }
        precondition(state.tail.isEmpty)
        var digest: [UInt8] = []
        for word in [state.words.0, state.words.1, state.words.2, state.words.3] {
            withUnsafeBytes(of: word.littleEndian) { digest += $0 }
        }
        return digest
    }

    /// Adds `bytes[i]` to `states[i]` for every `i`, hashing the whole blocks of all of them side by side.
    ///
    /// Partial blocks at either end of a message's bytes are kept or completed one message at a time; the messages'
    /// whole blocks go through the multi-message kernel in rounds of the shortest remaining length.
    package static func update(
        _ states: inout [MD5State], with bytes: [UnsafeRawBufferPointer], kernel: MD5Kernel = .automatic
    ) {
        precondition(states.count == bytes.count, "one buffer per state")
        var rest = bytes
        for index in states.indices {
            states[index].byteCount += UInt64(rest[index].count)
            rest[index] = states[index].fillTail(from: rest[index])
        }
        // Whole blocks, side by side, for as long as every remaining message has some.
        var active = states.indices.filter { rest[$0].count >= 64 }
        while !active.isEmpty {
            let blocks = active.map { rest[$0].count / 64 }.min() ?? 0
            var words = active.flatMap { index -> [UInt32] in
                let w = states[index].words
                return [w.0, w.1, w.2, w.3]
            }
            let pointers: [UnsafeRawPointer?] = active.map { UnsafeRawPointer(rest[$0].baseAddress) }
            pointers.withUnsafeBufferPointer { data in
                ferry_md5_compress_lanes_with_features(&words, data.baseAddress, active.count, blocks, kernel.features)
            }
            for (lane, index) in active.enumerated() {
                states[index].words = (words[4 * lane], words[4 * lane + 1], words[4 * lane + 2], words[4 * lane + 3])
                rest[index] = UnsafeRawBufferPointer(rebasing: rest[index][(blocks * 64)...])
            }
            active = active.filter { rest[$0].count >= 64 }
        }
        for index in states.indices where rest[index].count > 0 {
            states[index].tail += rest[index]
        }
    }

    /// Completes and compresses a partial block from the front of `bytes`; returns what is left of them.
    private mutating func fillTail(from bytes: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer {
        guard !tail.isEmpty else { return bytes }
        let taken = min(64 - tail.count, bytes.count)
        tail += bytes[..<taken]
        if tail.count == 64 {
            var w = [words.0, words.1, words.2, words.3]
            tail.withUnsafeBytes { ferry_md5_compress(&w, $0.baseAddress, 1) }
            words = (w[0], w[1], w[2], w[3])
            tail = []
        }
        return UnsafeRawBufferPointer(rebasing: bytes[taken...])
    }
}

/// Which multi-message MD5 kernel ``MD5State/update(_:with:kernel:)`` may use. Kernels the CPU lacks fall back to the
/// next simpler one; all give the same digests.
package enum MD5Kernel: CaseIterable, Sendable {
    /// The fastest the CPU has.
    case automatic
    /// Portable C: two or three messages interleaved in general registers.
    case portable
    /// x86-64 AVX2, eight messages at once.
    case x86AVX2
    /// x86-64 AVX-512VL, eight messages at once.
    case x86AVX512VL

    var features: UInt32 {
        switch self {
        case .automatic: return .max
        case .portable: return 0
        case .x86AVX2: return UInt32(FERRY_CPU_X86_AVX2)
        case .x86AVX512VL: return UInt32(FERRY_CPU_X86_AVX512VL)
        }
    }

    /// The widest kernel's name on this CPU, e.g. "avx512vl-x8" or "interleaved-x3".
    package var name: String { String(cString: ferry_md5_kernel_name(features)) }

    /// Messages the fastest kernel on this CPU hashes side by side (3 without a vector kernel).
    package static var lanes: Int { ferry_md5_lanes() }
}
