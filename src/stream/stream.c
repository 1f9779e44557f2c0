/* The streaming engine (stream/mamba2_stream.h): packs a model's parameters once, keeps a recurrent cache per
 * stream, and advances streams one tick at a time. One code path serves step and step_batch: a tick of n
 * streams runs each matrix as one GEMM over the n streams (n = 1: the GEMV path of m2s_gemm) and the
 * element-wise work per stream. Every buffer is allocated at open; a tick only reads and writes them. */
#include "stream/engine.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/hash.h"
#include "stream/timing.h"
#include "io/features.h"

typedef struct {
    m2s_mat W_in, W_out;
    const float *dt_bias, *conv_wT, *conv_b, *A, *Dskip;
} m2s_layer;

struct m2_stream {
    m2_dims d;
    m2s_kernels kernels;  /* the table of the instruction-set level chosen at open (a copy: m2s_use_kernels) */
    const m2s_kernels *k; /* = &kernels */
    /* k->gemm, or its AVX-512-BF16 variant for bf16 weights (m2_cpu_bf16_dot), for one stream; gemm_batch for
     * several, which differs where choose_batch_gemm timed the widening kernel faster */
    m2s_gemm_fn gemm, gemm_batch;
    int bf16, max_streams;
    float clip;
    /* packed read-only weights */
    void *mats; /* every matrix, in the order a tick reads them */
    size_t mat_bytes;
    float *vecs; /* biases, conv weights, A = -exp(A_log), D (the norms' weights are in the matrices) */
    size_t vec_bytes;
    m2s_mat embed, head;
    const float *embed_b, *head_b;
    m2s_layer *layers;
    /* the training statistics of each instrument of the checkpoint (one for a single instrument's file, I for a
     * universe, whose rows were z-scored per instrument): names [I], mean and std [I][F] */
    int n_inst;
    char (*inst_name)[64];
    double *inst_mean, *inst_std;
    double *inst_tick; /* [I] the training data's tick sizes, 0 where the checkpoint has none */
    /* per stream: L x (conv ring [K-1][Ccp], S [H][N][pad16(P)]) and the ring position shared by the layers; one
     * more slot than max_streams, the private one m2_stream_warm ticks (warm_slot) */
    float *state;
    size_t state_stride, layer_stride, ring_floats;
    int *pos;
    uint64_t fingerprint; /* of the parameters (m2s_state_view) */
    /* the featuriser's memory per stream (m2_stream_features): the last event and whether there is one */
    m2_event *last_event;
    unsigned char *has_last;
    char features_unknown[160]; /* why m2_stream_features cannot serve this model ("": it can) */
    /* tick workspace for max_streams rows; ld* are row strides (multiples of 16 floats) */
    int Dp, Winp, Ccp, Dip, Op;
    float *h, *zx, *xbc, *y, *out, *pred;
    float *scale;              /* per stream: a norm's scale for the next matrix product's output (m2s_gemm) */
    float *dt, *decay;         /* m2s_dt_decay's per-stream, per-head values: pad16(max_streams H) each */
    float *xq;                 /* bf16 mode: a GEMM's inputs rounded to bf16, max_streams rows of the largest Kp */
    int *all;                  /* 0..max_streams-1, for step_batch(streams = NULL) */
    int warm_slot;             /* = max_streams: the state slot no caller can name */
    float *warm_x, *warm_pred; /* m2_stream_warm's input (zeros) and discarded output */
};

/* One table per level (stream_kernels.c, compiled per level by cmake/isa.cmake). */
extern const m2s_kernels m2s_kernels_scalar, m2s_kernels_avx2, m2s_kernels_avx512;

const m2s_kernels *m2s_kernels_for(m2_cpu_level level)
{
    return level >= M2_CPU_AVX512 ? &m2s_kernels_avx512
           : level == M2_CPU_AVX2 ? &m2s_kernels_avx2
                                  : &m2s_kernels_scalar;
}

