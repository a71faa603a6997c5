/* x86-64 kernels: SSE4.2 crc32 (CRC32C), PCLMULQDQ and AVX-512 VPCLMULQDQ
 * folding (CRC32, CRC32C, CRC64NVME).
 *
 * Every kernel carries its own __attribute__((target(...))), so the file
 * builds without any global -m flags; callers check CPUID first.
 *
 * Folding (all in the bit-reflected domain): a 128-bit lane L holding 16
 * message bytes is the polynomial Lh*x^64 + Ll, where Lh is the low 64-bit
 * half (the earlier bytes) and Ll the high half. A carry-less multiply of two
 * 64-bit reflected values yields (a*b*x) as a 128-bit reflected lane, so
 *     clmul(Lh, x^(D+63) mod P) ^ clmul(Ll, x^(D-1) mod P)  ==  L * x^D  (mod P)
 * is a 128-bit lane congruent to L moved D bits further into the message;
 * xor-ing it into the lane found there folds the two. After folding down to
 * one lane plus a tail of < 16 bytes, the CRC of the whole input equals the
 * plain CRC (initial state 0) of those 16 + tail bytes, which the portable
 * code (or the crc32 instruction) finishes. The initial state is xor-ed into
 * the first bytes, which is equivalent for reflected CRCs. */
#include "crc_internal.h"

#if defined(FERRY_HAVE_X86_KERNELS)

#include "CFerryChecksums.h"
#include "crc_tables.h"
#include <cpuid.h>
#include <immintrin.h>

#define TARGET_SSE42 __attribute__((target("sse4.2")))
#define TARGET_CLMUL __attribute__((target("sse4.2,pclmul")))
#define TARGET_AVX512 __attribute__((target("sse4.2,pclmul,avx2,avx512f,vpclmulqdq")))

/* Inputs shorter than these use the next simpler kernel. */
#define MIN_PCLMUL 64
#define MIN_AVX512 256

/* ------------------------------------------------------------------------ */
/* CPUID                                                                     */
/* ------------------------------------------------------------------------ */

FERRY_HIDDEN uint32_t ferry_x86_cpu_features(void) {
    unsigned a, b, c, d;
    uint32_t f = 0;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
    if (c & (1u << 20)) f |= FERRY_CPU_X86_SSE42;
    if (c & (1u << 1)) f |= FERRY_CPU_X86_PCLMUL;
    int osxsave = (c >> 27) & 1;
    if (osxsave && __get_cpuid_max(0, 0) >= 7) {
        unsigned xlo, xhi;
        __asm__ volatile("xgetbv" : "=a"(xlo), "=d"(xhi) : "c"(0));
        (void)xhi;
        /* XMM, YMM, opmask, ZMM_Hi256 and Hi16_ZMM state enabled by the OS.
         * (macOS enables the AVX-512 state lazily, so there this test may
         * fail and the SSE/PCLMULQDQ kernels are used instead.) */
        int os_avx512 = (xlo & 0xE6u) == 0xE6u;
        int os_avx = (xlo & 0x6u) == 0x6u;
        __cpuid_count(7, 0, a, b, c, d);
        int avx2 = (b >> 5) & 1;
        int avx512f = (b >> 16) & 1;
        int avx512vl = (b >> 31) & 1;
        int vpclmul = (c >> 10) & 1;
        if (os_avx512 && avx512f && vpclmul && (f & FERRY_CPU_X86_PCLMUL) && (f & FERRY_CPU_X86_SSE42))
            f |= FERRY_CPU_X86_AVX512_VPCLMUL;
        if (os_avx && avx2) f |= FERRY_CPU_X86_AVX2;
        if (os_avx512 && avx2 && avx512f && avx512vl) f |= FERRY_CPU_X86_AVX512VL;
    }
    return f;
}

/* ------------------------------------------------------------------------ */
/* PCLMULQDQ folding (16-byte lanes, 4 accumulators)                         */
/* ------------------------------------------------------------------------ */

