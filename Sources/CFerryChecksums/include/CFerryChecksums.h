/*
 * CFerryChecksums -- CRC32, CRC32C, CRC64NVME and multi-message MD5 for Ferry.
 *
 * Algorithms (all bit-reflected, init all-ones, xorout all-ones):
 *   CRC32      zlib / ISO-HDLC, polynomial 0x04C11DB7 (reflected 0xEDB88320),
 *              check("123456789") = 0xCBF43926
 *   CRC32C     Castagnoli, polynomial 0x1EDC6F41 (reflected 0x82F63B78),
 *              check("123456789") = 0xE3069283
 *   CRC64NVME  AWS S3 CRC64NVME = CRC-64/NVME, polynomial 0xAD93D23594C93659
 *              (reflected 0x9A6C9329AC4BC9B5), check("123456789") = 0xAE8B14860A799888
 *
 * State convention (same as zlib's crc32()): every `*_update` function takes
 * and returns the FINALIZED CRC value. Start with 0 and feed the data in any
 * number of pieces:
 *
 *     uint32_t crc = 0;
 *     crc = ferry_crc32c_update(crc, part1, len1);
 *     crc = ferry_crc32c_update(crc, part2, len2);   // crc == CRC32C(part1||part2)
 *
 * `data` may be NULL when `length` is 0. All functions are thread-safe and
 * reentrant (the only global state is a cached CPU-feature word).
 *
 * Implementations: a portable slicing-by-8 table implementation is always
 * compiled. At run time the fastest kernel the CPU supports is chosen:
 *   x86-64   CRC32C: SSE4.2 `crc32` instruction, 3-way interleaved (merged
 *            with PCLMULQDQ); CRC32/CRC64NVME: PCLMULQDQ folding; all three
 *            use AVX-512 VPCLMULQDQ folding for large inputs when available.
 *   aarch64  CRC32/CRC32C: ARMv8 CRC32 instructions, 3-way interleaved when
 *            PMULL is present; CRC64NVME: PMULL folding.
 * All kernels return bit-identical results.
 */
#ifndef CFERRY_CHECKSUMS_H
#define CFERRY_CHECKSUMS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* CPU feature bits, as returned by ferry_checksums_cpu_features() and
 * accepted by the *_update_with_features() functions. */
#define FERRY_CPU_X86_SSE42 0x1u          /* SSE4.2 crc32 instruction */
#define FERRY_CPU_X86_PCLMUL 0x2u         /* PCLMULQDQ */
#define FERRY_CPU_X86_AVX512_VPCLMUL 0x4u /* AVX-512F + VPCLMULQDQ, OS-enabled */
#define FERRY_CPU_X86_AVX2 0x8u           /* AVX2, OS-enabled */
#define FERRY_CPU_X86_AVX512VL 0x10u      /* AVX-512F + AVX-512VL, OS-enabled */
#define FERRY_CPU_ARM_CRC32 0x100u        /* ARMv8 CRC32/CRC32C instructions */
#define FERRY_CPU_ARM_PMULL 0x200u        /* ARMv8 PMULL (64x64 carry-less multiply) */

/* Feature bits usable on this CPU (detected once, then cached).
 * 0 on architectures without hardware kernels. */
uint32_t ferry_checksums_cpu_features(void);

/* ---- CRC32 (zlib) ---- */

/* Best available kernel. */
uint32_t ferry_crc32_update(uint32_t crc, const void *data, size_t length);
/* Portable table-driven implementation only (never uses special instructions). */
uint32_t ferry_crc32_update_portable(uint32_t crc, const void *data, size_t length);
/* Best kernel using only the features in `features` (intersected with
 * ferry_checksums_cpu_features(), so unsupported bits are ignored; 0 means
 * portable). For tests and benchmarks. */
uint32_t ferry_crc32_update_with_features(uint32_t crc, const void *data, size_t length,
                                          uint32_t features);
/* Name of the kernel used for large inputs under `features`, e.g. "pclmulqdq". */
const char *ferry_crc32_kernel_name(uint32_t features);
/* CRC32(A || B) from crc1 = CRC32(A), crc2 = CRC32(B) and length2 = |B| in bytes. */
uint32_t ferry_crc32_combine(uint32_t crc1, uint32_t crc2, uint64_t length2);

/* ---- CRC32C (Castagnoli) ---- */

uint32_t ferry_crc32c_update(uint32_t crc, const void *data, size_t length);
uint32_t ferry_crc32c_update_portable(uint32_t crc, const void *data, size_t length);
uint32_t ferry_crc32c_update_with_features(uint32_t crc, const void *data, size_t length,
                                           uint32_t features);
const char *ferry_crc32c_kernel_name(uint32_t features);
uint32_t ferry_crc32c_combine(uint32_t crc1, uint32_t crc2, uint64_t length2);

/* ---- CRC64NVME ---- */

uint64_t ferry_crc64nvme_update(uint64_t crc, const void *data, size_t length);
uint64_t ferry_crc64nvme_update_portable(uint64_t crc, const void *data, size_t length);
uint64_t ferry_crc64nvme_update_with_features(uint64_t crc, const void *data, size_t length,
                                              uint32_t features);
const char *ferry_crc64nvme_kernel_name(uint32_t features);
uint64_t ferry_crc64nvme_combine(uint64_t crc1, uint64_t crc2, uint64_t length2);

/* ---- MD5 (RFC 1321) compression, one or several messages at a time ----
 *
 * A state is 4 words; ferry_md5_init sets the initial value. The caller
 * keeps partial blocks and appends the padding (0x80, zeros, bit length as
 * 64-bit little-endian) itself; these functions only compress whole 64-byte
 * blocks. The digest is the 4 state words, little-endian. */

void ferry_md5_init(uint32_t state[4]);
/* Compresses `blocks` 64-byte blocks of one message into state[4]. */
void ferry_md5_compress(uint32_t state[4], const void *data, size_t blocks);
/* Messages the fastest multi-message kernel hashes side by side: 8 with AVX2
 * or AVX-512VL, otherwise 3 (interleaved in general registers). */
size_t ferry_md5_lanes(void);
/* Compresses `blocks` 64-byte blocks of each of `count` independent messages:
 * message i has its state at states[4*i ... 4*i+3] and its blocks at data[i].
 * Any count works: two or three messages are interleaved in general
 * registers, four to eight share a vector register where the CPU has one. */
void ferry_md5_compress_lanes(uint32_t *states, const void *const *data, size_t count, size_t blocks);
/* The same with only the kernels `features` allows (0 = portable). */
void ferry_md5_compress_lanes_with_features(uint32_t *states, const void *const *data, size_t count, size_t blocks,
                                            uint32_t features);
/* Name of the widest multi-message kernel under `features`, e.g.
 * "avx512vl-x8" or "interleaved-x3". */
const char *ferry_md5_kernel_name(uint32_t features);

#ifdef __cplusplus
}
#endif

#endif /* CFERRY_CHECKSUMS_H */