static size_t pad16(size_t n) { return (n + M2S_VEC - 1) / M2S_VEC * M2S_VEC; }

static void *alloc64(size_t bytes)
{
    bytes = (bytes + 63) / 64 * 64;
    void *p = aligned_alloc(64, bytes ? bytes : 64);
    if (p) memset(p, 0, bytes ? bytes : 64);
    return p;
}

m2_stream_options m2_stream_defaults(void)
{
    m2_stream_options o = {.max_streams = 1, .bf16 = 0, .clip = 5.0f};
    return o;
}

/* Matrices in tick order: embed, per layer W_in then W_out, head. */
static size_t plan_mats(m2_stream *s)
{
    const m2_dims *d = &s->d;
    size_t cur = 0;
    m2s_mat_plan(&s->embed, d->D, d->F, s->bf16, &cur);
    for (int l = 0; l < d->L; l++) {
        m2s_mat_plan(&s->layers[l].W_in, d->Win, d->D, s->bf16, &cur);
        m2s_mat_plan(&s->layers[l].W_out, d->D, d->Di, s->bf16, &cur);
    }
    m2s_mat_plan(&s->head, d->O, d->D, s->bf16, &cur);
    return cur;
}

/* Small vectors, each padded to 16 floats (so every one starts 64-byte aligned). */
static float *take(float **cur, size_t n)
{
    float *p = *cur;
    *cur += pad16(n);
    return p;
}

/* Takes n floats from the packed buffer and fills them with a copy of src. */
static const float *take_copy(float **cur, const float *src, size_t n)
{
    float *p = take(cur, n);
    memcpy(p, src, n * sizeof *p);
    return p;
}

static size_t vec_floats(const m2_dims *d)
{
    size_t per_layer = 3 * pad16(d->H) + (size_t)(d->K > 4 ? d->K : 4) * pad16(d->Cc) + pad16(d->Cc);
    return pad16(d->D) + (size_t)d->L * per_layer + pad16(d->O);
}

static void pack_vecs(m2_stream *s, const m2_layout *lay, const float *params)
{
    const m2_dims *d = &s->d;
    float *cur = s->vecs, *v;
    const int Ccp = s->Ccp;
    s->embed_b = take_copy(&cur, params + lay->embed_b, (size_t)d->D);
    for (int l = 0; l < d->L; l++) {
        const float *pl = params + m2_layer_base(lay, l);
        const m2_layer_offsets *o = &lay->layer;
        m2s_layer *L = &s->layers[l];
        v = take(&cur, (size_t)(d->K > 4 ? d->K : 4) * Ccp); /* rows K..3 stay zero (m2s_conv_silu) */
        for (int c = 0; c < d->Cc; c++) /* [Cc,1,K] -> [K][Ccp]: one tap of every channel is contiguous */
            for (int k = 0; k < d->K; k++) v[(size_t)k * Ccp + c] = pl[o->conv_w + (size_t)c * d->K + k];
        L->conv_wT = v;
        L->conv_b = take_copy(&cur, pl + o->conv_b, (size_t)d->Cc);
        L->dt_bias = take_copy(&cur, pl + o->dt_bias, (size_t)d->H);
        v = take(&cur, d->H);
        for (int h = 0; h < d->H; h++) v[h] = -expf(pl[o->A_log + h]);
        L->A = v;
        L->Dskip = take_copy(&cur, pl + o->Dskip, (size_t)d->H);
    }
    s->head_b = take_copy(&cur, params + lay->head_b, (size_t)d->O);
}

static int check_dims(const m2_dims *d, const m2_stream_options *opt)
{
    if (opt->max_streams < 1 || opt->max_streams > (1 << 20))
        return m2_fail(M2_EUSAGE, "stream (max_streams): %d is not in [1, 1048576]", opt->max_streams);
    if (d->F < 1) return m2_fail(M2_EUSAGE, "stream (features): %d features", d->F);
    if (d->D < 1 || d->L < 1 || d->K < 1 || d->N < 1 || d->O < 1 || d->G < 1 || d->H % d->G)
        return m2_fail(M2_EUSAGE, "stream (model): inconsistent sizes");
    return M2_OK;
}

