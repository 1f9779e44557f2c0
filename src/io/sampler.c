/* Window sampler (dataset.h). The valid starts are listed once; drawing window `index` of a step is a keyed
 * pseudo-random permutation of [0, n_starts) evaluated at that index, so it is a pure function of
 * (seed, step, index): no state to carry, the same on every rank, and distinct indices of one step never give
 * the same window. */
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/rng.h"
#include "io/dataset.h"

/* 1 if row r has at least one finite target. */
static int has_target(const m2_dataset *ds, int64_t r)
{
    const float *y = ds->y + r * ds->n_targets;
    for (int k = 0; k < ds->n_targets; k++)
        if (y[k] == y[k])          /* not NaN */
            return 1;
    return 0;
}

int m2_sampler_init(m2_sampler *s, const m2_dataset *ds, int split, int T, int burn_in)
{
    memset(s, 0, sizeof *s);
    if (split < 0 || split > 2)
        return m2_fail(M2_EUSAGE, "sampler (split %d): unknown split", split);
    if (T < 1 || burn_in < 0 || burn_in >= T)
        return m2_fail(M2_EUSAGE, "sampler (seq_len %d, burn_in %d): need 0 <= burn_in < seq_len", T, burn_in);
    int64_t b = ds->split[split][0], e = ds->split[split][1], n = e - b;
    /* bad[i]: rows of [b, b+i) without any finite target, so a window's loss rows are checked in O(1). */
    int64_t *bad = malloc((size_t)(n + 1) * sizeof *bad);
    int64_t *starts = malloc((size_t)(n > 0 ? n : 1) * sizeof *starts);
    if (!bad || !starts) {
        free(bad);
        free(starts);
        return m2_fail(M2_EFAIL, "sampler (%s): out of memory", m2_split_name(split));
    }
    bad[0] = 0;
    for (int64_t i = 0; i < n; i++)
        bad[i + 1] = bad[i] + !has_target(ds, b + i);
    int64_t count = 0, longest = 0;
    for (int64_t k = 0; k < ds->n_sessions; k++) {
        int64_t sb, se;
        m2_dataset_session_part(ds, split, k, &sb, &se);
        if (se - sb > longest)
            longest = se - sb;
        for (int64_t st = sb; st + T <= se; st++)
            if (bad[st + T - b] - bad[st + burn_in - b] == 0)
                starts[count++] = st;
    }
    free(bad);
    if (count == 0) {
        free(starts);
        return m2_fail(M2_EFAIL, "sampler (%s split): no window of %d rows fits (longest session part has %lld rows)",
                       m2_split_name(split), T, (long long)longest);
    }
    s->ds = ds;
    s->split = split;
    s->T = T;
    s->burn_in = burn_in;
    s->n_starts = count;
    s->starts = starts;
    return M2_OK;
}

void m2_sampler_free(m2_sampler *s)
{
    free(s->starts);
    memset(s, 0, sizeof *s);
}

/* A balanced Feistel network on 2·half bits: a bijection of [0, 4^half) for any key. Four rounds of a strong
 * round function (SplitMix64) make the output indistinguishable from a random permutation for our purpose. */
static uint64_t feistel(uint64_t x, int half, uint64_t key)
{
    uint64_t mask = (1ull << half) - 1, l = x >> half, r = x & mask;
    for (uint64_t round = 0; round < 4; round++) {
        uint64_t f = m2_mix64(key ^ (round << 58) ^ r) & mask;
        uint64_t t = l ^ f;
        l = r;
        r = t;
    }
    return (l << half) | r;
}

/* Permutation of [0, n) by cycle walking: apply the Feistel bijection of the smallest even-bit domain >= n
 * until the value lands inside [0, n). The domain is < 4n, so fewer than 4 rounds are expected. */
static int64_t permute(int64_t i, int64_t n, uint64_t key)
{
    int bits = 2;
    while ((1ll << bits) < n)
        bits += 2;
    uint64_t x = (uint64_t)i;
    do
        x = feistel(x, bits / 2, key);
    while (x >= (uint64_t)n);
    return (int64_t)x;
}

int64_t m2_sampler_start(const m2_sampler *s, uint64_t seed, int64_t step, int64_t index)
{
    /* A batch larger than the number of windows wraps into a fresh permutation per lap. */
    int64_t lap = index / s->n_starts, i = index % s->n_starts;
    uint64_t key = m2_rng_key(seed, M2_RNG_SAMPLER, (uint64_t)step, (uint64_t)lap);
    return s->starts[permute(i, s->n_starts, key)];
}

void m2_sampler_copy(const m2_sampler *s, int64_t start, float *X, float *y)
{
    const m2_dataset *ds = s->ds;
    memcpy(X, ds->X + start * ds->n_features, (size_t)s->T * (size_t)ds->n_features * sizeof *X);
    memcpy(y, ds->y + start * ds->n_targets, (size_t)s->T * (size_t)ds->n_targets * sizeof *y);
}
