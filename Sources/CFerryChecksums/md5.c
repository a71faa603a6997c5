/* MD5 compression for Ferry's server: one message at a time (portable C), or
 * several independent messages at once: two or three interleaved in general
 * registers, four to eight in the lanes of a vector register.
 *
 * MD5 is a single chain of dependent additions, so one message cannot use
 * more than a sliver of a modern core. The server hashes every part it
 * receives (S3 ETags are MD5s) and usually receives several parts at once;
 * hashing up to eight of them side by side takes about as long as hashing
 * one or two of them alone (measured: two in the time of one, three in 1.2
 * times, eight in 1.8 times). */
#include "CFerryChecksums.h"
#include "crc_internal.h"
#include "md5_internal.h"

FERRY_HIDDEN const uint32_t ferry_md5_k[64] = {
    0xd76aa478, 0xe8c7b756, 0x242070db, 0xc1bdceee, 0xf57c0faf, 0x4787c62a, 0xa8304613, 0xfd469501,
    0x698098d8, 0x8b44f7af, 0xffff5bb1, 0x895cd7be, 0x6b901122, 0xfd987193, 0xa679438e, 0x49b40821,
    0xf61e2562, 0xc040b340, 0x265e5a51, 0xe9b6c7aa, 0xd62f105d, 0x02441453, 0xd8a1e681, 0xe7d3fbc8,
    0x21e1cde6, 0xc33707d6, 0xf4d50d87, 0x455a14ed, 0xa9e3e905, 0xfcefa3f8, 0x676f02d9, 0x8d2a4c8a,
    0xfffa3942, 0x8771f681, 0x6d9d6122, 0xfde5380c, 0xa4beea44, 0x4bdecfa9, 0xf6bb4b60, 0xbebfbc70,
    0x289b7ec6, 0xeaa127fa, 0xd4ef3085, 0x04881d05, 0xd9d4d039, 0xe6db99e5, 0x1fa27cf8, 0xc4ac5665,
    0xf4292244, 0x432aff97, 0xab9423a7, 0xfc93a039, 0x655b59c3, 0x8f0ccc92, 0xffeff47d, 0x85845dd1,
    0x6fa87e4f, 0xfe2ce6e0, 0xa3014314, 0x4e0811a1, 0xf7537e82, 0xbd3af235, 0x2ad7d2bb, 0xeb86d391,
};

static inline uint32_t rotl32(uint32_t x, int s) { return (x << s) | (x >> (32 - s)); }