static int alloc_buffers(m2_stream *s)
{
    const m2_dims *d = &s->d;
    const size_t S = (size_t)s->max_streams;
    size_t mat_elems = plan_mats(s);
    s->mat_bytes = mat_elems * (s->bf16 ? 2 : 4);
    s->vec_bytes = vec_floats(d) * sizeof(float);
    s->ring_floats = (size_t)(d->K - 1) * s->Ccp;
    s->layer_stride = s->ring_floats + (size_t)d->H * d->N * pad16(d->P); /* m2s_ssm's rows are whole vectors */
    s->state_stride = (size_t)d->L * s->layer_stride;
    s->mats = m2s_alloc_pages(s->mat_bytes);
    s->vecs = alloc64(s->vec_bytes);
    s->state = m2s_alloc_pages((S + 1) * s->state_stride * sizeof(float));
    s->pos = calloc(S + 1, sizeof *s->pos);
    s->last_event = calloc(S + 1, sizeof *s->last_event);
    s->has_last = calloc(S + 1, sizeof *s->has_last);
    s->all = calloc(S, sizeof *s->all);
    s->n_inst = 1;
    s->inst_name = calloc(1, sizeof *s->inst_name);
    s->inst_mean = calloc((size_t)d->F, sizeof *s->inst_mean);
    s->inst_std = calloc((size_t)d->F, sizeof *s->inst_std);
    s->inst_tick = calloc(1, sizeof *s->inst_tick);
    s->h = alloc64(S * s->Dp * sizeof(float));
    s->scale = alloc64(S * sizeof(float));
    s->zx = alloc64(S * s->Winp * sizeof(float));
    s->xbc = alloc64(S * s->Ccp * sizeof(float));
    s->y = alloc64(S * s->Dip * sizeof(float));
    s->out = alloc64(S * s->Dp * sizeof(float));
    s->pred = alloc64(S * s->Op * sizeof(float));
    s->dt = alloc64(pad16(S * d->H) * sizeof(float));
    s->decay = alloc64(pad16(S * d->H) * sizeof(float));
    int kmax = d->F > d->D ? d->F : d->D;
    kmax = kmax > d->Di ? kmax : d->Di;
    s->xq = alloc64(m2s_xq_floats(S, kmax + 1) * sizeof(float));
    s->warm_x = alloc64((size_t)d->F * sizeof(float));
    s->warm_pred = alloc64((size_t)d->O * sizeof(float));
    s->warm_slot = s->max_streams;
    if (!s->mats || !s->vecs || !s->state || !s->pos || !s->all || !s->h || !s->scale || !s->zx || !s->xbc || !s->y ||
        !s->out || !s->pred || !s->dt || !s->decay || !s->xq || !s->last_event || !s->has_last || !s->inst_name ||
        !s->inst_mean || !s->inst_std || !s->inst_tick || !s->warm_x || !s->warm_pred)
        return m2_fail(M2_EFAIL, "stream: out of memory for %d streams", s->max_streams);
    for (int i = 0; i < s->max_streams; i++) s->all[i] = i;
    return M2_OK;
}

/* Batches of streams with bf16 weights: vdpbf16ps or the AVX-512 widening kernel, whichever is faster on this
 * core. Both add the same exact products in the same order (tests/stream/test_stream_gemm.c compares them
 * bitwise), so the choice changes no output, only the time: on an Intel Emerald Rapids the dot instruction
 * (8 cycles' latency, one every ~2.2 cycles: the issue slots of four FMAs for the work of two) made 64-stream GEMMs
 * 1.5-1.6x slower than widening, whose shift and and per loaded word are shared by a tile's streams, while a single
 * stream's GEMV, which pays them per word too, ran at the same speed either way (BENCHMARKS.md, "Intel Emerald
 * Rapids" and "Emerald Rapids, continued"). So one stream keeps the dot and batches take what the layer's
 * W_in at min(max_streams, 16) streams measures faster here, by the fastest of 5 calls each, alternated; the
 * widening kernel must win by 5% to be taken (a tie keeps the dot). ~0.1-1 ms at open. */
