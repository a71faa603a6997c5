import CFerryChecksums

/// CPU features the CRC kernels may use.
///
/// By default (``automatic``) every CRC computation uses the fastest kernel
/// the CPU supports. Restricting the set is meant for tests and benchmarks,
/// e.g. ``none`` forces the portable table-driven implementation. Bits the
/// CPU lacks are ignored, so any value is safe to pass. All kernels produce
/// identical results.
public struct CRCAcceleration: OptionSet, Hashable, Sendable, CustomStringConvertible {
    /// The raw feature bits (`FERRY_CPU_*` in `CFerryChecksums.h`).
    public let rawValue: UInt32

    /// Creates a feature set from raw `FERRY_CPU_*` bits.
    public init(rawValue: UInt32) {
        self.rawValue = rawValue
    }

    /// x86-64 SSE4.2 `crc32` instruction (CRC32C).
    public static let x86SSE42 = CRCAcceleration(rawValue: UInt32(FERRY_CPU_X86_SSE42))
    /// x86-64 PCLMULQDQ carry-less multiplication (CRC32, CRC64NVME folding;
    /// merging the interleaved CRC32C streams).
    public static let x86PCLMUL = CRCAcceleration(rawValue: UInt32(FERRY_CPU_X86_PCLMUL))
    /// x86-64 AVX-512 with VPCLMULQDQ (512-bit folding for all three CRCs).
    public static let x86AVX512VPCLMUL = CRCAcceleration(rawValue: UInt32(FERRY_CPU_X86_AVX512_VPCLMUL))
    /// ARMv8 CRC32/CRC32C instructions.
    public static let armCRC32 = CRCAcceleration(rawValue: UInt32(FERRY_CPU_ARM_CRC32))
    /// ARMv8 PMULL (64×64 carry-less multiplication; CRC64NVME folding).
    public static let armPMULL = CRCAcceleration(rawValue: UInt32(FERRY_CPU_ARM_PMULL))

    /// No special instructions: the portable slicing-by-8 implementation.
    public static let none: CRCAcceleration = []

    /// Whatever the CPU supports (the default everywhere).
    public static let automatic = CRCAcceleration(rawValue: .max)

    /// The features detected on this CPU (empty on architectures without
    /// hardware kernels).
    public static var available: CRCAcceleration {
        CRCAcceleration(rawValue: ferry_checksums_cpu_features())
    }

    /// Name of the kernel that processes large inputs of `algorithm` under
    /// these features on this CPU (e.g. "pclmulqdq", "sse4.2-crc32-3way",
    /// "portable-slice8"), or `nil` if `algorithm` is not a CRC.
    public func kernelName(for algorithm: ChecksumAlgorithm) -> String? {
        let name: UnsafePointer<CChar>
        switch algorithm.kind {
        case .crc32: name = ferry_crc32_kernel_name(rawValue)
        case .crc32c: name = ferry_crc32c_kernel_name(rawValue)
        case .crc64nvme: name = ferry_crc64nvme_kernel_name(rawValue)
        case .sha1, .sha256, .md5: return nil
        }
        return String(cString: name)
    }

    /// Feature names, e.g. "[x86SSE42, x86PCLMUL]"; "automatic" for ``automatic``.
    public var description: String {
        if self == .automatic { return "automatic" }
        let names: [(CRCAcceleration, String)] = [
            (.x86SSE42, "x86SSE42"), (.x86PCLMUL, "x86PCLMUL"), (.x86AVX512VPCLMUL, "x86AVX512VPCLMUL"),
            (.armCRC32, "armCRC32"), (.armPMULL, "armPMULL"),
        ]
        return "[" + names.filter { contains($0.0) }.map(\.1).joined(separator: ", ") + "]"
    }
}
