/* x86-64 MD5 kernels: eight messages side by side in the 32-bit lanes of a
 * 256-bit register, with AVX2, or with AVX-512VL where each MD5 boolean
 * function is one `vpternlogd` and each rotation one `vprold`.
 *
 * Every kernel carries its own __attribute__((target(...))), so the file
 * builds without any global -m flags; callers check CPUID first. */
#include "crc_internal.h"

#if defined(FERRY_HAVE_X86_KERNELS)

#include "CFerryChecksums.h"
#include "md5_internal.h"
#include <immintrin.h>

#define TARGET_AVX2 __attribute__((target("avx2")))
#define TARGET_AVX512VL __attribute__((target("avx2,avx512f,avx512vl")))

/* What unused lanes hash: they never advance, and their state is dropped. */
static const uint8_t idle_block[64];

TARGET_AVX2 static inline __m256i load256(const uint8_t *p) {
    return _mm256_loadu_si256((const __m256i *)(const void *)p);
}

/* Loads the next 64-byte block of each lane, as m[w] = word w of every lane. */
TARGET_AVX2 static inline void load_words(const uint8_t *const p[8], __m256i m[16]) {
    for (int half = 0; half < 2; half++) {
        __m256i r[8];
        for (int l = 0; l < 8; l++) r[l] = load256(p[l] + 32 * half);
        __m256i t0 = _mm256_unpacklo_epi32(r[0], r[1]), t1 = _mm256_unpackhi_epi32(r[0], r[1]);
        __m256i t2 = _mm256_unpacklo_epi32(r[2], r[3]), t3 = _mm256_unpackhi_epi32(r[2], r[3]);
        __m256i t4 = _mm256_unpacklo_epi32(r[4], r[5]), t5 = _mm256_unpackhi_epi32(r[4], r[5]);
        __m256i t6 = _mm256_unpacklo_epi32(r[6], r[7]), t7 = _mm256_unpackhi_epi32(r[6], r[7]);
        __m256i u0 = _mm256_unpacklo_epi64(t0, t2), u1 = _mm256_unpackhi_epi64(t0, t2);
        __m256i u2 = _mm256_unpacklo_epi64(t1, t3), u3 = _mm256_unpackhi_epi64(t1, t3);
        __m256i u4 = _mm256_unpacklo_epi64(t4, t6), u5 = _mm256_unpackhi_epi64(t4, t6);
        __m256i u6 = _mm256_unpacklo_epi64(t5, t7), u7 = _mm256_unpackhi_epi64(t5, t7);
        __m256i *out = m + 8 * half;
        out[0] = _mm256_permute2x128_si256(u0, u4, 0x20);
        out[1] = _mm256_permute2x128_si256(u1, u5, 0x20);
        out[2] = _mm256_permute2x128_si256(u2, u6, 0x20);
        out[3] = _mm256_permute2x128_si256(u3, u7, 0x20);
        out[4] = _mm256_permute2x128_si256(u0, u4, 0x31);
        out[5] = _mm256_permute2x128_si256(u1, u5, 0x31);
        out[6] = _mm256_permute2x128_si256(u2, u6, 0x31);
        out[7] = _mm256_permute2x128_si256(u3, u7, 0x31);
    }
}

#define V_ADD(x, y) _mm256_add_epi32((x), (y))
#define V_K(i) _mm256_set1_epi32((int)ferry_md5_k[i])

/* AVX2: rotations are two shifts and an or; the boolean functions as in RFC 1321. */
#define AVX2_ROL(x, s) _mm256_or_si256(_mm256_slli_epi32((x), (s)), _mm256_srli_epi32((x), 32 - (s)))
#define AVX2_F(b, c, d) _mm256_xor_si256((d), _mm256_and_si256((b), _mm256_xor_si256((c), (d))))
#define AVX2_G(b, c, d) _mm256_xor_si256((c), _mm256_and_si256((d), _mm256_xor_si256((b), (c))))
#define AVX2_H(b, c, d) _mm256_xor_si256(_mm256_xor_si256((b), (c)), (d))
#define AVX2_I(b, c, d) _mm256_xor_si256((c), _mm256_or_si256((b), _mm256_xor_si256((d), _mm256_set1_epi32(-1))))