static void choose_batch_gemm(m2_stream *s)
{
    if (s->gemm != m2s_gemm_avx512bf16 || s->max_streams < 2 || s->d.L < 1) return;
    const m2s_gemm_fn widen = s->k->gemm;
    const int n = s->max_streams < 16 ? s->max_streams : 16;
    const m2s_mat *W = &s->layers[0].W_in;
    memset(s->h, 0, (size_t)n * s->Dp * sizeof *s->h);
    double best[2] = {1e30, 1e30};
    for (int r = 0; r < 5; r++)
        for (int v = 0; v < 2; v++) {
            const double t0 = m2_now_ns();
            (v ? widen : s->gemm)(W, s->mats, s->bf16, n, s->h, s->Dp, NULL, s->zx, s->Winp, s->xq);
            best[v] = fmin(best[v], m2_now_ns() - t0);
        }
    if (best[1] < 0.95 * best[0]) s->gemm_batch = widen;
}

int m2_stream_open_params(const m2_layout *lay, const float *params, const double *mean, const double *std,
                          const m2_stream_options *opt, m2_stream **out)
{
    m2_stream_options defaults = m2_stream_defaults();
    if (!opt) opt = &defaults;
    *out = NULL;
    int rc = check_dims(&lay->d, opt);
    if (!rc) rc = m2_cpu_check_env();
    if (rc) return rc;
    m2_stream *s = calloc(1, sizeof *s);
    if (!s) return m2_fail(M2_EFAIL, "stream: out of memory");
    s->d = lay->d;
    s->kernels = *m2s_kernels_for(m2_cpu_active());
    s->k = &s->kernels;
    s->bf16 = opt->bf16 != 0;
    s->gemm = s->bf16 && s->k->level >= M2_CPU_AVX512 && m2_cpu_bf16_dot() ? m2s_gemm_avx512bf16 : s->k->gemm;
    s->gemm_batch = s->gemm;
    s->max_streams = opt->max_streams;
    s->clip = opt->clip;
    s->Dp = (int)pad16(s->d.D);
    s->Winp = (int)pad16(s->d.Win);
    s->Ccp = (int)pad16(s->d.Cc);
    s->Dip = (int)pad16(s->d.Di);
    s->Op = (int)pad16(s->d.O);
    s->layers = calloc((size_t)s->d.L, sizeof *s->layers);
    if (!s->layers) {
        free(s);
        return m2_fail(M2_EFAIL, "stream: out of memory");
    }
    rc = alloc_buffers(s);
    if (rc) {
        m2_stream_close(s);
        return rc;
    }
    /* The norms' weights go into the matrices after them (docs/MODEL.md §7, "The engine's arithmetic"). */
    m2s_mat_pack(&s->embed, params + lay->embed_w, NULL, s->mats, s->bf16);
    for (int l = 0; l < s->d.L; l++) {
        const float *pl = params + m2_layer_base(lay, l);
        m2s_mat_pack(&s->layers[l].W_in, pl + lay->layer.W_in, pl + lay->layer.norm_w, s->mats, s->bf16);
        m2s_mat_pack(&s->layers[l].W_out, pl + lay->layer.W_out, pl + lay->layer.gnorm_w, s->mats, s->bf16);
    }
    m2s_mat_pack(&s->head, params + lay->head_w, params + lay->normf_w, s->mats, s->bf16);
    pack_vecs(s, lay, params);
    choose_batch_gemm(s);
    s->fingerprint = m2_hash64(params, lay->n_params * sizeof *params, 0);
    m2s_set_feature_names(s, NULL); /* by the shape alone; m2_stream_open checks the checkpoint's names */
    for (int f = 0; f < s->d.F; f++) {
        s->inst_mean[f] = mean ? mean[f] : 0.0;
        s->inst_std[f] = std && std[f] > 0 ? std[f] : 1.0;
    }
    *out = s;
    return M2_OK;
}

