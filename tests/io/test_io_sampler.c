/* Window sampler: windows never cross a session or a split, loss positions have targets, draws are a pure
 * function of (seed, step, index), distinct within a global batch (so ranks taking disjoint index ranges draw
 * disjoint windows), and every valid start is equally likely (chi-square). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/error.h"
#include "io_test_util.h"

/* 1000 rows, sessions of uneven length (one shorter than a window), horizons 1, 3, 5 (NaN near session ends),
 * splits 800/100/100. */
static m2_dataset ds;
static const int64_t sessions[] = {0, 130, 137, 400, 560, 800, 870, 1000};

static int setup(void **state)
{
    make_dataset(&ds, 1000, 3, 3, sessions, 7);
    /* A few interior rows with no finite target at all: windows must not have them at loss positions. */
    for (int k = 0; k < 3; k++) {
        ds.y[300 * 3 + k] = NAN;
        ds.y[301 * 3 + k] = NAN;
    }
    ds.y[500 * 3 + 1] = NAN; /* one target missing: the row still counts */
    return 0;
}

static int teardown(void **state)
{
    m2_dataset_free(&ds);
    return 0;
}

static int session_of(int64_t r)
{
    int s = 0;
    while (sessions[s + 1] <= r) s++;
    return s;
}

static int has_target(int64_t r)
{
    for (int k = 0; k < 3; k++)
        if (!isnan(ds.y[r * 3 + k])) return 1;
    return 0;
}

/* The valid starts by brute force, straight from the definition. */
static int64_t brute_force_starts(int split, int T, int burn_in, int64_t *out)
{
    int64_t n = 0;
    for (int64_t st = ds.split[split][0]; st + T <= ds.split[split][1]; st++) {
        int ok = session_of(st) == session_of(st + T - 1);
        for (int t = burn_in; t < T && ok; t++) ok = has_target(st + t);
        if (ok) out[n++] = st;
    }
    return n;
}

static void test_valid_starts_match_definition(void **state)
{
    int64_t want[1000];
    for (int split = 0; split < 3; split++)
        for (int T = 8; T <= 64; T *= 2) {
            int burn = T / 4;
            m2_sampler s;
            assert_int_equal(m2_sampler_init(&s, &ds, split, T, burn), M2_OK);
            int64_t n = brute_force_starts(split, T, burn, want);
            assert_int_equal(s.n_starts, n);
            for (int64_t i = 0; i < n; i++) assert_int_equal(m2_sampler_row(&s, i), want[i]);
            /* The property itself, stated once more: inside one session, inside the split, targets present. */
            for (int64_t i = 0; i < s.n_starts; i++) {
                int64_t st = m2_sampler_row(&s, i);
                assert_int_equal(session_of(st), session_of(st + T - 1));
                assert_true(st >= ds.split[split][0] && st + T <= ds.split[split][1]);
                for (int t = burn; t < T; t++) assert_true(has_target(st + t));
            }
            m2_sampler_free(&s);
        }
}

static void test_no_fit_and_bad_arguments(void **state)
{
    m2_sampler s;
    assert_int_equal(m2_sampler_init(&s, &ds, M2_SPLIT_VAL, 200, 0), M2_EFAIL); /* val is 100 rows */
    assert_non_null(strstr(m2_last_error(), "val split"));
    assert_int_equal(m2_sampler_init(&s, &ds, M2_SPLIT_TRAIN, 16, 16), M2_EUSAGE);
    assert_int_equal(m2_sampler_init(&s, &ds, 3, 16, 0), M2_EUSAGE);
}

