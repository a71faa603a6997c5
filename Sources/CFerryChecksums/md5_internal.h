/* Internal interface between md5.c and the vector kernels (md5_x86.c). */
#ifndef FERRY_MD5_INTERNAL_H
#define FERRY_MD5_INTERNAL_H

#include "crc_internal.h"

/* Messages one call of a vector kernel hashes side by side. */
#define FERRY_MD5_MAX_LANES 8

/* The 64 additive constants of RFC 1321. */
FERRY_HIDDEN extern const uint32_t ferry_md5_k[64];

/* The 64 steps of one block (RFC 1321), for every kernel: STEP(X, fn, a, b, c, d, w, i, s) advances `a` with the
 * boolean function fn (F, G, H or I), message word w, constant ferry_md5_k[i] and rotation s; X is passed through
 * to STEP (the kernel's lane count or register profile). */
#define MD5_ROUNDS(STEP, X, a, b, c, d)                                                                                \
    _Pragma("clang loop unroll(full)")                                                                                 \
    for (int i = 0; i < 16; i += 4) {                                                                                  \
        STEP(X, F, a, b, c, d, i, i, 7);                                                                               \
        STEP(X, F, d, a, b, c, i + 1, i + 1, 12);                                                                      \
        STEP(X, F, c, d, a, b, i + 2, i + 2, 17);                                                                      \
        STEP(X, F, b, c, d, a, i + 3, i + 3, 22);                                                                      \
    }                                                                                                                  \
    _Pragma("clang loop unroll(full)")                                                                                 \
    for (int i = 16; i < 32; i += 4) {                                                                                 \
        STEP(X, G, a, b, c, d, (5 * i + 1) & 15, i, 5);                                                                \
        STEP(X, G, d, a, b, c, (5 * i + 6) & 15, i + 1, 9);                                                            \
        STEP(X, G, c, d, a, b, (5 * i + 11) & 15, i + 2, 14);                                                          \
        STEP(X, G, b, c, d, a, (5 * i + 16) & 15, i + 3, 20);                                                          \
    }                                                                                                                  \
    _Pragma("clang loop unroll(full)")                                                                                 \
    for (int i = 32; i < 48; i += 4) {                                                                                 \
        STEP(X, H, a, b, c, d, (3 * i + 5) & 15, i, 4);                                                                \
        STEP(X, H, d, a, b, c, (3 * i + 8) & 15, i + 1, 11);                                                           \
        STEP(X, H, c, d, a, b, (3 * i + 11) & 15, i + 2, 16);                                                          \
        STEP(X, H, b, c, d, a, (3 * i + 14) & 15, i + 3, 23);                                                          \
    }                                                                                                                  \
    _Pragma("clang loop unroll(full)")                                                                                 \
    for (int i = 48; i < 64; i += 4) {                                                                                 \
        STEP(X, I, a, b, c, d, (7 * i) & 15, i, 6);                                                                    \
        STEP(X, I, d, a, b, c, (7 * i + 7) & 15, i + 1, 10);                                                           \
        STEP(X, I, c, d, a, b, (7 * i + 14) & 15, i + 2, 15);                                                          \
        STEP(X, I, b, c, d, a, (7 * i + 21) & 15, i + 3, 21);                                                          \
    }

/* Portable compression of `blocks` 64-byte blocks into state[4]. */
FERRY_HIDDEN void ferry_md5_compress_sw(uint32_t state[4], const uint8_t *p, size_t blocks);

#if defined(FERRY_HAVE_X86_KERNELS)
/* `blocks` blocks of each of `count` (2...8) messages; states holds 4 words
 * per message. Uses AVX-512VL when `features` has it, else AVX2. */
FERRY_HIDDEN void ferry_md5_compress_x8_x86(uint32_t *states, const uint8_t *const *data, size_t count, size_t blocks,
                                            uint32_t features);
#endif

#endif /* FERRY_MD5_INTERNAL_H */
