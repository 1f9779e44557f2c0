/* The model API's contract beyond the arithmetic: gradients ADD into the caller's buffer; buckets are
 * announced in order 0..L+1, each exactly when its gradients are final (a copy taken inside the callback
 * equals the final values, and the next buckets' ranges are still untouched), also when several lanes
 * (threads) run; several lanes give the same predictions and loss (bitwise: each sequence's forward is the
 * same arithmetic) and the same gradients up to the order of the sums, and a rerun gives the same bits;
 * sizes outside what the model was created for are refused with a message; the activation figure is what
 * model.c documents; a model made for inference predicts the same bits with less memory and refuses a backward.
 * fp32.
 *
 * Tolerance for sums in another order: fp32 rounding, 1e-5 of the tensor's scale (sums of 2..4 sequences'
 * contributions, each ~1e-7 relative). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "core/model.h"
#include "core/ops.h"
#include "model_fixture.h"

static void test_gradients_accumulate(void **state)
{
    m2_fixture f;
    m2_dims d = m2_fixture_dims(1, 4);
    m2_fixture_init(&f, &d, 2, 9, 1, 3);
    const size_t n = f.lay.n_params;
    m2_fixture_backward(&f);
    m2_real *once = malloc(n * sizeof *once);
    assert_non_null(once);
    memcpy(once, f.grads, n * sizeof *once);
    double sse = 0;
    int64_t count = 0;
    assert_int_equal(m2_model_forward_backward(f.model, f.params, f.grads, f.X, f.Y, f.B, f.T, f.burn_in, &sse, &count,
                                               NULL, NULL, NULL),
                     0);
    /* the second call added to the first (the sums per sequence round differently than one doubling) */
    double scale = 0;
    for (size_t i = 0; i < n; i++) scale = fmax(scale, fabs((double)once[i]));
    for (size_t i = 0; i < n; i++) assert_true(fabs((double)f.grads[i] - 2.0 * once[i]) <= 1e-5 * scale);
    free(once);
    m2_fixture_free(&f);
}

typedef struct {
    const m2_layout *lay;
    m2_real *grads, *snap;
    int calls, next;
} bucket_log;

static void on_ready(int bucket, void *user)
{
    bucket_log *b = user;
    assert_int_equal(bucket, b->next);
    b->next++;
    b->calls++;
    size_t lo, hi;
    m2_layout_bucket(b->lay, bucket, &lo, &hi);
    memcpy(b->snap + lo, b->grads + lo, (hi - lo) * sizeof *b->snap);
    /* buckets not yet announced are still all zero (nothing is written to them early) */
    for (int k = bucket + 1; k < m2_layout_n_buckets(b->lay); k++) {
        m2_layout_bucket(b->lay, k, &lo, &hi);
        for (size_t i = lo; i < hi; i++) assert_true(b->grads[i] == 0);
    }
}

static void buckets_in_order_and_final(int threads)
{
    m2_ops_cpu_set_threads(threads);
    m2_fixture f;
    m2_dims d = m2_fixture_dims(2, 4);
    d.L = 3;
    m2_fixture_init(&f, &d, 2, 9, 1, 4);
    const size_t n = f.lay.n_params;
    bucket_log log = {.lay = &f.lay, .grads = f.grads, .snap = calloc(n, sizeof(m2_real))};
    assert_non_null(log.snap);
    double sse = 0;
    int64_t count = 0;
    assert_int_equal(m2_model_forward_backward(f.model, f.params, f.grads, f.X, f.Y, f.B, f.T, f.burn_in, &sse, &count,
                                               NULL, on_ready, &log),
                     0);
    assert_int_equal(log.calls, d.L + 2);
    assert_memory_equal(log.snap, f.grads, n * sizeof *f.grads);
    free(log.snap);
    m2_fixture_free(&f);
    m2_ops_cpu_set_threads(1);
}

static void test_buckets_in_order_and_final(void **state) { buckets_in_order_and_final(1); }
static void test_buckets_with_lanes(void **state) { buckets_in_order_and_final(2); }

typedef struct {
    double sse;
    int64_t count;
    m2_real *grads, *pred;
} result;

static result run_threads(m2_fixture *f, int threads)
{
    m2_ops_cpu_set_threads(threads);
    result r = {0};
    r.grads = calloc(f->lay.n_params, sizeof *r.grads);
    r.pred = malloc((size_t)f->B * f->T * f->lay.d.O * sizeof *r.pred);
    assert_non_null(r.grads);
    assert_non_null(r.pred);
    assert_int_equal(m2_model_forward_backward(f->model, f->params, r.grads, f->X, f->Y, f->B, f->T, f->burn_in, &r.sse,
                                               &r.count, r.pred, NULL, NULL),
                     0);
    m2_ops_cpu_set_threads(1);
    return r;
}

