/* Portable CRC implementations, combine functions and run-time dispatch.
 * See include/CFerryChecksums.h for the API and conventions. */
#include "CFerryChecksums.h"
#include "crc_internal.h"
#include "crc_tables.h"

/* ------------------------------------------------------------------------ */
/* Portable slicing-by-8                                                     */
/* ------------------------------------------------------------------------ */

/* Slicing-by-8 of a reflected CRC whose state is a `type`, over its eight 256-entry tables. */
#define FERRY_SLICE8(name, type)                                                                                   \
    static inline type name(const type (*t)[256], type c, const uint8_t *p, size_t n) {                          \
        while (n && ((uintptr_t)p & 7)) {                                                                          \
            c = t[0][(c ^ *p++) & 0xff] ^ (c >> 8);                                                                \
            n--;                                                                                                   \
        }                                                                                                          \
        while (n >= 8) {                                                                                           \
            uint64_t w = ferry_load_le64(p) ^ c;                                                                   \
            c = t[7][w & 0xff] ^ t[6][(w >> 8) & 0xff] ^ t[5][(w >> 16) & 0xff] ^ t[4][(w >> 24) & 0xff] ^        \
                t[3][(w >> 32) & 0xff] ^ t[2][(w >> 40) & 0xff] ^ t[1][(w >> 48) & 0xff] ^ t[0][w >> 56];          \
            p += 8;                                                                                                \
            n -= 8;                                                                                                \
        }                                                                                                          \
        while (n--) {                                                                                              \
            c = t[0][(c ^ *p++) & 0xff] ^ (c >> 8);                                                                \
        }                                                                                                          \
        return c;                                                                                                  \
    }

FERRY_SLICE8(crc32_slice8, uint32_t)
FERRY_SLICE8(crc64_slice8, uint64_t)

FERRY_HIDDEN uint32_t ferry_crc32_sw(uint32_t state, const uint8_t *p, size_t n) {
    return crc32_slice8(crc32_table, state, p, n);
}

FERRY_HIDDEN uint32_t ferry_crc32c_sw(uint32_t state, const uint8_t *p, size_t n) {
    return crc32_slice8(crc32c_table, state, p, n);
}

FERRY_HIDDEN uint64_t ferry_crc64nvme_sw(uint64_t state, const uint8_t *p, size_t n) {
    return crc64_slice8(crc64nvme_table, state, p, n);
}

/* ------------------------------------------------------------------------ */
/* CPU features                                                              */
/* ------------------------------------------------------------------------ */

#define FERRY_FEATURES_DETECTED 0x80000000u

uint32_t ferry_checksums_cpu_features(void) {
#if defined(FERRY_HAVE_X86_KERNELS) || defined(FERRY_HAVE_ARM_KERNELS)
    static uint32_t cached; /* 0 = not detected yet; accessed atomically */
    uint32_t v = __atomic_load_n(&cached, __ATOMIC_RELAXED);
    if (v == 0) {
#if defined(FERRY_HAVE_X86_KERNELS)
        v = ferry_x86_cpu_features() | FERRY_FEATURES_DETECTED;
#else
        v = ferry_arm_cpu_features() | FERRY_FEATURES_DETECTED;
#endif
        /* Racing threads compute and store the same value. */
        __atomic_store_n(&cached, v, __ATOMIC_RELAXED);
    }
    return v & ~FERRY_FEATURES_DETECTED;
#else
    return 0;
#endif
}

/* ------------------------------------------------------------------------ */
/* Dispatch (state in/out is the finalized CRC, see the header)              */
/* ------------------------------------------------------------------------ */

static const uint8_t ferry_empty_byte = 0;
#define FERRY_BYTES(data) ((data) ? (const uint8_t *)(data) : &ferry_empty_byte)

/* One dispatcher per CRC: the CPU's kernel when the caller allows one and the CPU has it, else the table-driven one. */
#if defined(FERRY_HAVE_X86_KERNELS)
#define FERRY_KERNEL(name) \
    if (features) return ~ferry_##name##_x86(s, p, length, features);
#elif defined(FERRY_HAVE_ARM_KERNELS)
#define FERRY_KERNEL(name) \
    if (features) return ~ferry_##name##_arm(s, p, length, features);
#else
#define FERRY_KERNEL(name)
#endif

#define FERRY_DISPATCH(name, type) \
    type ferry_##name##_update_with_features(type crc, const void *data, size_t length, uint32_t features) { \
        const uint8_t *p = FERRY_BYTES(data); \
        type s = ~crc; \
        features &= ferry_checksums_cpu_features(); \
        FERRY_KERNEL(name) \
        return ~ferry_##name##_sw(s, p, length); \
    }

