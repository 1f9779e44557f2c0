/* ZeRO-1 sharding arithmetic, for many parameter counts and rank counts without launching any rank: shard sizes are a
 * multiple of 64 and minimal, the padded length is R*S, and the ranks' real ranges cover [0, n) exactly once, in
 * rank order. Sizes include primes, n < R*64 (ranks with empty shards) and n an exact multiple of R*64. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "dist/zero.h"

/* m2_zero_create does not communicate, so a group that only knows its size and rank is enough here. */
static m2_dist fake_group(int world, int rank)
{
    m2_dist pg;
    memset(&pg, 0, sizeof pg);
    pg.world = world;
    pg.rank = rank;
    pg.comm = MPI_COMM_NULL;
    return pg;
}

static void check_cover(size_t n, int R)
{
    m2_dist pg = fake_group(R, R - 1);
    m2_zero *z = NULL;
    assert_int_equal(m2_zero_create_host(&z, &pg, n, NULL), M2_OK);
    const size_t S = m2_zero_shard_len(z), ceil_share = (n + (size_t)R - 1) / (size_t)R;
    assert_int_equal(S % M2_ZERO_ALIGN, 0);
    assert_true(S >= ceil_share && S < ceil_share + M2_ZERO_ALIGN); /* padded, but by less than one block */
    assert_int_equal(m2_zero_padded_len(z), (size_t)R * S);
    assert_int_equal(m2_zero_state_bytes(z), 3 * S * sizeof(float));

    unsigned char *seen = calloc(n, 1);
    assert_non_null(seen);
    size_t expect_begin = 0;
    for (int r = 0; r < R; r++) {
        size_t b, e;
        m2_zero_shard(z, r, &b, &e);
        assert_int_equal(b, expect_begin); /* contiguous, in rank order */
        assert_true(e >= b && e - b <= S);
        assert_int_equal(b, (size_t)r * S < n ? (size_t)r * S : n); /* starts at its padded slot */
        for (size_t i = b; i < e; i++) seen[i]++;
        expect_begin = e;
    }
    assert_int_equal(expect_begin, n);
    for (size_t i = 0; i < n; i++)
        if (seen[i] != 1) fail_msg("n=%zu R=%d: element %zu covered %d times", n, R, i, seen[i]);
    free(seen);
    m2_zero_free(z);
}

static void test_cover_exactly_once(void **state)
{
    const size_t sizes[] = {1, 2, 63, 64, 65, 127, 128, 191, 192, 193, 997, 1009, 4096, 65521, 65537, 524287, 1000003};
    const int ranks[] = {1, 2, 3, 4, 5, 7, 8, 13, 64};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
        for (size_t j = 0; j < sizeof ranks / sizeof *ranks; j++) check_cover(sizes[i], ranks[j]);
}

static void test_small_buffer_leaves_empty_shards(void **state)
{
    /* n = 100 over 3 ranks: S = 64; rank 0 owns [0, 64), rank 1 [64, 100), rank 2 nothing. */
    m2_dist pg = fake_group(3, 2);
    m2_zero *z = NULL;
    assert_int_equal(m2_zero_create_host(&z, &pg, 100, NULL), M2_OK);
    size_t b, e;
    m2_zero_shard(z, 0, &b, &e);
    assert_true(b == 0 && e == 64);
    m2_zero_shard(z, 1, &b, &e);
    assert_true(b == 64 && e == 100);
    m2_zero_shard(z, 2, &b, &e);
    assert_true(b == 100 && e == 100);
    assert_int_equal(m2_zero_padded_len(z), 192);
    m2_zero_free(z);
}

static void test_exact_multiple_has_no_padding(void **state)
{
    m2_dist pg = fake_group(4, 0);
    m2_zero *z = NULL;
    assert_int_equal(m2_zero_create_host(&z, &pg, 4 * 640, NULL), M2_OK);
    assert_int_equal(m2_zero_shard_len(z), 640);
    assert_int_equal(m2_zero_padded_len(z), 4 * 640);
    m2_zero_free(z);
}

static void test_rejects_bad_sizes(void **state)
{
    m2_dist pg = fake_group(2, 1);
    m2_zero *z = (m2_zero *)&pg;
    assert_int_equal(m2_zero_create_host(&z, &pg, 0, NULL), M2_EUSAGE);
    assert_null(z);
    assert_non_null(strstr(m2_last_error(), "rank 1"));
    assert_int_equal(m2_zero_create_host(&z, &pg, (size_t)INT_MAX + 1, NULL), M2_EUSAGE);
    assert_non_null(strstr(m2_last_error(), "parameters"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cover_exactly_once),
        cmocka_unit_test(test_small_buffer_leaves_empty_shards),
        cmocka_unit_test(test_exact_multiple_has_no_padding),
        cmocka_unit_test(test_rejects_bad_sizes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