static void test_lanes_match_one_thread(void **state)
{
    m2_fixture f;
    m2_dims d = m2_fixture_dims(2, 4);
    m2_fixture_init(&f, &d, 5, 11, 2, 8); /* 5 sequences: 3 threads get 2, 2, 1 */
    const size_t n = f.lay.n_params, ny = (size_t)f.B * f.T * d.O;
    result one = run_threads(&f, 1);
    for (int threads = 2; threads <= 3; threads++) {
        result a = run_threads(&f, threads), b = run_threads(&f, threads);
        assert_memory_equal(a.pred, one.pred, ny * sizeof *a.pred);
        assert_true(a.sse == one.sse);
        assert_int_equal(a.count, one.count);
        for (int i = 0; i < f.lay.n_tensors; i++) {
            const m2_tensor *t = &f.lay.tensors[i];
            double scale = 0;
            for (size_t k = 0; k < t->numel; k++) scale = fmax(scale, fabs((double)one.grads[t->offset + k]));
            for (size_t k = 0; k < t->numel; k++)
                if (!(fabs((double)a.grads[t->offset + k] - (double)one.grads[t->offset + k]) <= 1e-5 * scale))
                    fail_msg("%s[%zu]: %d threads %.9g, 1 thread %.9g", t->name, k, threads,
                             (double)a.grads[t->offset + k], (double)one.grads[t->offset + k]);
        }
        assert_memory_equal(a.grads, b.grads, n * sizeof *a.grads); /* reproducible */
        free(a.grads), free(a.pred), free(b.grads), free(b.pred);
    }
    /* the forward alone, with lanes, gives the same predictions */
    m2_ops_cpu_set_threads(2);
    assert_int_equal(m2_model_forward(f.model, f.params, f.X, f.B, f.T, f.pred), 0);
    m2_ops_cpu_set_threads(1);
    assert_memory_equal(f.pred, one.pred, ny * sizeof *f.pred);
    free(one.grads), free(one.pred);
    m2_fixture_free(&f);
}

/* The whole-micro-batch path (how a device backend, ops->lanes == NULL, is driven), run with the CPU ops:
 * the same predictions up to rounding of the row-block GEMMs, the same gradients up to the order of sums,
 * and buckets in order. */
static void test_whole_batch_path(void **state)
{
    m2_fixture f;
    m2_dims d = m2_fixture_dims(2, 4);
    m2_fixture_init(&f, &d, 3, 11, 2, 9);
    const size_t n = f.lay.n_params, ny = (size_t)f.B * f.T * d.O;
    result seq = run_threads(&f, 2);
    m2_ops whole = *m2_ops_cpu();
    whole.lanes = NULL;
    m2_model *m;
    assert_int_equal(m2_model_create_with_ops(&m, &f.lay, f.B, f.T, &whole), 0);
    m2_real *grads = calloc(n, sizeof *grads), *pred = malloc(ny * sizeof *pred);
    assert_non_null(grads);
    assert_non_null(pred);
    bucket_log log = {.lay = &f.lay, .grads = grads, .snap = calloc(n, sizeof(m2_real))};
    assert_non_null(log.snap);
    double sse;
    int64_t count;
    m2_ops_cpu_set_threads(2);
    assert_int_equal(m2_model_forward_backward(m, f.params, grads, f.X, f.Y, f.B, f.T, f.burn_in, &sse, &count, pred,
                                               on_ready, &log),
                     0);
    m2_ops_cpu_set_threads(1);
    assert_int_equal(log.calls, d.L + 2);
    assert_int_equal(count, seq.count);
    assert_true(fabs(sse - seq.sse) <= 1e-5 * seq.sse);
    double ps = 0;
    for (size_t i = 0; i < ny; i++) ps = fmax(ps, fabs((double)seq.pred[i]));
    for (size_t i = 0; i < ny; i++) assert_true(fabs((double)pred[i] - seq.pred[i]) <= 1e-5 * ps);
    for (int i = 0; i < f.lay.n_tensors; i++) {
        const m2_tensor *t = &f.lay.tensors[i];
        double scale = 0;
        for (size_t k = 0; k < t->numel; k++) scale = fmax(scale, fabs((double)seq.grads[t->offset + k]));
        for (size_t k = 0; k < t->numel; k++)
            if (!(fabs((double)grads[t->offset + k] - (double)seq.grads[t->offset + k]) <= 1e-5 * scale))
                fail_msg("%s[%zu]: whole batch %.9g, per sequence %.9g", t->name, k, (double)grads[t->offset + k],
                         (double)seq.grads[t->offset + k]);
    }
    free(log.snap), free(grads), free(pred), free(seq.grads), free(seq.pred);
    m2_model_free(m);
    m2_fixture_free(&f);
}