static void test_deterministic_and_keyed(void **state)
{
    m2_sampler s;
    assert_int_equal(m2_sampler_init(&s, &ds, M2_SPLIT_TRAIN, 32, 8), M2_OK);
    int64_t a[64], b[64];
    int diff_seed = 0, diff_step = 0;
    for (int i = 0; i < 64; i++) {
        a[i] = m2_sampler_start(&s, 42, 7, i);
        b[i] = m2_sampler_start(&s, 42, 7, i);
        diff_seed += m2_sampler_start(&s, 43, 7, i) != a[i];
        diff_step += m2_sampler_start(&s, 42, 8, i) != a[i];
    }
    assert_memory_equal(a, b, sizeof a);
    /* Another seed or step gives another batch: with ~600 starts, at most a few of 64 coincide by chance. */
    assert_true(diff_seed > 56);
    assert_true(diff_step > 56);
    m2_sampler_free(&s);
}

static void test_distinct_within_batch_and_across_ranks(void **state)
{
    m2_sampler s;
    assert_int_equal(m2_sampler_init(&s, &ds, M2_SPLIT_TRAIN, 32, 8), M2_OK);
    /* A whole permutation: the first n_starts indices of a step hit every start exactly once. */
    char *seen = calloc(1000, 1);
    for (int64_t i = 0; i < s.n_starts; i++) {
        int64_t st = m2_sampler_start(&s, 1, 3, i);
        assert_false(seen[st]);
        seen[st] = 1;
    }
    free(seen);
    /* A global batch of 96 split over 4 ranks (24 each) is the same batch as on 1 rank, and disjoint. */
    enum { B = 96, R = 4 };
    int64_t one[B], many[B];
    for (int i = 0; i < B; i++) one[i] = m2_sampler_start(&s, 5, 11, i);
    for (int r = 0; r < R; r++)
        for (int j = 0; j < B / R; j++) many[r * (B / R) + j] = m2_sampler_start(&s, 5, 11, r * (B / R) + j);
    assert_memory_equal(one, many, sizeof one);
    for (int i = 0; i < B; i++)
        for (int j = i + 1; j < B; j++) assert_true(one[i] != one[j]);
    m2_sampler_free(&s);
}

/* Pearson's chi-square against the uniform distribution over the n valid starts. */
static double chi_square(const int64_t *count, int64_t n, int64_t draws)
{
    double e = (double)draws / (double)n, x = 0;
    for (int64_t i = 0; i < n; i++) x += ((double)count[i] - e) * ((double)count[i] - e) / e;
    return x;
}

static void test_uniform_coverage(void **state)
{
    m2_sampler s;
    assert_int_equal(m2_sampler_init(&s, &ds, M2_SPLIT_TEST, 32, 8), M2_OK); /* test split: 53 starts */
    int64_t n = s.n_starts;
    assert_true(n > 20 && n < 200);
    int64_t *count = calloc((size_t)n, sizeof *count), *where = calloc(1000, sizeof *where);
    for (int64_t i = 0; i < n; i++) where[m2_sampler_row(&s, i)] = i;
    /* One fixed index over many steps, and whole batches of 16 over many seeds: both must look uniform.
     * (Within a batch the draws are without replacement, which only lowers the statistic.) Bound: the chi-square with n-1 degrees of freedom has mean n-1 and sd sqrt(2(n-1)); a truly
     * uniform sampler exceeds mean + 6 sd with probability < 1e-6 (and the test is deterministic anyway),
     * while a sampler that favours some starts by even 20% exceeds it by far at 1000 draws per start. */
    const int64_t draws = 1000 * n;
    for (int64_t step = 0; step < draws; step++) count[where[m2_sampler_start(&s, 9, step, 3)]]++;
    double bound = (double)(n - 1) + 6 * sqrt(2.0 * (double)(n - 1));
    double x1 = chi_square(count, n, draws);
    memset(count, 0, (size_t)n * sizeof *count);
    for (int64_t seed = 0; seed < draws / 16; seed++) /* batches of 16 distinct indices */
        for (int64_t i = 0; i < 16; i++) count[where[m2_sampler_start(&s, (uint64_t)seed, 0, i)]]++;
    double x2 = chi_square(count, n, draws / 16 * 16);
    print_message("chi-square %.1f and %.1f with %lld dof (bound %.1f)\n", x1, x2, (long long)(n - 1), bound);
    assert_true(x1 < bound);
    assert_true(x2 < bound);
    free(count);
    free(where);
    m2_sampler_free(&s);
}