TARGET_CLMUL static inline __m128i fold128(__m128i lane, __m128i k, __m128i next) {
    __m128i lo = _mm_clmulepi64_si128(lane, k, 0x00);
    __m128i hi = _mm_clmulepi64_si128(lane, k, 0x11);
    return _mm_xor_si128(_mm_xor_si128(lo, hi), next);
}

static inline __m128i load128(const uint8_t *p) { return _mm_loadu_si128((const __m128i *)(const void *)p); }

/* Folds the longest multiple of 16 bytes of p[0..n) (n >= 64) into *out and
 * returns the number of bytes consumed. */
TARGET_CLMUL static size_t fold_pclmul(const uint64_t k512[2], const uint64_t k128[2], uint64_t state,
                                       const uint8_t *p, size_t n, uint8_t out[16]) {
    const uint8_t *start = p;
    __m128i x0 = _mm_xor_si128(load128(p), _mm_cvtsi64_si128((long long)state));
    __m128i x1 = load128(p + 16), x2 = load128(p + 32), x3 = load128(p + 48);
    p += 64;
    n -= 64;
    __m128i k = _mm_loadu_si128((const __m128i *)(const void *)k512);
    while (n >= 64) {
        x0 = fold128(x0, k, load128(p));
        x1 = fold128(x1, k, load128(p + 16));
        x2 = fold128(x2, k, load128(p + 32));
        x3 = fold128(x3, k, load128(p + 48));
        p += 64;
        n -= 64;
    }
    k = _mm_loadu_si128((const __m128i *)(const void *)k128);
    x1 = fold128(x0, k, x1);
    x2 = fold128(x1, k, x2);
    x0 = fold128(x2, k, x3);
    while (n >= 16) {
        x0 = fold128(x0, k, load128(p));
        p += 16;
        n -= 16;
    }
    _mm_storeu_si128((__m128i *)(void *)out, x0);
    return (size_t)(p - start);
}

/* ------------------------------------------------------------------------ */
/* AVX-512 VPCLMULQDQ folding (64-byte vectors, 4 accumulators)              */
/* ------------------------------------------------------------------------ */

TARGET_AVX512 static inline __m512i fold512(__m512i v, __m512i k, __m512i next) {
    __m512i lo = _mm512_clmulepi64_epi128(v, k, 0x00);
    __m512i hi = _mm512_clmulepi64_epi128(v, k, 0x11);
    return _mm512_ternarylogic_epi64(lo, hi, next, 0x96); /* lo ^ hi ^ next */
}

TARGET_AVX512 static inline __m512i load512(const uint8_t *p) { return _mm512_loadu_si512((const void *)p); }

TARGET_AVX512 static inline __m512i broadcast_k(const uint64_t k[2]) {
    return _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)(const void *)k));
}

