/* The NCCL communicator (kernels/nccl_comm.h) over the process group: bootstrap (unique id over MPI, device
 * chosen from the local rank), reduce-scatter, in-place all-gather and all-reduce on device buffers, ordered
 * after the compute stream, finished by the watchdog's wait. Written for any rank count (each rank contributes
 * values that depend on its rank, the expected sums are known in closed form). Started by a launcher
 * (`mpirun -np R` on a machine with R GPUs) it bootstraps through MPI; started alone (ctest, check.sh) it is a
 * group of one rank filled by hand, which needs no MPI runtime (nccl_comm.h). Without a GPU: one SKIP line.
 * Every value is a small multiple of 0.5, so sums over any number of ranks are exact in fp32 whatever NCCL's order. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "dist/dist.h"
#include "gpu_util.h"
#include "nccl_comm.h"

static m2_dist pg;

static void test_collectives(void **state)
{
    const m2_ops *g = m2_gpu_ops();
    m2_nccl *c = NULL;
    if (m2_nccl_create(&c, &pg, 60.0)) fail_msg("%s", m2_last_error());
    assert_int_equal(m2_nccl_world(c), pg.world);
    const int R = pg.world, r = pg.rank;
    const size_t S = 1000, n = (size_t)R * S; /* shard length, padded buffer length */
    float *h = malloc(n * sizeof(float));
    assert_non_null(h);
    for (size_t i = 0; i < n; i++) h[i] = (float)(r + 1) * 0.5f + (float)(i % 97); /* rank r's gradient */
    float *grads = m2_dev_from(g, h, n), *shard = g->alloc(g, S * sizeof(float));
    assert_non_null(shard);

    /* The whole buffer as one range (a reduce-scatter), then as buckets that do not fall on shard boundaries,
     * started from the end as a backward reports them, several in flight before one wait: the same shard. */
    const float rank_sum = 0.5f * (float)(R * (R + 1) / 2);
    const size_t cuts[] = {0, 37, S - 1, S + 5, 2 * S - 3, 2 * S + 400, n};
    for (int pass = 0; pass < 2; pass++) {
        g->memset0(g, shard, S * sizeof(float));
        if (m2_nccl_after(c, m2_ops_cuda_stream())) fail_msg("%s", m2_last_error());
        if (pass == 0 && m2_nccl_reduce_range(c, grads, shard, S, 0, n)) fail_msg("%s", m2_last_error());
        for (int k = (int)(sizeof cuts / sizeof cuts[0]) - 2; pass == 1 && k >= 0; k--) {
            const size_t lo = cuts[k] < n ? cuts[k] : n, hi = cuts[k + 1] < n ? cuts[k + 1] : n;
            if (hi > lo && m2_nccl_reduce_range(c, grads, shard, S, lo, hi)) fail_msg("%s", m2_last_error());
        }
        if (m2_nccl_wait(c, "reduce-scatter")) fail_msg("%s", m2_last_error());
        float *got = m2_host_from(g, shard, S);
        for (size_t i = 0; i < S; i++) assert_true(got[i] == rank_sum + (float)R * (float)((r * S + i) % 97));
        free(got);
    }
    float *got;

    g->copy(g, grads + (size_t)r * S, shard, S * sizeof(float)); /* this rank's updated shard */
    if (m2_nccl_after(c, m2_ops_cuda_stream()) || m2_nccl_all_gather(c, grads + (size_t)r * S, grads, S) ||
        m2_nccl_all_reduce_sum(c, shard, 1) || m2_nccl_wait(c, "all-gather"))
        fail_msg("%s", m2_last_error());
    got = m2_host_from(g, grads, n);
    for (size_t i = 0; i < n; i++) assert_true(got[i] == rank_sum + (float)R * (float)(i % 97));
    free(got);
    got = m2_host_from(g, shard, 1);
    float want = 0; /* every rank's shard[0], summed */
    for (int q = 0; q < R; q++) want += rank_sum + (float)R * (float)(((size_t)q * S) % 97);
    assert_true(got[0] == want);
    free(got);
    printf("  NCCL over %d rank(s): reduce-scatter (whole and by buckets), all-gather, all-reduce exact\n", R);

    g->free(g, grads);
    g->free(g, shard);
    free(h);
    m2_nccl_free(c);
}

/* Started by mpirun/srun (their environment says so), or alone. */
static int launched(void) { return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMIX_RANK") || getenv("PMI_SIZE"); }

int main(int argc, char **argv)
{
    if (m2_gpu_skip()) return 0;
    const int mpi = launched();
    if (mpi) {
        if (m2_dist_init(&argc, &argv, &pg)) return m2_report("test_gpu_nccl", M2_EFAIL);
    } else {
        memset(&pg, 0, sizeof pg);
        pg.world = pg.local_size = 1;
        pg.timeout_s = 60;
        pg.comm = MPI_COMM_NULL;
        snprintf(pg.prog, sizeof pg.prog, "test_gpu_nccl");
    }
    pg.device = pg.local_rank; /* one GPU per rank */
    int rc = 1;
    if (m2_ops_cuda_init(pg.device)) {
        m2_report("test_gpu_nccl", M2_EFAIL);
    } else {
        const struct CMUnitTest tests[] = {cmocka_unit_test(test_collectives)};
        rc = cmocka_run_group_tests(tests, NULL, NULL);
    }
    if (mpi) m2_dist_finalize(&pg);
    return rc;
}
