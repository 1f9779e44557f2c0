/* Helpers for cmocka tests that run on several MPI ranks.
 *
 * A plain cmocka assert that fails on one rank only would send that rank to the next test while the others wait
 * in a collective: the job would hang. M2_ASSERT_ALL first agrees on the outcome (an all-reduce), so every rank
 * fails the same test together, and the failing rank says why on stderr. Tests therefore check conditions only
 * through M2_ASSERT_ALL. */
#ifndef MAMBA2_TEST_MPI_CHECK_H
#define MAMBA2_TEST_MPI_CHECK_H

#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static inline int m2_test_all_ok(int local_ok, const char *what, const char *file, int line)
{
    int rank = 0, ok = local_ok ? 1 : 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (!local_ok) fprintf(stderr, "rank %d: check failed at %s:%d: %s\n", rank, file, line, what);
    MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    return ok;
}

#define M2_ASSERT_ALL(cond) assert_true(m2_test_all_ok((cond), #cond, __FILE__, __LINE__))

/* FNV-1a over bytes: a cheap fingerprint for "bitwise-identical parameters on every rank". */
static inline uint64_t m2_test_hash(const void *data, size_t bytes)
{
    const unsigned char *p = data;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < bytes; i++) h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

/* 1 when every rank passed the same hash. */
static inline int m2_test_same_everywhere(uint64_t h)
{
    uint64_t lo = h, hi = h;
    MPI_Allreduce(MPI_IN_PLACE, &lo, 1, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, &hi, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
    return lo == hi;
}

#endif
