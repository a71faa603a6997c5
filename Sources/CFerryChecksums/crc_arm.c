/* aarch64 kernels: ARMv8 CRC32/CRC32C instructions (3-way interleaved, with
 * the streams merged by PMULL) and PMULL folding for CRC64NVME.
 *
 * The math is the same as in crc_x86.c (see the comment there): PMULL is a
 * 64x64 carry-less multiply like PCLMULQDQ, __crc32cd/__crc32d behave like
 * the x86 crc32q instruction. Every kernel carries its own target attribute;
 * callers check the CPU features first. Little-endian only (big-endian
 * aarch64 uses the portable code). */
#include "crc_internal.h"

#if defined(FERRY_HAVE_ARM_KERNELS) && !defined(__AARCH64EB__)

#include "CFerryChecksums.h"
#include "crc_tables.h"
#include <arm_acle.h>
#include <arm_neon.h>
#if defined(__linux__)
#include <sys/auxv.h>
#endif
#if defined(__APPLE__)
#include <sys/sysctl.h>
#endif

#if defined(__clang__)
#define TARGET_CRC __attribute__((target("crc")))
#define TARGET_PMULL __attribute__((target("aes")))
#define TARGET_CRC_PMULL __attribute__((target("crc,aes")))
#else
#define TARGET_CRC __attribute__((target("+crc")))
#define TARGET_PMULL __attribute__((target("+crypto")))
#define TARGET_CRC_PMULL __attribute__((target("+crc+crypto")))
#endif

#define MIN_PMULL 64

#if defined(__APPLE__)
static int apple_sysctl_flag(const char *name) {
    int value = 0;
    size_t size = sizeof value;
    if (sysctlbyname(name, &value, &size, NULL, 0) != 0) return -1;
    return value != 0;
}
#endif

FERRY_HIDDEN uint32_t ferry_arm_cpu_features(void) {
    uint32_t f = 0;
#if defined(__linux__)
    unsigned long hw = getauxval(AT_HWCAP);
    if (hw & (1ul << 7)) f |= FERRY_CPU_ARM_CRC32; /* HWCAP_CRC32 */
    if (hw & (1ul << 4)) f |= FERRY_CPU_ARM_PMULL; /* HWCAP_PMULL */
#elif defined(__APPLE__)
    /* All arm64 CPUs supported by macOS 11+/iOS 17 have both; ask anyway. */
    if (apple_sysctl_flag("hw.optional.armv8_crc32") != 0) f |= FERRY_CPU_ARM_CRC32;
    if (apple_sysctl_flag("hw.optional.arm.FEAT_PMULL") != 0) f |= FERRY_CPU_ARM_PMULL;
#endif
#if defined(__ARM_FEATURE_CRC32)
    f |= FERRY_CPU_ARM_CRC32;
#endif
#if defined(__ARM_FEATURE_AES) || defined(__ARM_FEATURE_CRYPTO)
    f |= FERRY_CPU_ARM_PMULL;
#endif
    return f;
}

/* ------------------------------------------------------------------------ */
/* CRC32 / CRC32C instructions                                               */
/* ------------------------------------------------------------------------ */

TARGET_CRC static uint32_t crc32_arm_1way(uint32_t c, const uint8_t *p, size_t n) {
    while (n >= 8) {
        c = __crc32d(c, ferry_load_le64(p));
        p += 8;
        n -= 8;
    }
    while (n--) c = __crc32b(c, *p++);
    return c;
}

TARGET_CRC static uint32_t crc32c_arm_1way(uint32_t c, const uint8_t *p, size_t n) {
    while (n >= 8) {
        c = __crc32cd(c, ferry_load_le64(p));
        p += 8;
        n -= 8;
    }
    while (n--) c = __crc32cb(c, *p++);
    return c;
}

TARGET_PMULL static inline uint64_t clmul_lo64(uint64_t a, uint64_t b) {
    return vgetq_lane_u64(vreinterpretq_u64_p128(vmull_p64((poly64_t)a, (poly64_t)b)), 0);
}

