/* Counter-based random numbers: every draw is a pure function of (key, counter), so a stream can be
 * re-created anywhere (any rank, after a resume) without carrying state. Keys are derived from
 * (seed, purpose, step, rank, ...) with m2_rng_key. */
#ifndef MAMBA2_RNG_H
#define MAMBA2_RNG_H

#include <stdint.h>

/* Purposes keep streams of different uses independent even with the same seed. */
enum { M2_RNG_INIT = 1, M2_RNG_SAMPLER = 2, M2_RNG_SYNTH = 3, M2_RNG_VAL = 4, M2_RNG_TEST = 5 };

/* SplitMix64 finaliser: a bijective 64-bit mix with good avalanche. */
static inline uint64_t m2_mix64(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static inline uint64_t m2_rng_key(uint64_t seed, uint64_t purpose, uint64_t a, uint64_t b)
{
    return m2_mix64(m2_mix64(m2_mix64(seed ^ (purpose << 56)) ^ a) ^ (b * 0x632be59bd9b4e019ull));
}

static inline uint64_t m2_rng_u64(uint64_t key, uint64_t counter) { return m2_mix64(key ^ m2_mix64(counter)); }

/* Uniform in [0, 1) with 53 random bits. */
static inline double m2_rng_u01(uint64_t key, uint64_t counter)
{
    return (double)(m2_rng_u64(key, counter) >> 11) * 0x1.0p-53;
}

/* A small sequential generator for code that draws many numbers in order (simulators). */
typedef struct {
    uint64_t key, counter;
} m2_rng;
static inline double m2_rng_next_u01(m2_rng *r) { return m2_rng_u01(r->key, r->counter++); }
static inline uint64_t m2_rng_next_u64(m2_rng *r) { return m2_rng_u64(r->key, r->counter++); }

#endif
