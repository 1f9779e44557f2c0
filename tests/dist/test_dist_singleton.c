/* One process started without mpirun (MPI's singleton init): the process group is a world of one, the host
 * collectives are identities, and the ZeRO-1 step runs through the same code as on R ranks and equals plain AdamW
 * on the whole buffer bitwise (with R = 1 the reduce-scatter and all-gather are copies, and the scaling and
 * clipping are the same double-precision expressions). Also: the bucket hook for the real layout, and bucket
 * misuse errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/adamw.h"
#include "base/config.h"
#include "base/error.h"
#include "base/layout.h"
#include "base/rng.h"
#include "dist/zero.h"

static m2_dist pg;

static void test_world_of_one(void **state)
{
    assert_int_equal(pg.world, 1);
    assert_int_equal(pg.rank, 0);
    assert_int_equal(pg.local_rank, 0);
    assert_int_equal(pg.local_size, 1);
    assert_int_equal(pg.device, 0);
    assert_true(pg.host[0] != '\0');
    assert_string_equal(pg.prog, "test_dist_singleton");
    assert_true(pg.owns_mpi);
}

static void test_collectives_are_identities(void **state)
{
    double x[2] = {1.5, -0.25};
    assert_int_equal(m2_dist_allreduce_sum_f64(&pg, x, 2), M2_OK);
    assert_true(x[0] == 1.5 && x[1] == -0.25);
    int64_t k[2] = {7, -3};
    assert_int_equal(m2_dist_allreduce_sum_i64(&pg, k, 2), M2_OK);
    assert_true(k[0] == 7 && k[1] == -3);
    assert_int_equal(m2_dist_allreduce_max_i64(&pg, k, 2), M2_OK);
    assert_true(k[0] == 7 && k[1] == -3);
    char text[6] = "hello";
    assert_int_equal(m2_dist_bcast(&pg, text, sizeof text, 0), M2_OK);
    assert_string_equal(text, "hello");
    int mine = 42, all = 0;
    assert_int_equal(m2_dist_gather(&pg, &mine, sizeof mine, &all), M2_OK);
    assert_int_equal(all, 42);
    assert_int_equal(m2_dist_barrier(&pg), M2_OK);
}

static void test_rank_table(void **state)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_int_equal(m2_dist_print_table(&pg, f), M2_OK);
    fclose(f);
    assert_non_null(strstr(text, "rank"));
    assert_non_null(strstr(text, pg.host));
    assert_non_null(strstr(text, "cuda:0"));
    free(text);

    m2_dist cpu = pg;
    cpu.device = -1; /* the trainer's CPU path */
    f = open_memstream(&text, &len);
    assert_int_equal(m2_dist_print_table(&cpu, f), M2_OK);
    fclose(f);
    assert_non_null(strstr(text, "cpu"));
    free(text);
}

static void fill_grads(float *g, size_t n, uint64_t step)
{
    uint64_t key = m2_rng_key(7, M2_RNG_TEST, step, 0);
    for (size_t i = 0; i < n; i++) g[i] = (float)(2.0 * m2_rng_u01(key, i) - 1.0) * (float)(step + 1);
}