FERRY_DISPATCH(crc32, uint32_t)
FERRY_DISPATCH(crc32c, uint32_t)
FERRY_DISPATCH(crc64nvme, uint64_t)

uint32_t ferry_crc32_update(uint32_t crc, const void *data, size_t length) {
    return ferry_crc32_update_with_features(crc, data, length, ~0u);
}
uint32_t ferry_crc32c_update(uint32_t crc, const void *data, size_t length) {
    return ferry_crc32c_update_with_features(crc, data, length, ~0u);
}
uint64_t ferry_crc64nvme_update(uint64_t crc, const void *data, size_t length) {
    return ferry_crc64nvme_update_with_features(crc, data, length, ~0u);
}

uint32_t ferry_crc32_update_portable(uint32_t crc, const void *data, size_t length) {
    return ~ferry_crc32_sw(~crc, FERRY_BYTES(data), length);
}
uint32_t ferry_crc32c_update_portable(uint32_t crc, const void *data, size_t length) {
    return ~ferry_crc32c_sw(~crc, FERRY_BYTES(data), length);
}
uint64_t ferry_crc64nvme_update_portable(uint64_t crc, const void *data, size_t length) {
    return ~ferry_crc64nvme_sw(~crc, FERRY_BYTES(data), length);
}

static const char *kernel_name(int which, uint32_t features) {
    features &= ferry_checksums_cpu_features();
#if defined(FERRY_HAVE_X86_KERNELS)
    if (features) return ferry_x86_kernel_name(which, features);
#elif defined(FERRY_HAVE_ARM_KERNELS)
    if (features) return ferry_arm_kernel_name(which, features);
#endif
    (void)which;
    return "portable-slice8";
}

const char *ferry_crc32_kernel_name(uint32_t features) { return kernel_name(0, features); }
const char *ferry_crc32c_kernel_name(uint32_t features) { return kernel_name(1, features); }
const char *ferry_crc64nvme_kernel_name(uint32_t features) { return kernel_name(2, features); }

/* ------------------------------------------------------------------------ */
/* Combine: crc(A||B) = crc(A) * x^(8|B|) mod P  xor  crc(B)                 */
/* (valid for finalized values because init == xorout == all ones)          */
/* ------------------------------------------------------------------------ */

/* a * b mod P in the reflected domain (bit 0 = highest power). */
static uint32_t mulmod32(uint32_t a, uint32_t b, uint32_t rpoly) {
    uint32_t prod = 0;
    for (int i = 0; i < 32; i++) {
        if (a & (0x80000000u >> i)) prod ^= b;
        b = (b & 1) ? (b >> 1) ^ rpoly : b >> 1;
    }
    return prod;
}

static uint64_t mulmod64(uint64_t a, uint64_t b, uint64_t rpoly) {
    uint64_t prod = 0;
    for (int i = 0; i < 64; i++) {
        if (a & (0x8000000000000000ull >> i)) prod ^= b;
        b = (b & 1) ? (b >> 1) ^ rpoly : b >> 1;
    }
    return prod;
}

/* x^(8 * len) mod P using the table of x^(2^k) mod P. */
static uint32_t xpow8n32(uint64_t len, const uint32_t *x2n, uint32_t rpoly) {
    uint32_t p = 0x80000000u; /* x^0 */
    for (int k = 3; len; len >>= 1, k++) {
        if (len & 1) p = mulmod32(x2n[k], p, rpoly);
    }
    return p;
}

static uint64_t xpow8n64(uint64_t len, const uint64_t *x2n, uint64_t rpoly) {
    uint64_t p = 0x8000000000000000ull;
    for (int k = 3; len; len >>= 1, k++) {
        if (len & 1) p = mulmod64(x2n[k], p, rpoly);
    }
    return p;
}

uint32_t ferry_crc32_combine(uint32_t crc1, uint32_t crc2, uint64_t length2) {
    return mulmod32(xpow8n32(length2, crc32_x2n, FERRY_CRC32_RPOLY), crc1, FERRY_CRC32_RPOLY) ^ crc2;
}

uint32_t ferry_crc32c_combine(uint32_t crc1, uint32_t crc2, uint64_t length2) {
    return mulmod32(xpow8n32(length2, crc32c_x2n, FERRY_CRC32C_RPOLY), crc1, FERRY_CRC32C_RPOLY) ^ crc2;
}

uint64_t ferry_crc64nvme_combine(uint64_t crc1, uint64_t crc2, uint64_t length2) {
    return mulmod64(xpow8n64(length2, crc64nvme_x2n, FERRY_CRC64NVME_RPOLY), crc1, FERRY_CRC64NVME_RPOLY) ^ crc2;
}