/* AVX-512VL: one instruction each. */
#define AVX512_ROL(x, s) _mm256_rol_epi32((x), (s))
#define AVX512_F(b, c, d) _mm256_ternarylogic_epi32((b), (c), (d), 0xCA)
#define AVX512_G(b, c, d) _mm256_ternarylogic_epi32((b), (c), (d), 0xE4)
#define AVX512_H(b, c, d) _mm256_ternarylogic_epi32((b), (c), (d), 0x96)
#define AVX512_I(b, c, d) _mm256_ternarylogic_epi32((b), (c), (d), 0x39)

/* a + m + k does not wait for the previous step, so it is added first: only the boolean function, one addition, the
 * rotation and the final addition stay on the chain from one step to the next. */
#define V_STEP(ROL, fn, a, b, c, d, w, i, s)                                                                          \
    (a) = V_ADD((b), ROL(V_ADD(V_ADD((a), V_ADD(m[w], V_K(i))), fn((b), (c), (d))), s))

#define X8_STEP(P, fn, a, b, c, d, w, i, s) V_STEP(P##_ROL, P##_##fn, a, b, c, d, w, i, s)

#define MD5_X8_KERNEL(NAME, TARGET, P)                                                                                 \
    TARGET static void NAME(uint32_t *states, const uint8_t *const *data, size_t count, size_t blocks) {              \
        const uint8_t *p[8];                                                                                           \
        size_t stride[8];                                                                                              \
        uint32_t s[4][8];                                                                                              \
        for (size_t l = 0; l < 8; l++) {                                                                               \
            int used = l < count;                                                                                      \
            p[l] = used ? data[l] : idle_block;                                                                        \
            stride[l] = used ? 64 : 0;                                                                                 \
            for (int j = 0; j < 4; j++) s[j][l] = used ? states[4 * l + j] : 0;                                       \
        }                                                                                                              \
        __m256i a = _mm256_loadu_si256((const __m256i *)(const void *)s[0]);                                          \
        __m256i b = _mm256_loadu_si256((const __m256i *)(const void *)s[1]);                                          \
        __m256i c = _mm256_loadu_si256((const __m256i *)(const void *)s[2]);                                          \
        __m256i d = _mm256_loadu_si256((const __m256i *)(const void *)s[3]);                                          \
        for (; blocks > 0; blocks--) {                                                                                 \
            __m256i m[16];                                                                                             \
            load_words(p, m);                                                                                          \
            for (int l = 0; l < 8; l++) p[l] += stride[l];                                                             \
            __m256i a0 = a, b0 = b, c0 = c, d0 = d;                                                                    \
            MD5_ROUNDS(X8_STEP, P, a, b, c, d);                                                                        \
            a = V_ADD(a, a0);                                                                                          \
            b = V_ADD(b, b0);                                                                                          \
            c = V_ADD(c, c0);                                                                                          \
            d = V_ADD(d, d0);                                                                                          \
        }                                                                                                              \
        _mm256_storeu_si256((__m256i *)(void *)s[0], a);                                                               \
        _mm256_storeu_si256((__m256i *)(void *)s[1], b);                                                               \
        _mm256_storeu_si256((__m256i *)(void *)s[2], c);                                                               \
        _mm256_storeu_si256((__m256i *)(void *)s[3], d);                                                               \
        for (size_t l = 0; l < count; l++)                                                                             \
            for (int j = 0; j < 4; j++) states[4 * l + j] = s[j][l];                                                   \
    }

MD5_X8_KERNEL(md5_x8_avx2, TARGET_AVX2, AVX2)
MD5_X8_KERNEL(md5_x8_avx512vl, TARGET_AVX512VL, AVX512)

FERRY_HIDDEN void ferry_md5_compress_x8_x86(uint32_t *states, const uint8_t *const *data, size_t count, size_t blocks,
                                            uint32_t features) {
    if (features & FERRY_CPU_X86_AVX512VL) {
        md5_x8_avx512vl(states, data, count, blocks);
    } else {
        md5_x8_avx2(states, data, count, blocks);
    }
}

#endif /* FERRY_HAVE_X86_KERNELS */