void m2_stream_close(m2_stream *s)
{
    if (!s) return;
    free(s->mats);
    free(s->vecs);
    free(s->state);
    free(s->pos);
    free(s->last_event);
    free(s->has_last);
    free(s->all);
    free(s->inst_name);
    free(s->inst_mean);
    free(s->inst_std);
    free(s->inst_tick);
    free(s->h);
    free(s->scale);
    free(s->zx);
    free(s->xbc);
    free(s->y);
    free(s->out);
    free(s->pred);
    free(s->dt);
    free(s->decay);
    free(s->xq);
    free(s->warm_x);
    free(s->warm_pred);
    free(s->layers);
    free(s);
}

void m2_stream_reset(m2_stream *s, int stream)
{
    if (stream < 0) {
        memset(s->state, 0, (size_t)s->max_streams * s->state_stride * sizeof *s->state);
        memset(s->pos, 0, (size_t)s->max_streams * sizeof *s->pos);
        memset(s->has_last, 0, (size_t)s->max_streams);
    } else if (stream < s->max_streams) {
        memset(s->state + (size_t)stream * s->state_stride, 0, s->state_stride * sizeof *s->state);
        s->pos[stream] = 0;
        s->has_last[stream] = 0;
    }
}

m2s_state_view m2s_state_of(const m2_stream *s, int stream)
{
    m2s_state_view v = {.state = s->state + (size_t)stream * s->state_stride,
                        .pos = s->pos + stream,
                        .layer_stride = s->layer_stride,
                        .ldc = s->Ccp,
                        .ldp = (int)pad16(s->d.P),
                        .fingerprint = s->fingerprint,
                        .last_event = s->last_event + stream,
                        .has_last = s->has_last + stream,
                        .features_unknown = s->features_unknown};
    return v;
}

/* Layer l's conv ring, then its SSM state, of a stream. */
static float *layer_state(m2_stream *s, int stream, int l)
{
    return s->state + (size_t)stream * s->state_stride + (size_t)l * s->layer_stride;
}

static m2s_gemm_fn gemm_for(const m2_stream *s, int n) { return n > 1 ? s->gemm_batch : s->gemm; }