static void test_copy_and_batches_larger_than_starts(void **state)
{
    m2_sampler s;
    assert_int_equal(m2_sampler_init(&s, &ds, M2_SPLIT_VAL, 16, 4), M2_OK);
    float X[16 * 3], y[16 * 3];
    int64_t st = m2_sampler_start(&s, 1, 1, 0);
    m2_sampler_copy(&s, st, X, y);
    assert_memory_equal(X, ds.X + st * 3, sizeof X);
    assert_memory_equal(y, ds.y + st * 3, sizeof y);
    /* Indices past n_starts wrap into another permutation: still valid starts. */
    for (int64_t i = 0; i < 3 * s.n_starts; i++) {
        int64_t v = m2_sampler_start(&s, 1, 1, i);
        assert_true(v >= ds.split[1][0] && v + 16 <= ds.split[1][1]);
    }
    m2_sampler_free(&s);
}

/* A universe of a large instrument (rows 0..699 of the train split) and a small one (700..799): proportional draws
 * follow the window counts, uniform ones split each step evenly; both stay distinct within a step. */
static void test_uniform_over_instruments(void **state)
{
    m2_dataset u;
    const int64_t ses[] = {0, 700, 800, 900, 1000};
    make_dataset(&u, 1000, 2, 1, ses, 4);
    assert_int_equal(m2_dataset_alloc_universe(&u, 2), M2_OK);
    const int32_t inst[] = {0, 1, 0, 1};
    memcpy(u.session_inst, inst, sizeof inst);
    m2_sampler s;
    assert_int_equal(m2_sampler_init(&s, &u, M2_SPLIT_TRAIN, 16, 4), M2_OK);
    int64_t small = s.inst_first[2] - s.inst_first[1];
    assert_int_equal(s.n_active, 2);
    assert_int_equal(s.inst_first[2], s.n_starts);
    assert_int_equal(m2_sampler_set_mode(&s, "sometimes"), M2_EUSAGE);
    const int B = 64, steps = 200;
    for (int mode = 0; mode < 2; mode++) {
        assert_int_equal(m2_sampler_set_mode(&s, mode ? "uniform" : "proportional"), M2_OK);
        int64_t from_small = 0;
        for (int64_t step = 0; step < steps; step++) {
            int64_t seen[64];
            for (int b = 0; b < B; b++) {
                seen[b] = m2_sampler_start(&s, 3, step, b);
                assert_int_equal(seen[b], m2_sampler_start(&s, 3, step, b)); /* pure */
                for (int c = 0; c < b; c++) assert_true(seen[c] != seen[b]); /* distinct within a step */
                from_small += seen[b] >= 700;
            }
        }
        double share = (double)from_small / (double)(B * steps);
        /* uniform: exactly B/2 per step by construction; proportional: the small instrument's share of the windows
         * (85 of 770), binomial sd 0.0025 over 12800 draws, so 0.02 is 8 sd */
        double want = mode ? 0.5 : (double)small / (double)s.n_starts;
        assert_true(fabs(share - want) < 0.02);
    }
    m2_sampler_free(&s);
    m2_dataset_free(&u);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid_starts_match_definition),
        cmocka_unit_test(test_no_fit_and_bad_arguments),
        cmocka_unit_test(test_deterministic_and_keyed),
        cmocka_unit_test(test_distinct_within_batch_and_across_ranks),
        cmocka_unit_test(test_uniform_coverage),
        cmocka_unit_test(test_uniform_over_instruments),
        cmocka_unit_test(test_copy_and_batches_larger_than_starts),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
