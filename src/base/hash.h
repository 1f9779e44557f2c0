/* Non-cryptographic hashes for fingerprints and checksums that catch accidents (a file of another model, a corrupted
 * byte, ranks that diverged), not attacks. */
#ifndef MAMBA2_HASH_H
#define MAMBA2_HASH_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "base/rng.h"

/* FNV-1a's offset basis (before 2026-12-04 the code had it a digit short, seen only by in-memory tables) */
#define M2_FNV_INIT 14695981039346656037ull

/* FNV-1a, 64-bit, a byte at a time: for short keys (names). About 0.5 GB/s: a multiply's latency per byte. */
static inline uint64_t m2_fnv1a(const void *data, size_t n, uint64_t h)
{
    const unsigned char *b = (const unsigned char *)data;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

/* A hash of n bytes for large buffers (parameters, stream states): four independent lanes of 64-bit words, each
 * word folded in as h = (h ^ w) * 0x9e3779b97f4a7c15, h ^= h >> 29 (the shift carries high bits down, so that no
 * bit's flip can cancel another's at the same position), the tail a byte at a time, the lanes and n mixed by
 * m2_mix64 (base/rng.h). Several GB/s (the lanes overlap the multiplies). The value is part of the stream snapshot
 * format (docs/FORMATS.md): changing this function changes the format's version. */
static inline uint64_t m2_hash64(const void *data, size_t n, uint64_t seed)
{
    const unsigned char *b = (const unsigned char *)data;
    uint64_t h[4] = {seed, seed ^ 0x6a09e667f3bcc908ull, seed ^ 0xbb67ae8584caa73bull, seed ^ 0x3c6ef372fe94f82bull};
    size_t i = 0;
    for (; i + 32 <= n; i += 32)
        for (int j = 0; j < 4; j++) {
            uint64_t w;
            memcpy(&w, b + i + 8 * j, sizeof w);
            h[j] = (h[j] ^ w) * 0x9e3779b97f4a7c15ull;
            h[j] ^= h[j] >> 29;
        }
    for (; i < n; i++) h[0] = (h[0] ^ b[i]) * 0x9e3779b97f4a7c15ull;
    uint64_t r = m2_mix64(seed ^ (uint64_t)n);
    for (int j = 0; j < 4; j++) r = m2_mix64(r ^ h[j]);
    return r;
}

#endif