/* One layer for n streams: h <- h + Mixer(RMSNorm(h)). */
static void layer_tick(m2_stream *s, int l, int n, const int *ids)
{
    const m2_dims *d = &s->d;
    const m2s_layer *L = &s->layers[l];
    /* RMSNorm(h) W_in^T = r (h W_in'^T), W_in' = W_in diag(norm_w) (packed so): the product starts on h at once and
     * the norm's reduction chain runs beside it instead of before it. */
    for (int i = 0; i < n; i++) s->scale[i] = s->k->rms_scale(s->h + (size_t)i * s->Dp, d->D);
    gemm_for(s, n)(&L->W_in, s->mats, s->bf16, n, s->h, s->Dp, s->scale, s->zx, s->Winp, s->xq);
    s->k->dt_decay(L->A, L->dt_bias, d->H, n, s->zx + 2 * d->Di + 2 * d->G * d->N, s->Winp, s->dt, s->decay);
    /* States past the L2 (M2S_STATE_PREFETCH_MIN) come from L3 or DRAM, where the update alone ran at DRAM speed
     * (BENCHMARKS.md, issue 14, fifth pass): then each stream's update prefetches the next stream's state into L2
     * line by line as it goes, so that two streams' loads are in flight. Within the L2 the prefetches only cost. */
    const int far = (size_t)n * s->state_stride * sizeof(float) > M2S_STATE_PREFETCH_MIN;
    /* In phases over the streams (conv, SSM, gated norm), not one stream at a time: each phase's calls are short
     * and independent, so the core overlaps one stream's exp and reduction chains with the next stream's. */
    for (int i = 0; i < n; i++)
        s->k->conv_silu(L->conv_wT, L->conv_b, layer_state(s, ids[i], l), s->pos[ids[i]], d->K, d->Cc, s->Ccp,
                        s->zx + (size_t)i * s->Winp + d->Di, s->xbc + (size_t)i * s->Ccp);
    for (int i = 0; i < n; i++)
        s->k->ssm(d, L->Dskip, layer_state(s, ids[i], l) + s->ring_floats, s->xbc + (size_t)i * s->Ccp,
                  s->dt + (size_t)i * d->H, s->decay + (size_t)i * d->H, s->y + (size_t)i * s->Dip,
                  i + 1 < n && far ? layer_state(s, ids[i + 1], l) + s->ring_floats : NULL);
    for (int i = 0; i < n; i++) /* zx starts with z; W_out holds the gated norm's weights, its output the scale */
        s->scale[i] = s->k->gate(s->y + (size_t)i * s->Dip, s->zx + (size_t)i * s->Winp, d->Di, d->G);
    gemm_for(s, n)(&L->W_out, s->mats, s->bf16, n, s->y, s->Dip, s->scale, s->out, s->Dp, s->xq);
    for (int i = 0; i < n; i++) {
        float *h = s->h + (size_t)i * s->Dp;
        const float *o = s->out + (size_t)i * s->Dp;
        for (int j = 0; j < d->D; j++) h[j] += o[j];
    }
}

static void tick(m2_stream *s, int n, const int *ids, const float *X, float *pred)
{
    const m2_dims *d = &s->d;
    gemm_for(s, n)(&s->embed, s->mats, s->bf16, n, X, d->F, NULL, s->h, s->Dp, s->xq);
    for (int i = 0; i < n; i++) {
        float *h = s->h + (size_t)i * s->Dp;
        for (int j = 0; j < d->D; j++) h[j] += s->embed_b[j];
    }
    for (int l = 0; l < d->L; l++) layer_tick(s, l, n, ids);
    if (d->K > 1)
        for (int i = 0; i < n; i++) s->pos[ids[i]] = (s->pos[ids[i]] + 1) % (d->K - 1);
    for (int i = 0; i < n; i++) s->scale[i] = s->k->rms_scale(s->h + (size_t)i * s->Dp, d->D);
    gemm_for(s, n)(&s->head, s->mats, s->bf16, n, s->h, s->Dp, s->scale, s->pred, s->Op, s->xq);
    for (int i = 0; i < n; i++)
        for (int o = 0; o < d->O; o++) pred[(size_t)i * d->O + o] = s->pred[(size_t)i * s->Op + o] + s->head_b[o];
}

int m2_stream_step(m2_stream *s, int stream, const float *x, float *pred)
{
    if (stream < 0 || stream >= s->max_streams)
        return m2_fail(M2_EUSAGE, "stream (index): %d is not in [0, %d)", stream, s->max_streams);
    tick(s, 1, &stream, x, pred);
    return M2_OK;
}

/* n streams named by `streams` (NULL: 0..n-1) for the call `what`: M2_EUSAGE unless all are in range. */
static int check_streams(const m2_stream *s, int n, const int *streams, const char *what)
{
    if (n < 0 || n > s->max_streams)
        return m2_fail(M2_EUSAGE, "stream (%s): %d streams, at most %d", what, n, s->max_streams);
    if (streams)
        for (int i = 0; i < n; i++)
            if (streams[i] < 0 || streams[i] >= s->max_streams)
                return m2_fail(M2_EUSAGE, "stream (index): %d is not in [0, %d)", streams[i], s->max_streams);
    return M2_OK;
}

