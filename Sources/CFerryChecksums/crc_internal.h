/* Internal interface between the portable code (crc.c) and the architecture
 * kernels (crc_x86.c, crc_arm.c). Not part of the public API.
 *
 * Every function here works on the RAW (non-inverted) register state: the
 * public functions invert on entry and exit. */
#ifndef FERRY_CRC_INTERNAL_H
#define FERRY_CRC_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if defined(__GNUC__) || defined(__clang__)
#define FERRY_HIDDEN __attribute__((visibility("hidden")))
#else
#define FERRY_HIDDEN
#endif

static inline uint64_t ferry_load_le64(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, sizeof v);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    return v;
}

/* Portable slicing-by-8 (crc.c). */
FERRY_HIDDEN uint32_t ferry_crc32_sw(uint32_t state, const uint8_t *p, size_t n);
FERRY_HIDDEN uint32_t ferry_crc32c_sw(uint32_t state, const uint8_t *p, size_t n);
FERRY_HIDDEN uint64_t ferry_crc64nvme_sw(uint64_t state, const uint8_t *p, size_t n);

/* Hardware kernels: called with the usable feature bits (already intersected
 * with what the CPU supports); each processes all n bytes, choosing the best
 * kernel for those features and falling back to the portable code for short
 * inputs or when no feature helps. `which` for the name functions:
 * 0 = CRC32, 1 = CRC32C, 2 = CRC64NVME. */
#if (defined(__x86_64__) || defined(_M_X64)) && (defined(__GNUC__) || defined(__clang__))
#define FERRY_HAVE_X86_KERNELS 1
FERRY_HIDDEN uint32_t ferry_x86_cpu_features(void);
FERRY_HIDDEN uint32_t ferry_crc32_x86(uint32_t state, const uint8_t *p, size_t n, uint32_t features);
FERRY_HIDDEN uint32_t ferry_crc32c_x86(uint32_t state, const uint8_t *p, size_t n, uint32_t features);
FERRY_HIDDEN uint64_t ferry_crc64nvme_x86(uint64_t state, const uint8_t *p, size_t n, uint32_t features);
FERRY_HIDDEN const char *ferry_x86_kernel_name(int which, uint32_t features);
#endif

#if (defined(__aarch64__) || defined(_M_ARM64)) && (defined(__GNUC__) || defined(__clang__))
#define FERRY_HAVE_ARM_KERNELS 1
FERRY_HIDDEN uint32_t ferry_arm_cpu_features(void);
FERRY_HIDDEN uint32_t ferry_crc32_arm(uint32_t state, const uint8_t *p, size_t n, uint32_t features);
FERRY_HIDDEN uint32_t ferry_crc32c_arm(uint32_t state, const uint8_t *p, size_t n, uint32_t features);
FERRY_HIDDEN uint64_t ferry_crc64nvme_arm(uint64_t state, const uint8_t *p, size_t n, uint32_t features);
FERRY_HIDDEN const char *ferry_arm_kernel_name(int which, uint32_t features);
#endif

#endif /* FERRY_CRC_INTERNAL_H */
