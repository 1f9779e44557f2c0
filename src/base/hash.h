/* FNV-1a, 64-bit: a fast non-cryptographic hash of bytes, for fingerprints and checksums that catch accidents (a
 * file of another model, a corrupted byte, ranks that diverged), not attacks. */
#ifndef MAMBA2_HASH_H
#define MAMBA2_HASH_H

#include <stddef.h>
#include <stdint.h>

#define M2_FNV_INIT 1469598103934665603ull /* the start value; a previous result continues over more bytes */

static inline uint64_t m2_fnv1a(const void *data, size_t n, uint64_t h)
{
    const unsigned char *b = (const unsigned char *)data;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

#endif