/* Same contract as fold_pclmul, for n >= 256. */
TARGET_AVX512 static size_t fold_avx512(const uint64_t k2048[2], const uint64_t k512[2], const uint64_t k384[2],
                                        const uint64_t k256[2], const uint64_t k128[2], uint64_t state,
                                        const uint8_t *p, size_t n, uint8_t out[16]) {
    const uint8_t *start = p;
    __m512i x0 = _mm512_xor_si512(load512(p), _mm512_zextsi128_si512(_mm_cvtsi64_si128((long long)state)));
    __m512i x1 = load512(p + 64), x2 = load512(p + 128), x3 = load512(p + 192);
    p += 256;
    n -= 256;
    __m512i k = broadcast_k(k2048);
    while (n >= 256) {
        x0 = fold512(x0, k, load512(p));
        x1 = fold512(x1, k, load512(p + 64));
        x2 = fold512(x2, k, load512(p + 128));
        x3 = fold512(x3, k, load512(p + 192));
        p += 256;
        n -= 256;
    }
    k = broadcast_k(k512);
    x1 = fold512(x0, k, x1);
    x2 = fold512(x1, k, x2);
    x0 = fold512(x2, k, x3);
    while (n >= 64) {
        x0 = fold512(x0, k, load512(p));
        p += 64;
        n -= 64;
    }
    /* Lanes 0..2 move 384/256/128 bits forward onto lane 3. */
    __m512i kk = _mm512_set_epi64(0, 0, (long long)k128[1], (long long)k128[0], (long long)k256[1],
                                  (long long)k256[0], (long long)k384[1], (long long)k384[0]);
    __m512i t = _mm512_xor_si512(_mm512_clmulepi64_epi128(x0, kk, 0x00), _mm512_clmulepi64_epi128(x0, kk, 0x11));
    __m128i r = _mm_xor_si128(_mm512_extracti32x4_epi32(x0, 3), _mm512_castsi512_si128(t));
    r = _mm_xor_si128(r, _mm_xor_si128(_mm512_extracti32x4_epi32(t, 1), _mm512_extracti32x4_epi32(t, 2)));
    __m128i k1 = _mm_loadu_si128((const __m128i *)(const void *)k128);
    while (n >= 16) {
        r = fold128(r, k1, load128(p));
        p += 16;
        n -= 16;
    }
    _mm_storeu_si128((__m128i *)(void *)out, r);
    return (size_t)(p - start);
}

/* ------------------------------------------------------------------------ */
/* SSE4.2 crc32 instruction (CRC32C)                                         */
/* ------------------------------------------------------------------------ */

TARGET_SSE42 static uint32_t crc32c_sse42_1way(uint32_t c, const uint8_t *p, size_t n) {
    uint64_t c64 = c;
    while (n >= 8) {
        c64 = _mm_crc32_u64(c64, ferry_load_le64(p));
        p += 8;
        n -= 8;
    }
    c = (uint32_t)c64;
    while (n--) c = _mm_crc32_u8(c, *p++);
    return c;
}

/* c0 * x^(8*2L) ^ c1 * x^(8*L), reduced, xor c2: merges three adjacent
 * L-byte streams (c1 and c2 computed from state 0). */
TARGET_CLMUL static inline uint32_t crc32c_merge3(uint64_t c0, uint64_t c1, uint64_t c2, uint32_t k2L, uint32_t kL) {
    __m128i v = _mm_set_epi64x((long long)c1, (long long)c0);
    __m128i k = _mm_set_epi64x((long long)kL, (long long)k2L);
    __m128i t = _mm_xor_si128(_mm_clmulepi64_si128(v, k, 0x00), _mm_clmulepi64_si128(v, k, 0x11));
    return (uint32_t)_mm_crc32_u64(0, (uint64_t)_mm_cvtsi128_si64(t)) ^ (uint32_t)c2;
}

#define CRC32C_3WAY_BLOCK(L, k2L, kL)                                          \
    while (n >= 3 * (L)) {                                                     \
        uint64_t c0 = c, c1 = 0, c2 = 0;                                       \
        const uint8_t *end = p + (L);                                          \
        do {                                                                   \
            c0 = _mm_crc32_u64(c0, ferry_load_le64(p));                        \
            c1 = _mm_crc32_u64(c1, ferry_load_le64(p + (L)));                  \
            c2 = _mm_crc32_u64(c2, ferry_load_le64(p + 2 * (L)));              \
            p += 8;                                                            \
        } while (p < end);                                                     \
        c = crc32c_merge3(c0, c1, c2, (k2L), (kL));                            \
        p += 2 * (L);                                                          \
        n -= 3 * (L);                                                          \
    }

TARGET_CLMUL static uint32_t crc32c_sse42_3way(uint32_t c, const uint8_t *p, size_t n) {
    CRC32C_3WAY_BLOCK(32768, crc32c_shift_65536, crc32c_shift_32768)
    CRC32C_3WAY_BLOCK(2048, crc32c_shift_4096, crc32c_shift_2048)
    CRC32C_3WAY_BLOCK(256, crc32c_shift_512, crc32c_shift_256)
    return crc32c_sse42_1way(c, p, n);
}