static void test_sizes_outside_the_model_are_refused(void **state)
{
    m2_fixture f;
    m2_dims d = m2_fixture_dims(1, 4);
    m2_fixture_init(&f, &d, 2, 9, 1, 5);
    double sse;
    int64_t count;
    assert_int_equal(m2_model_forward(f.model, f.params, f.X, 3, 9, f.pred), M2_EUSAGE);
    assert_non_null(strstr(m2_last_error(), "3 x 9"));
    assert_int_equal(
        m2_model_forward_backward(f.model, f.params, f.grads, f.X, f.Y, 2, 10, 0, &sse, &count, NULL, NULL, NULL),
        M2_EUSAGE);
    /* a shorter window than the maximum is fine */
    assert_int_equal(m2_model_forward(f.model, f.params, f.X, 1, 5, f.pred), 0);
    m2_model *m;
    assert_int_equal(m2_model_create(&m, &f.lay, 0, 9), M2_EUSAGE);
    m2_fixture_free(&f);
}

/* Saved per token per layer: h (D) + in_proj output (Win) + SSD output (Di) + dt (H), plus the SSD's own saved
 * values (here, with Q = 4: one P x N state per head per chunk = H P N / Q per token) and A (H per sequence), in
 * m2_reals. */
static void test_activation_bytes(void **state)
{
    m2_fixture f;
    m2_dims d = m2_fixture_dims(1, 4);
    m2_fixture_init(&f, &d, 1, 16, 0, 6);
    size_t bytes = m2_model_activation_bytes_per_token(f.model);
    size_t own = (size_t)(d.D + d.Win + d.Di + d.H) * sizeof(m2_real);
    assert_true(bytes >= own);
    assert_true(bytes <= own + (size_t)(d.H * d.P * d.N / d.Q + 4 * d.H) * sizeof(m2_real));
    m2_fixture_free(&f);
}

/* Counts the bytes a model allocates (the CPU ops underneath; lanes as the table given). */
static size_t counted_bytes;
static void *counting_alloc(const m2_ops *o, size_t bytes)
{
    counted_bytes += bytes;
    return m2_ops_cpu()->alloc(m2_ops_cpu(), bytes);
}

/* Inference keeps one layer's activations: with L = 3 (odd, so the residual stream's two slots alternate past
 * the end) on the per-sequence and the whole-batch paths, the same predictions bit for bit as a training model
 * (the same ops in the same order on the same values), less memory by at least (L - 1) layers' worth of h, in_proj
 * output and SSD output and a lane's gradient arrays, and no backward. */
static void test_inference_model(void **state)
{
    m2_fixture f;
    m2_dims d = m2_fixture_dims(1, 4);
    d.L = 3;
    m2_fixture_init(&f, &d, 2, 13, 0, 21);
    const size_t ny = (size_t)f.B * f.T * d.O;
    for (int whole = 0; whole < 2; whole++) {
        m2_ops ops = *m2_ops_cpu();
        ops.alloc = counting_alloc;
        if (whole) ops.lanes = NULL;
        m2_model *train, *infer;
        counted_bytes = 0;
        assert_int_equal(m2_model_create_with_ops(&train, &f.lay, f.B, f.T, &ops), M2_OK);
        const size_t train_bytes = counted_bytes;
        counted_bytes = 0;
        assert_int_equal(m2_model_create_inference(&infer, &f.lay, f.B, f.T, &ops), M2_OK);
        const size_t infer_bytes = counted_bytes;
        /* kept per layer: h, in_proj output, SSD output; the lanes' backward arrays: their gradients */
        const size_t per_layer = (size_t)f.B * f.T * (d.D + d.Win + d.Di) * sizeof(m2_real);
        const size_t lane_bwd = (size_t)(whole ? f.B : 1) * f.T * (d.Win + d.Cc + d.H + d.Di) * sizeof(m2_real);
        assert_true(infer_bytes + (size_t)(d.L - 1) * per_layer + lane_bwd <= train_bytes);

        m2_real *p1 = malloc(ny * sizeof *p1), *p2 = malloc(ny * sizeof *p2);
        assert_true(p1 && p2);
        assert_int_equal(m2_model_forward(train, f.params, f.X, f.B, f.T, p1), M2_OK);
        assert_int_equal(m2_model_forward(infer, f.params, f.X, f.B, f.T, p2), M2_OK);
        assert_memory_equal(p1, p2, ny * sizeof *p1);
        double sse;
        int64_t count;
        assert_int_equal(
            m2_model_forward_backward(infer, f.params, f.grads, f.X, f.Y, f.B, f.T, 0, &sse, &count, NULL, NULL, NULL),
            M2_EUSAGE);
        assert_non_null(strstr(m2_last_error(), "inference"));
        free(p1), free(p2);
        m2_model_free(train);
        m2_model_free(infer);
    }
    m2_fixture_free(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gradients_accumulate), cmocka_unit_test(test_buckets_in_order_and_final),
        cmocka_unit_test(test_buckets_with_lanes),   cmocka_unit_test(test_lanes_match_one_thread),
        cmocka_unit_test(test_whole_batch_path),     cmocka_unit_test(test_sizes_outside_the_model_are_refused),
        cmocka_unit_test(test_activation_bytes),     cmocka_unit_test(test_inference_model),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
