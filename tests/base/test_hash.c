/* base/hash.h: m2_hash64, the checksum of stream snapshots and the parameters' fingerprint, sees every single-bit
 * change of a buffer (each bit of 200 bytes: whole words in every lane and a tail), the two same-position flips in
 * one lane that a plain word-wise FNV would cancel, a zero byte appended, and the seed; and it is the same value
 * however the buffer is aligned. m2_fnv1a matches the published FNV-1a test vectors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "base/hash.h"

enum { N = 200 }; /* 6 blocks of 32 bytes, then an 8-byte tail */

static void test_hash64_sees_each_bit(void **state)
{
    unsigned char b[N + 1];
    for (int i = 0; i < N + 1; i++) b[i] = (unsigned char)(i * 37 + 11);
    const uint64_t h = m2_hash64(b, N, 0);
    for (int i = 0; i < N; i++)
        for (int bit = 0; bit < 8; bit++) {
            b[i] ^= (unsigned char)(1u << bit);
            if (m2_hash64(b, N, 0) == h) fail_msg("a flip of byte %d bit %d went unseen", i, bit);
            b[i] ^= (unsigned char)(1u << bit);
        }
    /* the top bit of word 0 and of word 4 (both lane 0): a multiply alone carries no change downwards */
    b[7] ^= 0x80;
    b[39] ^= 0x80;
    assert_true(m2_hash64(b, N, 0) != h);
    b[7] ^= 0x80;
    b[39] ^= 0x80;
    b[N] = 0;
    assert_true(m2_hash64(b, N + 1, 0) != h); /* one zero byte more */
    assert_true(m2_hash64(b, N, 1) != h);
    unsigned char moved[N + 8];
    memcpy(moved + 3, b, N);
    assert_true(m2_hash64(moved + 3, N, 0) == h);
}

static void test_fnv1a_vectors(void **state)
{
    assert_true(m2_fnv1a("", 0, M2_FNV_INIT) == 0xcbf29ce484222325ull);
    assert_true(m2_fnv1a("a", 1, M2_FNV_INIT) == 0xaf63dc4c8601ec8cull);
    assert_true(m2_fnv1a("foobar", 6, M2_FNV_INIT) == 0x85944171f73967e8ull);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hash64_sees_each_bit),
        cmocka_unit_test(test_fnv1a_vectors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