int m2_stream_step_batch(m2_stream *s, int n, const int *streams, const float *X, float *pred)
{
    int rc = check_streams(s, n, streams, "batch");
    if (rc) return rc;
    if (n) tick(s, n, streams ? streams : s->all, X, pred);
    return M2_OK;
}

/* A tick of the private slot runs the code, reads every weight and writes every workspace row a step of one
 * stream uses (so the instructions, the weights, their TLB entries and the buffers are cached), then the named
 * streams' states are read line by line, last, so that they are the most recently used. The private slot's input is
 * zero: its state decays to a fixed point and never grows. */
int m2_stream_warm(m2_stream *s, int n, const int *streams)
{
    int rc = check_streams(s, n, streams, "warm");
    if (rc) return rc;
    tick(s, 1, &s->warm_slot, s->warm_x, s->warm_pred);
    uint32_t any = 0; /* an OR of one word per line: a 1-cycle chain, unlike a float sum's 3 to 4 */
    for (int i = 0; i < n; i++) {
        const float *st = s->state + (size_t)(streams ? streams[i] : i) * s->state_stride;
        for (size_t j = 0; j < s->state_stride; j += 64 / sizeof *st) {
            uint32_t w;
            memcpy(&w, st + j, sizeof w);
            any |= w;
        }
    }
    memcpy(s->warm_pred, &any, sizeof any); /* a store the compiler must keep, so that it keeps the loads */
    return M2_OK;
}

int m2s_set_instruments(m2_stream *s, int n, const char (*names)[64], const double *mean, const double *std, int ld,
                        const double *tick)
{
    const int F = s->d.F;
    char(*nm)[64] = calloc((size_t)n, sizeof *nm);
    double *mu = malloc((size_t)n * F * sizeof *mu), *sd = malloc((size_t)n * F * sizeof *sd);
    double *tk = calloc((size_t)n, sizeof *tk);
    if (n < 1 || !nm || !mu || !sd || !tk) {
        free(nm);
        free(mu);
        free(sd);
        free(tk);
        return m2_fail(n < 1 ? M2_EUSAGE : M2_EFAIL, "stream (instruments): %s", n < 1 ? "none" : "out of memory");
    }
    for (int i = 0; i < n; i++) {
        snprintf(nm[i], sizeof nm[i], "%s", names[i]);
        tk[i] = tick ? tick[i] : 0.0;
        for (int f = 0; f < F; f++) {
            mu[(size_t)i * F + f] = mean[(size_t)i * ld + f];
            sd[(size_t)i * F + f] = std[(size_t)i * ld + f] > 0 ? std[(size_t)i * ld + f] : 1.0;
        }
    }
    free(s->inst_name);
    free(s->inst_mean);
    free(s->inst_std);
    free(s->inst_tick);
    s->n_inst = n;
    s->inst_name = nm;
    s->inst_mean = mu;
    s->inst_std = sd;
    s->inst_tick = tk;
    return M2_OK;
}

int m2_stream_n_instruments(const m2_stream *s) { return s->n_inst; }

double m2_stream_tick_size(const m2_stream *s, int instrument)
{
    return instrument >= 0 && instrument < s->n_inst ? s->inst_tick[instrument] : 0.0;
}