/* ------------------------------------------------------------------------ */
/* Per-algorithm drivers                                                     */
/* ------------------------------------------------------------------------ */

FERRY_HIDDEN uint32_t ferry_crc32_x86(uint32_t s, const uint8_t *p, size_t n, uint32_t features) {
    uint8_t lane[16];
    size_t used;
    if ((features & FERRY_CPU_X86_AVX512_VPCLMUL) && n >= MIN_AVX512) {
        used = fold_avx512(crc32_fold_2048, crc32_fold_512, crc32_fold_384, crc32_fold_256, crc32_fold_128, s, p, n,
                           lane);
    } else if ((features & FERRY_CPU_X86_PCLMUL) && n >= MIN_PCLMUL) {
        used = fold_pclmul(crc32_fold_512, crc32_fold_128, s, p, n, lane);
    } else {
        return ferry_crc32_sw(s, p, n);
    }
    s = ferry_crc32_sw(0, lane, 16);
    return ferry_crc32_sw(s, p + used, n - used);
}

FERRY_HIDDEN uint32_t ferry_crc32c_x86(uint32_t s, const uint8_t *p, size_t n, uint32_t features) {
    if (!(features & FERRY_CPU_X86_SSE42)) return ferry_crc32c_sw(s, p, n);
    if ((features & FERRY_CPU_X86_AVX512_VPCLMUL) && n >= MIN_AVX512) {
        uint8_t lane[16];
        size_t used = fold_avx512(crc32c_fold_2048, crc32c_fold_512, crc32c_fold_384, crc32c_fold_256,
                                  crc32c_fold_128, s, p, n, lane);
        s = crc32c_sse42_1way(0, lane, 16);
        return crc32c_sse42_1way(s, p + used, n - used);
    }
    if (features & FERRY_CPU_X86_PCLMUL) return crc32c_sse42_3way(s, p, n);
    return crc32c_sse42_1way(s, p, n);
}

FERRY_HIDDEN uint64_t ferry_crc64nvme_x86(uint64_t s, const uint8_t *p, size_t n, uint32_t features) {
    uint8_t lane[16];
    size_t used;
    if ((features & FERRY_CPU_X86_AVX512_VPCLMUL) && n >= MIN_AVX512) {
        used = fold_avx512(crc64nvme_fold_2048, crc64nvme_fold_512, crc64nvme_fold_384, crc64nvme_fold_256,
                           crc64nvme_fold_128, s, p, n, lane);
    } else if ((features & FERRY_CPU_X86_PCLMUL) && n >= MIN_PCLMUL) {
        used = fold_pclmul(crc64nvme_fold_512, crc64nvme_fold_128, s, p, n, lane);
    } else {
        return ferry_crc64nvme_sw(s, p, n);
    }
    s = ferry_crc64nvme_sw(0, lane, 16);
    return ferry_crc64nvme_sw(s, p + used, n - used);
}

FERRY_HIDDEN const char *ferry_x86_kernel_name(int which, uint32_t f) {
    switch (which) {
    case 1:
        if (!(f & FERRY_CPU_X86_SSE42)) return "portable-slice8";
        if (f & FERRY_CPU_X86_AVX512_VPCLMUL) return "avx512-vpclmulqdq";
        if (f & FERRY_CPU_X86_PCLMUL) return "sse4.2-crc32-3way";
        return "sse4.2-crc32";
    default:
        if (f & FERRY_CPU_X86_AVX512_VPCLMUL) return "avx512-vpclmulqdq";
        if (f & FERRY_CPU_X86_PCLMUL) return "pclmulqdq";
        return "portable-slice8";
    }
}

#endif /* FERRY_HAVE_X86_KERNELS */
