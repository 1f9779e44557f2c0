/* Window sampler (dataset.h). The valid starts are listed once as runs; drawing window `index` of a step is a keyed
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
        if (y[k] == y[k]) /* not NaN */
            return 1;
    return 0;
}

/* Appends start row `st` to the runs (a new run unless it extends the last one). */
static int add_start(m2_sampler *s, int64_t *cap, int64_t st)
{
    m2_start_run *last = s->n_runs ? &s->runs[s->n_runs - 1] : NULL;
    if (last && last->first + (s->n_starts - last->before) == st) {
        s->n_starts++;
        return M2_OK;
    }
    if (s->n_runs + 1 >= *cap) { /* +1: room for the sentinel */
        int64_t c = *cap ? 2 * *cap : 64;
        m2_start_run *r = realloc(s->runs, (size_t)c * sizeof *r);
        if (!r) return m2_fail(M2_EFAIL, "sampler (%s): out of memory", m2_split_name(s->split));
        s->runs = r;
        *cap = c;
    }
    s->runs[s->n_runs++] = (m2_start_run){.first = st, .before = s->n_starts++};
    return M2_OK;
}

/* The valid starts of part [sb, se): a window's loss rows [st + burn_in, st + T) must each have a target; the
 * count of rows without one slides along with the start. */
static int scan_part(m2_sampler *s, int64_t *cap, int64_t sb, int64_t se)
{
    const m2_dataset *ds = s->ds;
    if (se - sb < s->T) return M2_OK;
    int64_t missing = 0;
    for (int64_t r = sb + s->burn_in; r < sb + s->T; r++) missing += !has_target(ds, r);
    for (int64_t st = sb;; st++) {
        if (missing == 0 && add_start(s, cap, st)) return M2_EFAIL;
        if (st + s->T >= se) return M2_OK;
        missing += !has_target(ds, st + s->T) - !has_target(ds, st + s->burn_in);
    }
}

int m2_sampler_init(m2_sampler *s, const m2_dataset *ds, int split, int T, int burn_in)
{
    memset(s, 0, sizeof *s);
    if (split < 0 || split > 2) return m2_fail(M2_EUSAGE, "sampler (split %d): unknown split", split);
    if (T < 1 || burn_in < 0 || burn_in >= T)
        return m2_fail(M2_EUSAGE, "sampler (seq_len %d, burn_in %d): need 0 <= burn_in < seq_len", T, burn_in);
    *s = (m2_sampler){.ds = ds, .split = split, .T = T, .burn_in = burn_in};
    const int I = ds->n_instruments > 0 ? ds->n_instruments : 1;
    s->inst_first = calloc((size_t)I + 1, sizeof *s->inst_first);
    s->active = calloc((size_t)I, sizeof *s->active);
    if (!s->inst_first || !s->active) {
        m2_sampler_free(s);
        return m2_fail(M2_EFAIL, "sampler (%s): out of memory", m2_split_name(split));
    }
    int64_t cap = 0, longest = 0;
    for (int64_t k = 0; k < ds->n_sessions; k++) {
        int64_t sb, se, before = s->n_starts;
        m2_dataset_session_part(ds, split, k, &sb, &se);
        if (se - sb > longest) longest = se - sb;
        if (scan_part(s, &cap, sb, se)) {
            m2_sampler_free(s);
            return M2_EFAIL;
        }
        s->inst_first[(ds->session_inst ? ds->session_inst[k] : 0) + 1] += s->n_starts - before;
    }
    /* Inside a split the instruments follow each other in order (FORMATS.md "Universe"): counts to offsets. */
    for (int i = 0; i < I; i++) {
        if (s->inst_first[i + 1] > 0) s->active[s->n_active++] = i;
        s->inst_first[i + 1] += s->inst_first[i];
    }
    if (s->n_starts == 0) {
        m2_sampler_free(s);
        return m2_fail(M2_EFAIL, "sampler (%s split): no window of %d rows fits (longest session part has %lld rows)",
                       m2_split_name(split), T, (long long)longest);
    }
    s->runs[s->n_runs] = (m2_start_run){.first = 0, .before = s->n_starts}; /* sentinel */
    return M2_OK;
}

int m2_sampler_set_mode(m2_sampler *s, const char *mode)
{
    if (strcmp(mode, "proportional") != 0 && strcmp(mode, "uniform") != 0)
        return m2_fail(M2_EUSAGE, "data.sampling (%s): must be proportional or uniform", mode);
    s->uniform = strcmp(mode, "uniform") == 0;
    return M2_OK;
}

void m2_sampler_free(m2_sampler *s)
{
    free(s->inst_first);
    free(s->active);
    free(s->runs);
    memset(s, 0, sizeof *s);
}

int64_t m2_sampler_row(const m2_sampler *s, int64_t j)
{
    int64_t lo = 0, hi = s->n_runs - 1; /* the run k with before <= j < runs[k+1].before */
    while (lo < hi) {
        int64_t mid = lo + (hi - lo + 1) / 2;
        if (s->runs[mid].before <= j)
            lo = mid;
        else
            hi = mid - 1;
    }
    return s->runs[lo].first + (j - s->runs[lo].before);
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
    while ((1ll << bits) < n) bits += 2;
    uint64_t x = (uint64_t)i;
    do x = feistel(x, bits / 2, key);
    while (x >= (uint64_t)n);
    return (int64_t)x;
}

/* Uniform over instruments: index = lap · A + slot; the slot picks an active instrument (a permutation per lap),
 * the lap a start inside it (a permutation per instrument), so two indices of one step that land on the same
 * instrument have different laps and draw different windows while the laps last. */
static int64_t uniform_start(const m2_sampler *s, uint64_t seed, int64_t step, int64_t index)
{
    int64_t A = s->n_active, lap = index / A, slot = index % A;
    uint64_t key = m2_rng_key(seed, M2_RNG_SAMPLER, (uint64_t)step, (uint64_t)lap | 1ull << 63);
    int k = s->active[permute(slot, A, key)];
    int64_t first = s->inst_first[k], n = s->inst_first[k + 1] - first;
    uint64_t key2 = m2_rng_key(seed ^ ((uint64_t)k << 40), M2_RNG_SAMPLER, (uint64_t)step,
                               (uint64_t)(lap / n) | 1ull << 62);
    return m2_sampler_row(s, first + permute(lap % n, n, key2));
}

int64_t m2_sampler_start(const m2_sampler *s, uint64_t seed, int64_t step, int64_t index)
{
    if (s->uniform) return uniform_start(s, seed, step, index);
    /* A batch larger than the number of windows wraps into a fresh permutation per lap. */
    int64_t lap = index / s->n_starts, i = index % s->n_starts;
    uint64_t key = m2_rng_key(seed, M2_RNG_SAMPLER, (uint64_t)step, (uint64_t)lap);
    return m2_sampler_row(s, permute(i, s->n_starts, key));
}

void m2_sampler_copy(const m2_sampler *s, int64_t start, float *X, float *y)
{
    const m2_dataset *ds = s->ds;
    memcpy(X, ds->X + start * ds->n_features, (size_t)s->T * (size_t)ds->n_features * sizeof *X);
    memcpy(y, ds->y + start * ds->n_targets, (size_t)s->T * (size_t)ds->n_targets * sizeof *y);
}