void m2s_set_feature_names(m2_stream *s, const char (*names)[32])
{
    const int F = s->d.F, k = F - M2_N_FEATURES - 1; /* depth levels, when there are depth features */
    s->features_unknown[0] = '\0';
    if (F < M2_N_FEATURES || F == M2_N_FEATURES + 1) {
        snprintf(s->features_unknown, sizeof s->features_unknown,
                 "the model takes %d features; the featuriser makes %d, or %d + depth levels + 1", F, M2_N_FEATURES,
                 M2_N_FEATURES);
        return;
    }
    for (int f = 0; names && f < F; f++) {
        char want[32];
        if (f < M2_N_FEATURES)
            snprintf(want, sizeof want, "%s", m2_feature_name[f]);
        else if (f - M2_N_FEATURES < k)
            snprintf(want, sizeof want, "depth_imb_%d", f - M2_N_FEATURES + 1);
        else
            snprintf(want, sizeof want, "depth_imb_cum");
        if (strcmp(names[f], want) != 0) {
            snprintf(s->features_unknown, sizeof s->features_unknown,
                     "the model's feature %d is '%.31s', the featuriser's is '%s'", f, names[f], want);
            return;
        }
    }
}

int m2_stream_instrument(const m2_stream *s, const char *name)
{
    for (int i = 0; name && i < s->n_inst; i++)
        if (strcmp(s->inst_name[i], name) == 0) return i;
    m2_fail(M2_EUSAGE, "m2_stream_instrument (%s): not among the checkpoint's %d instrument(s)", name ? name : "NULL",
            s->n_inst);
    return -1;
}

/* As m2_features_apply z-scores a dataset's rows: the feature as the float the dataset holds, then (x - mean) / std in
 * double, clipped, to float, so that a raw feature computed as in training gives /features/X's value bit for bit. */
int m2_stream_standardize_instrument(const m2_stream *s, int instrument, const double *raw, float *x)
{
    if (instrument < 0 || instrument >= s->n_inst)
        return m2_fail(M2_EUSAGE, "m2_stream_standardize_instrument (instrument): %d is not in [0, %d)", instrument,
                       s->n_inst);
    const double *mean = s->inst_mean + (size_t)instrument * s->d.F, *std = s->inst_std + (size_t)instrument * s->d.F;
    for (int f = 0; f < s->d.F; f++) {
        double z = ((double)(float)raw[f] - mean[f]) / std[f];
        if (s->clip > 0) z = z > s->clip ? s->clip : z < -s->clip ? -s->clip : z;
        x[f] = (float)z;
    }
    return M2_OK;
}

void m2_stream_standardize(const m2_stream *s, const double *raw, float *x)
{
    if (s->n_inst == 1) {
        m2_stream_standardize_instrument(s, 0, raw, x);
        return;
    }
    /* which instrument's statistics apply is the caller's to say: a NaN row makes the mistake show at once */
    m2_fail(M2_EUSAGE,
            "m2_stream_standardize: the checkpoint holds %d instruments' statistics; use "
            "m2_stream_standardize_instrument",
            s->n_inst);
    for (int f = 0; f < s->d.F; f++) x[f] = NAN;
}

int m2_stream_n_features(const m2_stream *s) { return s->d.F; }
int m2_stream_n_targets(const m2_stream *s) { return s->d.O; }
int m2_stream_max_streams(const m2_stream *s) { return s->max_streams; }
const m2_dims *m2_stream_dims(const m2_stream *s) { return &s->d; }
size_t m2_stream_weight_bytes(const m2_stream *s) { return s->mat_bytes + s->vec_bytes; }
size_t m2_stream_state_bytes(const m2_stream *s) { return s->state_stride * sizeof(float); }
m2s_kernel_set m2s_kernels_in_use(const m2_stream *s)
{
    m2s_kernel_set set = {.k = s->kernels, .gemm_batch = s->gemm_batch};
    set.k.gemm = s->gemm;
    return set;
}

void m2s_use_kernels(m2_stream *s, const m2s_kernel_set *set)
{
    s->kernels = set->k;
    s->gemm = set->k.gemm;
    s->gemm_batch = set->gemm_batch;
}

const char *m2_stream_cpu(const m2_stream *s)
{
    if (s->gemm != m2s_gemm_avx512bf16) return m2_cpu_name(s->k->level);
    return s->gemm_batch == s->gemm ? "avx512+bf16" : "avx512+bf16/avx512";
}
