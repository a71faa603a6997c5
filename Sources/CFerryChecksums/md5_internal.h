/* Internal interface between md5.c and the vector kernels (md5_x86.c). */
#ifndef FERRY_MD5_INTERNAL_H
#define FERRY_MD5_INTERNAL_H

#include "crc_internal.h"

/* Messages one call of a vector kernel hashes side by side. */
#define FERRY_MD5_MAX_LANES 8

/* The 64 additive constants of RFC 1321. */
FERRY_HIDDEN extern const uint32_t ferry_md5_k[64];

/* Portable compression of `blocks` 64-byte blocks into state[4]. */
FERRY_HIDDEN void ferry_md5_compress_sw(uint32_t state[4], const uint8_t *p, size_t blocks);

#if defined(FERRY_HAVE_X86_KERNELS)
/* `blocks` blocks of each of `count` (2...8) messages; states holds 4 words
 * per message. Uses AVX-512VL when `features` has it, else AVX2. */
FERRY_HIDDEN void ferry_md5_compress_x8_x86(uint32_t *states, const uint8_t *const *data, size_t count, size_t blocks,
                                            uint32_t features);
#endif

#endif /* FERRY_MD5_INTERNAL_H */