/* Merges three adjacent L-byte streams: c0*x^(8*2L) ^ c1*x^(8*L) ^ c2. */
#define ARM_MERGE3(INSN, c0, c1, c2, k2L, kL) (INSN(0, clmul_lo64((c0), (k2L)) ^ clmul_lo64((c1), (kL))) ^ (c2))

#define ARM_3WAY_BLOCK(INSN, L, k2L, kL)                                       \
    while (n >= 3 * (L)) {                                                     \
        uint32_t c0 = c, c1 = 0, c2 = 0;                                       \
        const uint8_t *end = p + (L);                                          \
        do {                                                                   \
            c0 = INSN(c0, ferry_load_le64(p));                                 \
            c1 = INSN(c1, ferry_load_le64(p + (L)));                           \
            c2 = INSN(c2, ferry_load_le64(p + 2 * (L)));                       \
            p += 8;                                                            \
        } while (p < end);                                                     \
        c = ARM_MERGE3(INSN, c0, c1, c2, (k2L), (kL));                         \
        p += 2 * (L);                                                          \
        n -= 3 * (L);                                                          \
    }

TARGET_CRC_PMULL static uint32_t crc32_arm_3way(uint32_t c, const uint8_t *p, size_t n) {
    ARM_3WAY_BLOCK(__crc32d, 32768, crc32_shift_65536, crc32_shift_32768)
    ARM_3WAY_BLOCK(__crc32d, 2048, crc32_shift_4096, crc32_shift_2048)
    ARM_3WAY_BLOCK(__crc32d, 256, crc32_shift_512, crc32_shift_256)
    return crc32_arm_1way(c, p, n);
}

TARGET_CRC_PMULL static uint32_t crc32c_arm_3way(uint32_t c, const uint8_t *p, size_t n) {
    ARM_3WAY_BLOCK(__crc32cd, 32768, crc32c_shift_65536, crc32c_shift_32768)
    ARM_3WAY_BLOCK(__crc32cd, 2048, crc32c_shift_4096, crc32c_shift_2048)
    ARM_3WAY_BLOCK(__crc32cd, 256, crc32c_shift_512, crc32c_shift_256)
    return crc32c_arm_1way(c, p, n);
}

/* ------------------------------------------------------------------------ */
/* PMULL folding (16-byte lanes, 4 accumulators)                             */
/* ------------------------------------------------------------------------ */

TARGET_PMULL static inline uint64x2_t fold_neon(uint64x2_t lane, poly64x2_t k, uint64x2_t next) {
    uint64x2_t lo = vreinterpretq_u64_p128(vmull_p64((poly64_t)vgetq_lane_u64(lane, 0), vgetq_lane_p64(k, 0)));
    uint64x2_t hi = vreinterpretq_u64_p128(vmull_high_p64(vreinterpretq_p64_u64(lane), k));
    return veorq_u64(veorq_u64(lo, hi), next);
}

static inline uint64x2_t load_u64x2(const uint8_t *p) { return vreinterpretq_u64_u8(vld1q_u8(p)); }

/* Same contract as fold_pclmul in crc_x86.c (n >= 64). */
TARGET_PMULL static size_t fold_pmull(const uint64_t k512[2], const uint64_t k128[2], uint64_t state,
                                      const uint8_t *p, size_t n, uint8_t out[16]) {
    const uint8_t *start = p;
    uint64x2_t x0 = veorq_u64(load_u64x2(p), vsetq_lane_u64(state, vdupq_n_u64(0), 0));
    uint64x2_t x1 = load_u64x2(p + 16), x2 = load_u64x2(p + 32), x3 = load_u64x2(p + 48);
    p += 64;
    n -= 64;
    poly64x2_t k = vreinterpretq_p64_u64(vld1q_u64(k512));
    while (n >= 64) {
        x0 = fold_neon(x0, k, load_u64x2(p));
        x1 = fold_neon(x1, k, load_u64x2(p + 16));
        x2 = fold_neon(x2, k, load_u64x2(p + 32));
        x3 = fold_neon(x3, k, load_u64x2(p + 48));
        p += 64;
        n -= 64;
    }
    k = vreinterpretq_p64_u64(vld1q_u64(k128));
    x1 = fold_neon(x0, k, x1);
    x2 = fold_neon(x1, k, x2);
    x0 = fold_neon(x2, k, x3);
    while (n >= 16) {
        x0 = fold_neon(x0, k, load_u64x2(p));
        p += 16;
        n -= 16;
    }
    vst1q_u8(out, vreinterpretq_u8_u64(x0));
    return (size_t)(p - start);
}