/* The real layout's buckets through the model's callback, then m2_zero_step, against AdamW on the whole buffer. */
static void test_step_equals_plain_adamw(void **state)
{
    m2_config cfg;
    m2_config_defaults(&cfg);
    cfg.model.n_layers = 2;
    m2_dims d;
    m2_layout lay;
    assert_int_equal(m2_dims_init(&d, &cfg, 8, 3), M2_OK);
    assert_int_equal(m2_layout_init(&lay, &d), M2_OK);
    const size_t n = lay.n_params;
    unsigned char *mask = malloc(n);
    m2_layout_decay_mask(&lay, mask);
    m2_zero *z = NULL;
    assert_int_equal(m2_zero_create_host(&z, &pg, n, mask), M2_OK);
    const size_t P = m2_zero_padded_len(z);
    float *params = calloc(P, sizeof *params), *grads = calloc(P, sizeof *grads);
    float *ref = calloc(n, sizeof *ref), *g = calloc(n, sizeof *g), *m = calloc(n, sizeof *m), *v = calloc(n, 4);
    m2_params_init(&lay, params, 3);
    memcpy(ref, params, n * sizeof *ref);

    const float clip = 1.0f, lr = 1e-2f, wd = 0.1f;
    for (int s = 0; s < 4; s++) {
        fill_grads(grads, n, (uint64_t)s);
        const double sse = 10.0 + s;
        const int64_t count = 1000 + s;
        for (int b = 0; b < m2_layout_n_buckets(&lay); b++) {
            size_t begin, end;
            m2_layout_bucket(&lay, b, &begin, &end);
            if (end > begin) assert_int_equal(m2_zero_bucket_ready(z, grads, begin, end), M2_OK);
        }
        double loss, norm;
        int skipped;
        assert_int_equal(m2_zero_step(z, params, grads, sse, count, lr, wd, clip, &loss, &norm, &skipped), M2_OK);

        /* The reference: the same formulas, written out for one process. */
        double sumsq = 0.0;
        for (size_t i = 0; i < n; i++) sumsq += (double)grads[i] * grads[i];
        const double inv = 1.0 / (double)count, ref_norm = sqrt(sumsq) * inv;
        const double factor = inv * (ref_norm > clip ? clip / ref_norm : 1.0);
        for (size_t i = 0; i < n; i++) g[i] = (float)((double)grads[i] * factor);
        m2_adamw(ref, g, m, v, mask, n, lr, M2_ADAM_BETA1, M2_ADAM_BETA2, M2_ADAM_EPS, wd, s + 1);

        assert_false(skipped);
        assert_true(loss == sse / (double)count);
        assert_true(norm == ref_norm);
        assert_memory_equal(params, ref, n * sizeof *ref);
        assert_int_equal(m2_zero_optim_step(z), s + 1);
    }
    const m2_zero_timing t = m2_zero_last_timing(z);
    assert_true(t.reduce_wait_s >= 0 && t.adam_s >= 0 && t.allgather_s >= 0);
    free(params), free(grads), free(ref), free(g), free(m), free(v), free(mask);
    m2_zero_free(z);
    m2_layout_free(&lay);
}

static void test_bucket_misuse(void **state)
{
    m2_zero *z = NULL;
    assert_int_equal(m2_zero_create_host(&z, &pg, 1000, NULL), M2_OK);
    float *grads = calloc(m2_zero_padded_len(z), sizeof *grads);
    assert_int_equal(m2_zero_bucket_ready(z, grads, 100, 200), M2_OK);
    assert_int_equal(m2_zero_bucket_ready(z, grads, 150, 300), M2_EUSAGE);
    assert_non_null(strstr(m2_last_error(), "overlaps [100, 200)"));
    assert_int_equal(m2_zero_bucket_ready(z, grads, 900, 1001), M2_EUSAGE);
    assert_non_null(strstr(m2_last_error(), "past 1000 parameters"));
    assert_int_equal(m2_zero_bucket_ready(z, grads, 5, 5), M2_EUSAGE);
    assert_int_equal(m2_zero_reduce(z, grads), M2_OK); /* the good bucket completes; the rest come as gaps */
    free(grads);
    m2_zero_free(z);
}

int main(int argc, char **argv)
{
    if (m2_dist_init(&argc, &argv, &pg)) return m2_report("test_dist_singleton", M2_EFAIL);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_world_of_one),  cmocka_unit_test(test_collectives_are_identities),
        cmocka_unit_test(test_rank_table),    cmocka_unit_test(test_step_equals_plain_adamw),
        cmocka_unit_test(test_bucket_misuse),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    m2_dist_finalize(&pg);
    return failed;
}