static inline uint32_t load_le32(const uint8_t *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

#define MD5_F(b, c, d) ((d) ^ ((b) & ((c) ^ (d))))
#define MD5_H(b, c, d) ((b) ^ (c) ^ (d))
#define MD5_I(b, c, d) ((c) ^ ((b) | ~(d)))
/* a + m + k does not wait for the previous step, so it is added first: only the boolean function, one addition,
 * the rotation and the final addition stay on the chain from step to step. The empty asm keeps the compiler from
 * folding the constant into the last addition before the rotation, which puts it back on the chain. */
static inline uint32_t off_chain(uint32_t x) {
#if defined(__GNUC__) || defined(__clang__)
    __asm__("" : "+r"(x));
#endif
    return x;
}

/* N messages at once in general-purpose registers (N = 1 is plain MD5): each message's steps are a chain that leaves
 * most of the core's integer units idle, so the chains of two or three messages run side by side in about the time
 * of one. For three or fewer messages this beats the vector kernels, whose cost per round does not shrink with the
 * lanes used. */
#define LANE_WORD(l, w) load_le32(p[l] + 4 * (w))
#define LANES_STEP(N, fn, A, B, C, D, w, i, s)                                                                       \
    for (int l = 0; l < N; l++)                                                                                        \
    A[l] = B[l] + rotl32(off_chain(A[l] + LANE_WORD(l, w) + ferry_md5_k[i]) + fn(B[l], C[l], D[l]), (s))
/* G(b, c, d) = (b & d) | (c & ~d): its two terms have no bits in common, so they can be added one at a time, and the
 * one without b early. */
#define LANES_STEP_G(N, A, B, C, D, w, i, s)                                                                          \
    for (int l = 0; l < N; l++)                                                                                        \
    A[l] = B[l] + rotl32(off_chain(A[l] + LANE_WORD(l, w) + ferry_md5_k[i] + (C[l] & ~D[l])) + (B[l] & D[l]), (s))

#define LANES_STEP_F(N, A, B, C, D, w, i, s) LANES_STEP(N, MD5_F, A, B, C, D, w, i, s)
#define LANES_STEP_H(N, A, B, C, D, w, i, s) LANES_STEP(N, MD5_H, A, B, C, D, w, i, s)
#define LANES_STEP_I(N, A, B, C, D, w, i, s) LANES_STEP(N, MD5_I, A, B, C, D, w, i, s)
#define LANES_ROUND_STEP(N, fn, A, B, C, D, w, i, s) LANES_STEP_##fn(N, A, B, C, D, w, i, s)

#define MD5_INTERLEAVED_KERNEL(NAME, N)                                                                                \
    static void NAME(uint32_t *states, const uint8_t *const *data, size_t blocks) {                                    \
        uint32_t a[N], b[N], c[N], d[N];                                                                               \
        const uint8_t *p[N];                                                                                           \
        for (int l = 0; l < N; l++) {                                                                                  \
            a[l] = states[4 * l];                                                                                      \
            b[l] = states[4 * l + 1];                                                                                  \
            c[l] = states[4 * l + 2];                                                                                  \
            d[l] = states[4 * l + 3];                                                                                  \
            p[l] = data[l];                                                                                            \
        }                                                                                                              \
        for (; blocks > 0; blocks--) {                                                                                 \
            uint32_t a0[N], b0[N], c0[N], d0[N];                                                                       \
            for (int l = 0; l < N; l++) {                                                                              \
                a0[l] = a[l];                                                                                          \
                b0[l] = b[l];                                                                                          \
                c0[l] = c[l];                                                                                          \
                d0[l] = d[l];                                                                                          \
            }                                                                                                          \
            MD5_ROUNDS(LANES_ROUND_STEP, N, a, b, c, d);                                                               \
            for (int l = 0; l < N; l++) {                                                                              \
                a[l] += a0[l];                                                                                         \
                b[l] += b0[l];                                                                                         \
                c[l] += c0[l];                                                                                         \
                d[l] += d0[l];                                                                                         \
                p[l] += 64;                                                                                            \
            }                                                                                                          \
        }                                                                                                              \
        for (int l = 0; l < N; l++) {                                                                                  \
            states[4 * l] = a[l];                                                                                      \
            states[4 * l + 1] = b[l];                                                                                  \
            states[4 * l + 2] = c[l];                                                                                  \
            states[4 * l + 3] = d[l];                                                                                  \
        }                                                                                                              \
    }

MD5_INTERLEAVED_KERNEL(md5_x1, 1)
MD5_INTERLEAVED_KERNEL(md5_x2_interleaved, 2)
MD5_INTERLEAVED_KERNEL(md5_x3_interleaved, 3)

FERRY_HIDDEN void ferry_md5_compress_sw(uint32_t state[4], const uint8_t *p, size_t blocks) {
    md5_x1(state, &p, blocks);
}

void ferry_md5_init(uint32_t state[4]) {
    state[0] = 0x67452301;
    state[1] = 0xefcdab89;
    state[2] = 0x98badcfe;
    state[3] = 0x10325476;
}

void ferry_md5_compress(uint32_t state[4], const void *data, size_t blocks) {
    ferry_md5_compress_sw(state, (const uint8_t *)data, blocks);
}

/* Messages the best multi-message kernel under `features` (already intersected with the CPU's) takes at once. */
static size_t lanes_for(uint32_t features) {
#if defined(FERRY_HAVE_X86_KERNELS)
    if (features & (FERRY_CPU_X86_AVX2 | FERRY_CPU_X86_AVX512VL)) return FERRY_MD5_MAX_LANES;
#endif
    (void)features;
    return 3;
}

size_t ferry_md5_lanes(void) { return lanes_for(ferry_checksums_cpu_features()); }

void ferry_md5_compress_lanes_with_features(uint32_t *states, const void *const *data, size_t count, size_t blocks,
                                            uint32_t features) {
    features &= ferry_checksums_cpu_features();
    /* From how many messages on a vector round beats rounds of three and two interleaved (measured on an AMD EPYC:
     * one round takes about as long as 1.5 interleaved rounds of three with AVX-512VL, 2.3 with AVX2). */
    size_t vector_from = SIZE_MAX;
#if defined(FERRY_HAVE_X86_KERNELS)
    if (features & FERRY_CPU_X86_AVX512VL) {
        vector_from = 4;
    } else if (features & FERRY_CPU_X86_AVX2) {
        vector_from = 7;
    }
#endif
    while (count > 0) {
        size_t n;
        if (count >= vector_from) {
            n = count < FERRY_MD5_MAX_LANES ? count : FERRY_MD5_MAX_LANES;
#if defined(FERRY_HAVE_X86_KERNELS)
            ferry_md5_compress_x8_x86(states, (const uint8_t *const *)data, n, blocks, features);
#endif
        } else if (count >= 3 && count != 4) {
            /* Four go as two pairs: from the measured rates (one message 0.85 GB/s, two interleaved 1.68 GB/s in
             * total, three 2.10), a round of three and a lone message take about 10% longer than two rounds of two. */
            n = 3;
            md5_x3_interleaved(states, (const uint8_t *const *)data, blocks);
        } else if (count >= 2) {
            n = 2;
            md5_x2_interleaved(states, (const uint8_t *const *)data, blocks);
        } else {
            n = 1;
            ferry_md5_compress_sw(states, (const uint8_t *)data[0], blocks);
        }
        states += 4 * n;
        data += n;
        count -= n;
    }
}

void ferry_md5_compress_lanes(uint32_t *states, const void *const *data, size_t count, size_t blocks) {
    ferry_md5_compress_lanes_with_features(states, data, count, blocks, ~0u);
}

const char *ferry_md5_kernel_name(uint32_t features) {
    features &= ferry_checksums_cpu_features();
#if defined(FERRY_HAVE_X86_KERNELS)
    if (features & FERRY_CPU_X86_AVX512VL) return "avx512vl-x8";
    if (features & FERRY_CPU_X86_AVX2) return "avx2-x8";
#endif
    return "interleaved-x3";
}