/* ------------------------------------------------------------------------ */
/* Per-algorithm drivers                                                     */
/* ------------------------------------------------------------------------ */

FERRY_HIDDEN uint32_t ferry_crc32_arm(uint32_t s, const uint8_t *p, size_t n, uint32_t features) {
    if (features & FERRY_CPU_ARM_CRC32) {
        return (features & FERRY_CPU_ARM_PMULL) ? crc32_arm_3way(s, p, n) : crc32_arm_1way(s, p, n);
    }
    if ((features & FERRY_CPU_ARM_PMULL) && n >= MIN_PMULL) {
        uint8_t lane[16];
        size_t used = fold_pmull(crc32_fold_512, crc32_fold_128, s, p, n, lane);
        s = ferry_crc32_sw(0, lane, 16);
        return ferry_crc32_sw(s, p + used, n - used);
    }
    return ferry_crc32_sw(s, p, n);
}

FERRY_HIDDEN uint32_t ferry_crc32c_arm(uint32_t s, const uint8_t *p, size_t n, uint32_t features) {
    if (features & FERRY_CPU_ARM_CRC32) {
        return (features & FERRY_CPU_ARM_PMULL) ? crc32c_arm_3way(s, p, n) : crc32c_arm_1way(s, p, n);
    }
    if ((features & FERRY_CPU_ARM_PMULL) && n >= MIN_PMULL) {
        uint8_t lane[16];
        size_t used = fold_pmull(crc32c_fold_512, crc32c_fold_128, s, p, n, lane);
        s = ferry_crc32c_sw(0, lane, 16);
        return ferry_crc32c_sw(s, p + used, n - used);
    }
    return ferry_crc32c_sw(s, p, n);
}

FERRY_HIDDEN uint64_t ferry_crc64nvme_arm(uint64_t s, const uint8_t *p, size_t n, uint32_t features) {
    if ((features & FERRY_CPU_ARM_PMULL) && n >= MIN_PMULL) {
        uint8_t lane[16];
        size_t used = fold_pmull(crc64nvme_fold_512, crc64nvme_fold_128, s, p, n, lane);
        s = ferry_crc64nvme_sw(0, lane, 16);
        return ferry_crc64nvme_sw(s, p + used, n - used);
    }
    return ferry_crc64nvme_sw(s, p, n);
}

FERRY_HIDDEN const char *ferry_arm_kernel_name(int which, uint32_t f) {
    if (which == 2) return (f & FERRY_CPU_ARM_PMULL) ? "pmull" : "portable-slice8";
    if (f & FERRY_CPU_ARM_CRC32) return (f & FERRY_CPU_ARM_PMULL) ? "armv8-crc32-3way" : "armv8-crc32";
    if (f & FERRY_CPU_ARM_PMULL) return "pmull";
    return "portable-slice8";
}

#elif defined(FERRY_HAVE_ARM_KERNELS)

/* Big-endian: no hardware kernels. */
FERRY_HIDDEN uint32_t ferry_arm_cpu_features(void) { return 0; }
FERRY_HIDDEN uint32_t ferry_crc32_arm(uint32_t s, const uint8_t *p, size_t n, uint32_t f) {
    (void)f;
    return ferry_crc32_sw(s, p, n);
}
FERRY_HIDDEN uint32_t ferry_crc32c_arm(uint32_t s, const uint8_t *p, size_t n, uint32_t f) {
    (void)f;
    return ferry_crc32c_sw(s, p, n);
}
FERRY_HIDDEN uint64_t ferry_crc64nvme_arm(uint64_t s, const uint8_t *p, size_t n, uint32_t f) {
    (void)f;
    return ferry_crc64nvme_sw(s, p, n);
}
FERRY_HIDDEN const char *ferry_arm_kernel_name(int which, uint32_t f) {
    (void)which;
    (void)f;
    return "portable-slice8";
}

#endif
