/* The Mamba-2 model graph (docs/MODEL.md §2), forward and backward, written once against the ops interface.
 *
 * What the forward keeps for the backward, per layer (the rest is recomputed, as in upstream's
 * memory-efficient path, because it is cheap elementwise work next to the GEMMs and the SSD):
 *   h_l     [M,D]    the residual stream entering the layer (RMSNorm and its input are recomputed from it)
 *   zxbcdt  [M,Win]  the in_proj output: z (gate), xBC before the conv, dt_raw
 *   y       [M,Di]   the SSD output before the gate (re-running the SSD would cost as much as its forward)
 *   dt      [M,H]    softplus(dt_raw + dt_bias) (m2_real), and A = -exp(A_log) [H] per unit: kept, not recomputed,
 *                    because they are a few bytes per token whose recompute costs the GPU two launches per layer
 *   saved            the SSD's own (ssd.h; the CUDA backend's: kernels/ssd_cuda.cuh)
 * zxbcdt and y are stored in the backend's activation type (ops.h m2_act_type, read once at creation: bf16 on the
 * CUDA backend at bf16 precision, m2_real on the CPU); h_l is m2_real.
 * Recomputed in the backward: RMSNorm(h_l), conv+SiLU, the gated norm's output (the two norms' outputs by their own
 * backwards, which read the same inputs).
 * The backward's GEMM operands around the two projections are in the activation type too (docs/MODEL.md §8): the
 * recomputed norm outputs u and o, d(o), the in_proj output's gradient dzx (dz, the conv's input gradient, ddt_raw),
 * a copy of the residual stream's gradient dh (dh_act, written by the rmsnorm backward that adds into dh) and W_out
 * and W_in (params_act: the parameters rounded once per call), and d(u), the rmsnorm backward's input; dh itself, the
 * SSD's ddt and every parameter gradient (dt_bias's and the conv's summed from fp32 values before dzx's rounding)
 * are m2_real.
 * Plus h_L (the input of norm_f) once per model. M = B*T tokens.
 *
 * Backward order: loss -> head -> norm_f (bucket 0) -> layers L-1..0 (buckets 1..L) -> embed (bucket L+1).
 *
 * Work units and lanes. A device backend (ops->lanes == NULL) gets one call per op for the whole micro-batch.
 * On the CPU that shape is slow: every op would fork and join its threads over M = B*T rows whose
 * intermediate values (~6 KB per token per layer) stream through memory, and most of those ops are
 * memory-bound. So with ops->lanes, the model instead runs up to lanes() host threads ("lanes") at once,
 * each taking whole sequences (units) one at a time with its own one-sequence workspace, which stays in
 * cache between ops, while the ops run single-threaded inside the lane (GEMMs of 512 rows still run near
 * the single-core peak). Each lane adds its parameter gradients into its own buffer; when a bucket is
 * complete in every lane, the lanes' buffers are added into the caller's in lane order (deterministic for
 * a given thread count) and the bucket is announced from the calling (master) thread, so an MPI-backed
 * on_ready is called from the thread that initialised MPI. */
#include "core/model.h"

#include "base/error.h"
#include "core/ops.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { MAX_LANES = 256 };

/* One lane's workspace, sized for one unit. */
typedef struct {
    void *block;   /* the workspace allocation */
    m2_real *u;    /* [rows,D] RMSNorm output, written in the activation type into u's bytes as the in_proj's input
                    * and as the backward's recomputed output; in the head's backward d(norm_f output) (m2_real) */
    void *xbc;     /* [rows,Cc] conv+SiLU output: x, B, C, in the activation type */
    m2_real *dt;   /* [rows,H] (inference; a training model keeps dt per layer, dt_at) */
    m2_real *A;    /* [H] (likewise) */
    m2_real *dA;   /* [H] */
    m2_real *o;    /* [rows,Di] gated norm output, written in the activation type into o's bytes (the out_proj's
                    * input, and the backward's recomputed output) */
    void *dzx;     /* [rows,Win] gradient of the in_proj output, in the activation type */
    m2_real *dxbc; /* [rows,max(Cc,D)]: d(o) in the activation type, then the SSD's dx, dB, dC [rows,Cc] in the
                    * activation type (the conv backward's d(out)), then d(u) [rows,D] in the activation type */
    m2_real *ddt;  /* [rows,H] */
    void *dy;      /* [rows,Di] the gated norm's d(y), in the activation type (the SSD backward's input) */
    m2_real *scratch;
    size_t scratch_n;
    m2_real *grads; /* this lane's gradient sums (only when several lanes run); zero between calls */
    int phase;
    double op_s[2][M2_OPK_N];
} lane;

struct m2_model {
    m2_layout lay; /* dims and offsets (its tensor table is not used) */
    const m2_ops *ops;
    int max_B, max_T;
    int per_seq;         /* units are single sequences (ops->lanes != NULL), else the whole micro-batch */
    int max_units;       /* units per micro-batch at most */
    size_t unit_rows;    /* rows of a lane's workspace */
    size_t saved_stride; /* SSD saved values per layer, for all units (m2_reals) */
    int inference;       /* forward only: one layer's activations, reused layer after layer (h: two, in turn) */
    m2_act_type act;     /* element type of zx, y and the forward projections' operands: ops->act_type at creation */

    /* kept by the forward for the backward, for the whole micro-batch */
    void *block;
    m2_real *h;       /* [L+1][M,D] residual stream entering layer l; h[L] enters norm_f */
    void *zx;         /* [L][M,Win] in_proj outputs (type act) */
    void *y;          /* [L][M,Di] SSD outputs (type act) */
    m2_real *dt;      /* [L][M,H] dt = softplus(dt_raw + dt_bias) (NULL in inference: the lane's) */
    m2_real *A;       /* [L][max_units][H] A = -exp(A_log) (likewise) */
    m2_real *saved;   /* [L][saved_stride] */
    m2_real *dh;      /* [M,D] gradient of the residual stream */
    void *dh_act;     /* [M,D] dh in the activation type, for the backward's GEMMs (NULL when that is m2_real) */
    void *params_act; /* [n_params] the parameters in the activation type, rounded at the start of every call (so an
                       * optimizer step or a load is always seen): the projections' weight operands (NULL: m2_real) */
    m2_real *pred;    /* [M,O] when the caller wants no predictions back */
    m2_real *dpred;   /* [M,O] */
    m2_real *dX;      /* [M,F] */
    double *unit_sse;
    int64_t *unit_count;
    int keep_dX, timing;

    int n_lanes; /* lanes with a workspace */
    lane lanes[MAX_LANES];
};

/* One forward/backward call: its arguments and geometry. */
typedef struct {
    const m2_real *params, *X, *Y;
    m2_real *grads, *pred;
    int B, T, burn_in;
    size_t M; /* B*T */
    int n_units, units_nb;
    size_t unit_saved; /* SSD saved values per unit per layer */
    int keep;          /* a backward follows */
    int lane_grads;    /* the lanes sum into their own buffers (several lanes run) */
    m2_bucket_ready_fn on_ready;
    void *user;
} call;

/* ---- timing ---- */
static double op_clock(const m2_model *m)
{
    if (m->timing == M2_TIMING_THREAD_CPU) {
        struct timespec ts;
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
        return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
    }
    m->ops->sync(m->ops);
    return omp_get_wtime();
}

#define OP(kind, call_)                                                \
    do {                                                               \
        double t0_ = m->timing ? op_clock(m) : 0.0;                    \
        call_;                                                         \
        if (m->timing) ln->op_s[ln->phase][kind] += op_clock(m) - t0_; \
    } while (0)

const char *m2_op_kind_name(int kind)
{
    static const char *names[M2_OPK_N] = {"gemm", "rmsnorm",    "conv+silu", "dt/A",
                                          "ssd",  "gated norm", "loss",      "bias/add/memset"};
    return kind >= 0 && kind < M2_OPK_N ? names[kind] : "?";
}

void m2_model_set_timing(m2_model *m, int mode)
{
    m->timing = mode;
    if (mode)
        for (int i = 0; i < m->n_lanes; i++) memset(m->lanes[i].op_s, 0, sizeof m->lanes[i].op_s);
}

void m2_model_op_seconds(const m2_model *m, int backward, double secs[M2_OPK_N])
{
    memcpy(secs, m->lanes[0].op_s[backward ? 1 : 0], sizeof m->lanes[0].op_s[0]);
}

/* ---- sizes and allocation ---- */
static m2_ssd_shape ssd_shape(const m2_model *m, int B, int T)
{
    const m2_dims *d = &m->lay.d;
    m2_ssd_shape s = {
        .B = B, .T = T, .H = d->H, .P = d->P, .G = d->G, .N = d->N, .Q = d->Q, .ld_x = d->Cc, .ld_bc = d->Cc};
    return s;
}

/* Carves n elements of elem bytes out of a block being laid out (cursor in bytes; steps of 16 reals keep rows
 * cache-aligned). */
static void *carve_bytes(void *base, size_t *cursor, size_t n, size_t elem)
{
    const size_t step = 16 * sizeof(m2_real);
    void *p = base ? (char *)base + *cursor : NULL;
    *cursor += (n * elem + step - 1) / step * step;
    return p;
}
static m2_real *carve(void *base, size_t *cursor, size_t n) { return carve_bytes(base, cursor, n, sizeof(m2_real)); }

/* p advanced by n elements of the activation type. */
static void *act_at(const m2_model *m, const void *p, size_t n) { return (char *)p + n * m2_act_bytes(m->act); }

/* Lays out a lane's workspace at base (NULL: only counts); returns its size in bytes. */
static size_t lane_layout(const m2_model *m, lane *ln, void *base)
{
    const m2_dims *d = &m->lay.d;
    const size_t R = m->unit_rows;
    size_t c = 0;
    ln->u = carve(base, &c, R * d->D);
    ln->xbc = carve_bytes(base, &c, R * d->Cc, m2_act_bytes(m->act));
    ln->dt = m->inference ? carve(base, &c, R * d->H) : NULL;
    ln->A = m->inference ? carve(base, &c, (size_t)d->H) : NULL;
    ln->dA = carve(base, &c, (size_t)d->H);
    ln->o = carve(base, &c, R * d->Di);
    if (m->inference) return c; /* the rest is the backward's */
    ln->dzx = carve_bytes(base, &c, R * d->Win, m2_act_bytes(m->act));
    /* d(xBC); before the SSD's backward d(o) [rows,Di] and after the conv's d(u) [rows,D] (both in the activation
     * type; layer_backward) */
    ln->dxbc = carve(base, &c, R * (size_t)(d->Cc > d->D ? d->Cc : d->D));
    ln->ddt = carve(base, &c, R * d->H);
    ln->dy = carve_bytes(base, &c, R * d->Di, m2_act_bytes(m->act));
    return c;
}

/* Workspaces (and, when several lanes run, gradient buffers) for lanes [0, n). */
static int ensure_lanes(m2_model *m, int n)
{
    const m2_ops *ops = m->ops;
    for (int i = 0; i < n; i++) {
        lane *ln = &m->lanes[i];
        if (!ln->block) {
            ln->block = ops->alloc(ops, lane_layout(m, ln, NULL));
            if (!ln->block) return m2_fail(M2_EFAIL, "model (%s backend): out of memory for lane %d", ops->name, i);
            lane_layout(m, ln, ln->block);
            if (i + 1 > m->n_lanes) m->n_lanes = i + 1;
        }
        if (n > 1 && !ln->grads) {
            ln->grads = ops->alloc(ops, m->lay.n_params * sizeof(m2_real));
            if (!ln->grads)
                return m2_fail(M2_EFAIL, "model (%s backend): out of memory for lane %d's gradients", ops->name, i);
            ops->memset0(ops, ln->grads, m->lay.n_params * sizeof(m2_real));
        }
    }
    return M2_OK;
}

/* SSD scratch for units of this call (the backend's thread count may have grown since creation). */
static int ensure_scratch(m2_model *m, int n, const m2_ssd_shape *s)
{
    size_t need = m->ops->ssd_scratch_size(m->ops, s, !m->inference);
    for (int i = 0; i < n; i++) {
        lane *ln = &m->lanes[i];
        if (need <= ln->scratch_n) continue;
        m->ops->free(m->ops, ln->scratch);
        ln->scratch_n = 0;
        ln->scratch = m->ops->alloc(m->ops, need * sizeof(m2_real));
        if (!ln->scratch) return m2_fail(M2_EFAIL, "model (%s backend): out of memory for SSD scratch", m->ops->name);
        ln->scratch_n = need;
    }
    return M2_OK;
}

static int lanes_wanted(const m2_model *m)
{
    int n = m->ops->lanes ? m->ops->lanes(m->ops) : 1;
    return n < 1 ? 1 : n > MAX_LANES ? MAX_LANES : n;
}

static int create(m2_model **out, const m2_layout *lay, int max_B, int max_T, const m2_ops *ops, int inference)
{
    *out = NULL;
    if (max_B <= 0 || max_T <= 0)
        return m2_fail(M2_EUSAGE, "model (micro-batch %d x %d ticks): sizes must be positive", max_B, max_T);
    m2_model *m = calloc(1, sizeof *m);
    if (!m) return m2_fail(M2_EFAIL, "model: out of memory");
    m->lay = *lay;
    m->lay.tensors = NULL;
    m->lay.n_tensors = 0;
    m->ops = ops;
    m->max_B = max_B;
    m->max_T = max_T;
    m->inference = inference;
    m->act = ops->act_type ? ops->act_type(ops) : M2_ACT_REAL;
    m->per_seq = ops->lanes != NULL;
    m->max_units = m->per_seq ? max_B : 1;
    m->unit_rows = (size_t)(m->per_seq ? 1 : max_B) * max_T;
    m2_ssd_shape us = ssd_shape(m, m->per_seq ? 1 : max_B, max_T);
    m->saved_stride = (size_t)m->max_units * ops->ssd_saved_size(ops, &us);

    const m2_dims *d = &lay->d;
    const size_t M = (size_t)max_B * max_T, L = inference ? 1 : (size_t)d->L; /* layers whose activations stay */
    const size_t ab = m2_act_bytes(m->act);
    size_t c = 0;
    for (int pass = 0; pass < 2; pass++) { /* count, then lay out (bytes) */
        void *base = pass ? m->block : NULL;
        c = 0;
        m->h = carve(base, &c, (inference ? 1 : L + 1) * M * d->D); /* h_at */
        m->zx = carve_bytes(base, &c, L * M * d->Win, ab);
        m->y = carve_bytes(base, &c, L * M * d->Di, ab);
        m->dt = inference ? NULL : carve(base, &c, L * M * d->H);
        m->A = inference ? NULL : carve(base, &c, L * (size_t)m->max_units * d->H);
        m->saved = carve(base, &c, inference ? 0 : L * m->saved_stride);
        m->dh = carve(base, &c, M * d->D);
        m->dh_act = m->act != M2_ACT_REAL && !inference ? carve_bytes(base, &c, M * d->D, ab) : NULL;
        m->params_act = m->act != M2_ACT_REAL ? carve_bytes(base, &c, lay->n_params, ab) : NULL;
        m->pred = carve(base, &c, M * d->O);
        m->dpred = carve(base, &c, M * d->O);
        m->dX = carve(base, &c, M * d->F);
        if (!pass && !(m->block = ops->alloc(ops, c))) break;
    }
    m->unit_sse = calloc((size_t)m->max_units, sizeof *m->unit_sse);
    m->unit_count = calloc((size_t)m->max_units, sizeof *m->unit_count);
    int rc = !m->block || !m->unit_sse || !m->unit_count
                 ? m2_fail(M2_EFAIL, "model (micro-batch %d x %d ticks, %s backend): out of memory for activations",
                           max_B, max_T, ops->name)
                 : ensure_lanes(m, lanes_wanted(m) < m->max_units ? lanes_wanted(m) : m->max_units);
    if (!rc) rc = ensure_scratch(m, m->n_lanes, &us);
    if (rc) {
        m2_model_free(m);
        return rc;
    }
    *out = m;
    return M2_OK;
}

int m2_model_create_with_ops(m2_model **out, const m2_layout *lay, int max_B, int max_T, const m2_ops *ops)
{
    return create(out, lay, max_B, max_T, ops, 0);
}

int m2_model_create_inference(m2_model **out, const m2_layout *lay, int max_B, int max_T, const m2_ops *ops)
{
    return create(out, lay, max_B, max_T, ops, 1);
}

int m2_model_create(m2_model **out, const m2_layout *lay, int max_B, int max_T)
{
    return m2_model_create_with_ops(out, lay, max_B, max_T, m2_ops_cpu());
}

void m2_model_free(m2_model *m)
{
    if (!m) return;
    for (int i = 0; i < m->n_lanes; i++) {
        m->ops->free(m->ops, m->lanes[i].block);
        m->ops->free(m->ops, m->lanes[i].grads);
        m->ops->free(m->ops, m->lanes[i].scratch);
    }
    m->ops->free(m->ops, m->block);
    free(m->unit_sse);
    free(m->unit_count);
    free(m);
}

void m2_model_keep_input_grad(m2_model *m, int on) { m->keep_dX = on != 0; }
const m2_real *m2_model_input_grad(const m2_model *m) { return m->dX; }

size_t m2_model_activation_bytes_per_token(const m2_model *m)
{
    const m2_dims *d = &m->lay.d;
    m2_ssd_shape s = ssd_shape(m, 1, m->max_T);
    /* per sequence: the SSD's saved values and A (at most one per sequence) */
    const size_t per_seq = (m->ops->ssd_saved_size(m->ops, &s) + (size_t)d->H) * sizeof(m2_real);
    return (size_t)(d->D + d->H) * sizeof(m2_real) + (size_t)(d->Win + d->Di) * m2_act_bytes(m->act) +
           (per_seq + (size_t)m->max_T - 1) / (size_t)m->max_T;
}

/* ---- one call: checks, lanes, geometry ---- */
static int begin_call(m2_model *m, call *c, int *n_lanes)
{
    *n_lanes = 1;
    if (c->B <= 0 || c->T <= 0 || c->B > m->max_B || c->T > m->max_T)
        return m2_fail(M2_EUSAGE, "model (micro-batch %d x %d ticks): outside the %d x %d it was created for", c->B,
                       c->T, m->max_B, m->max_T);
    c->M = (size_t)c->B * c->T;
    c->n_units = m->per_seq ? c->B : 1;
    c->units_nb = m->per_seq ? 1 : c->B;
    m2_ssd_shape us = ssd_shape(m, c->units_nb, c->T);
    c->unit_saved = m->ops->ssd_saved_size(m->ops, &us);
    int n = m->per_seq ? lanes_wanted(m) : 1;
    if (n > c->n_units) n = c->n_units;
    int rc = ensure_lanes(m, n);
    if (!rc) rc = ensure_scratch(m, n, &us);
    *n_lanes = n;
    return rc;
}

/* ---- one layer's parameters (or gradients) ---- */
typedef struct {
    m2_real *norm_w, *W_in, *dt_bias, *conv_w, *conv_b, *A_log, *Dsk, *gnorm_w, *W_out;
} layer_ptrs;

static layer_ptrs layer_at(const m2_layout *lay, const m2_real *flat, int l)
{
    m2_real *b = (m2_real *)flat + m2_layer_base(lay, l);
    const m2_layer_offsets *o = &lay->layer;
    layer_ptrs p = {b + o->norm_w, b + o->W_in,  b + o->dt_bias, b + o->conv_w, b + o->conv_b,
                    b + o->A_log,  b + o->Dskip, b + o->gnorm_w, b + o->W_out};
    return p;
}

/* A unit's slices of the call's arrays. */
typedef struct {
    int index, nb;
    size_t r0, rows; /* first row, rows */
} unit;

static unit unit_at(const call *c, int u)
{
    unit un = {.index = u, .nb = c->units_nb, .r0 = (size_t)u * c->units_nb * c->T, .rows = (size_t)c->units_nb * c->T};
    return un;
}

/* Layer l's slot of the kept activations: its own for a backward, shared in inference (one h, which each layer's
 * out_proj updates in place: layer_forward). */
static m2_real *h_at(const m2_model *m, const call *c, const unit *un, int l)
{
    const size_t slot = m->inference ? 0 : (size_t)l;
    return m->h + (slot * c->M + un->r0) * m->lay.d.D;
}
static void *zx_at(const m2_model *m, const call *c, const unit *un, int l)
{
    return act_at(m, m->zx, ((m->inference ? 0 : (size_t)l) * c->M + un->r0) * m->lay.d.Win);
}
static void *y_at(const m2_model *m, const call *c, const unit *un, int l)
{
    return act_at(m, m->y, ((m->inference ? 0 : (size_t)l) * c->M + un->r0) * m->lay.d.Di);
}
/* Layer l's dt and A: kept per layer by a training model (for its backward), the lane's own in inference. */
static m2_real *dt_at(const m2_model *m, const lane *ln, const call *c, const unit *un, int l)
{
    return m->dt ? m->dt + ((size_t)l * c->M + un->r0) * m->lay.d.H : ln->dt;
}
static m2_real *A_at(const m2_model *m, const lane *ln, const unit *un, int l)
{
    return m->A ? m->A + ((size_t)l * m->max_units + (size_t)un->index) * m->lay.d.H : ln->A;
}
static m2_real *saved_at(const m2_model *m, const call *c, const unit *un, int l)
{
    return m->saved + (size_t)l * m->saved_stride + (size_t)un->index * c->unit_saved;
}

/* ---- the projections' GEMMs on operands in the activation type ---- */
/* The parameters rounded to the activation type once per call (one to_act over the flat buffer, before any unit). */
static void params_to_act(m2_model *m, const call *c)
{
    lane *ln = &m->lanes[0];
    ln->phase = 0;
    if (m->params_act) OP(M2_OPK_OTHER, m->ops->to_act(m->ops, c->params, m->lay.n_params, m->params_act, m->act));
}

/* The weight W (m2_real, in the call's parameters) as a GEMM operand in the activation type: W itself when that is
 * m2_real, else its rounded copy in params_act. */
static const void *weight_act(const m2_model *m, const call *c, const m2_real *W)
{
    return m->params_act ? act_at(m, m->params_act, (size_t)(W - c->params)) : (const void *)W;
}

/* C (type ct) = alpha op(A) op(B) + beta C (ops.h gemm) with A and B in the activation type: gemm when that is
 * m2_real (then ct is too), else gemm_act. */
static void gemm_act(m2_model *m, lane *ln, int ta, int tb, int M, int N, int K, const void *A, int lda, const void *B,
                     int ldb, m2_real beta, void *C, int ldc, m2_act_type ct)
{
    const m2_ops *ops = m->ops;
    if (m->act == M2_ACT_REAL)
        OP(M2_OPK_GEMM, ops->gemm(ops, ta, tb, M, N, K, 1, A, lda, B, ldb, beta, C, ldc));
    else
        OP(M2_OPK_GEMM, ops->gemm_act(ops, ta, tb, M, N, K, 1, A, lda, B, ldb, m->act, beta, C, ldc, ct));
}

/* ---- forward of one unit ---- */
/* out [R,n] (type ot) = in [R,k] W^T + beta out, W [n,k] m2_real: the forward's projections. */
static void forward_proj(m2_model *m, lane *ln, const call *c, int R, int n, int k, const void *in, const m2_real *W,
                         m2_real beta, void *out, m2_act_type ot)
{
    gemm_act(m, ln, 0, 1, R, n, k, in, k, weight_act(m, c, W), k, beta, out, n, ot);
}

static void layer_forward(m2_model *m, lane *ln, const call *c, const unit *un, int l)
{
    const m2_ops *ops = m->ops;
    const m2_dims *d = &m->lay.d;
    const int R = (int)un->rows, D = d->D, Di = d->Di, Cc = d->Cc, H = d->H, Win = d->Win, GN = d->G * d->N;
    m2_ssd_shape s = ssd_shape(m, un->nb, c->T);
    layer_ptrs p = layer_at(&m->lay, c->params, l);
    m2_real *hl = h_at(m, c, un, l), *hn = h_at(m, c, un, l + 1);
    void *zx = zx_at(m, c, un, l), *y = y_at(m, c, un, l);
    m2_real *dt = dt_at(m, ln, c, un, l), *A = A_at(m, ln, un, l);
    const m2_act_type at = m->act;

    /* h_{l+1}'s slot pre-filled with h_l for the out_proj below, by the norm that reads h_l anyway (ops.h
     * rmsnorm_fwd's x_copy); in inference the two are one slot, updated in place */
    OP(M2_OPK_NORM, ops->rmsnorm_fwd(ops, hl, hn != hl ? hn : NULL, p.norm_w, R, D, ln->u, at));
    /* one GEMM for z, xBC, dt_raw */
    forward_proj(m, ln, c, R, Win, D, ln->u, p.W_in, 0, zx, at);
    OP(M2_OPK_CONV,
       ops->conv_silu_fwd(ops, act_at(m, zx, Di), Win, at, p.conv_w, p.conv_b, un->nb, c->T, Cc, d->K, ln->xbc));
    OP(M2_OPK_DT, ops->dt_fwd(ops, act_at(m, zx, Di + Cc), Win, at, p.dt_bias, p.A_log, R, H, dt, A));
    OP(M2_OPK_SSD, ops->ssd_fwd(ops, &s, ln->xbc, dt, A, act_at(m, ln->xbc, Di), act_at(m, ln->xbc, Di + GN), p.Dsk, y,
                                at, c->keep ? saved_at(m, c, un, l) : NULL, ln->scratch));
    OP(M2_OPK_GNORM, ops->gated_norm_fwd(ops, y, zx, Win, at, p.gnorm_w, R, Di, d->G, ln->o, at));
    /* h_{l+1} = h_l + o W_out^T (the residual stream in m2_real): the GEMM adds its fp32 product onto h_l (beta = 1),
     * so no other pass over the residual stream makes the add */
    forward_proj(m, ln, c, R, D, Di, ln->o, p.W_out, 1, hn, M2_ACT_REAL);
}

/* embed, the layers, the head; ln->u keeps RMSNorm_f(h_L) for the head's backward. */
static void unit_forward(m2_model *m, lane *ln, const call *c, const unit *un)
{
    const m2_ops *ops = m->ops;
    const m2_layout *lay = &m->lay;
    const m2_dims *d = &lay->d;
    const int R = (int)un->rows, D = d->D;
    m2_real *h0 = h_at(m, c, un, 0), *pred = c->pred + un->r0 * d->O;
    ln->phase = 0;
    OP(M2_OPK_GEMM,
       ops->gemm(ops, 0, 1, R, D, d->F, 1, c->X + un->r0 * d->F, d->F, c->params + lay->embed_w, d->F, 0, h0, D));
    OP(M2_OPK_OTHER, ops->bias_add(ops, h0, D, c->params + lay->embed_b, R, D));
    for (int l = 0; l < d->L; l++) layer_forward(m, ln, c, un, l);
    OP(M2_OPK_NORM,
       ops->rmsnorm_fwd(ops, h_at(m, c, un, d->L), NULL, c->params + lay->normf_w, R, D, ln->u, M2_ACT_REAL));
    OP(M2_OPK_GEMM, ops->gemm(ops, 0, 1, R, d->O, D, 1, ln->u, D, c->params + lay->head_w, D, 0, pred, d->O));
    OP(M2_OPK_OTHER, ops->bias_add(ops, pred, d->O, c->params + lay->head_b, R, d->O));
}

/* ---- backward of one unit ---- */
static m2_real *grads_of(const call *c, lane *ln) { return c->lane_grads ? ln->grads : c->grads; }

/* The unit's rows of dh_act (NULL when the activation type is m2_real: the GEMMs read dh itself). */
static void *dh_act_at(const m2_model *m, const unit *un)
{
    return m->dh_act ? act_at(m, m->dh_act, un->r0 * m->lay.d.D) : NULL;
}

/* loss, head and norm_f: leaves d(loss)/d(h_L) in dh. */
static void unit_head_backward(m2_model *m, lane *ln, const call *c, const unit *un)
{
    const m2_ops *ops = m->ops;
    const m2_layout *lay = &m->lay;
    const m2_dims *d = &lay->d;
    const int R = (int)un->rows, D = d->D, O = d->O;
    m2_real *g = grads_of(c, ln), *dpred = m->dpred + un->r0 * O, *dh = m->dh + un->r0 * D;
    ln->phase = 1;
    OP(M2_OPK_LOSS, ops->mse_loss(ops, c->pred + un->r0 * O, c->Y + un->r0 * O, un->nb, c->T, O, c->burn_in, dpred,
                                  &m->unit_sse[un->index], &m->unit_count[un->index]));
    OP(M2_OPK_GEMM, ops->gemm(ops, 1, 0, O, D, R, 1, dpred, O, ln->u, D, 1, g + lay->head_w, D));
    OP(M2_OPK_OTHER, ops->bias_grad(ops, dpred, O, R, O, g + lay->head_b));
    OP(M2_OPK_GEMM, ops->gemm(ops, 0, 0, R, D, O, 1, dpred, O, c->params + lay->head_w, D, 0, ln->u, D));
    OP(M2_OPK_OTHER, ops->memset0(ops, dh, un->rows * D * sizeof(m2_real)));
    OP(M2_OPK_NORM, ops->rmsnorm_bwd(ops, ln->u, M2_ACT_REAL, h_at(m, c, un, d->L), c->params + lay->normf_w, R, D, dh,
                                     g + lay->normf_w, NULL, d->L > 0 ? dh_act_at(m, un) : NULL, m->act));
}

/* dh holds d(loss)/d(h_{l+1}) on entry and d(loss)/d(h_l) on exit. */
static void layer_backward(m2_model *m, lane *ln, const call *c, const unit *un, int l)
{
    const m2_ops *ops = m->ops;
    const m2_dims *d = &m->lay.d;
    const int R = (int)un->rows, D = d->D, Di = d->Di, Cc = d->Cc, H = d->H, Win = d->Win, GN = d->G * d->N;
    m2_ssd_shape s = ssd_shape(m, un->nb, c->T);
    layer_ptrs p = layer_at(&m->lay, c->params, l), g = layer_at(&m->lay, grads_of(c, ln), l);
    const m2_real *hl = h_at(m, c, un, l);
    const void *zx = zx_at(m, c, un, l), *y = y_at(m, c, un, l), *xbc_in = act_at(m, zx, Di);
    const void *dt_raw = act_at(m, zx, Di + Cc);
    const m2_real *dt = dt_at(m, ln, c, un, l), *A = A_at(m, ln, un, l); /* the forward's */
    const m2_act_type at = m->act;
    m2_real *dh = m->dh + un->r0 * D;
    void *dha = dh_act_at(m, un);
    const void *dh_op = dha ? dha : (const void *)dh; /* dh as a GEMM operand, in the activation type */
    ln->phase = 1;
    /* the layer's weight gradients that are column sums complete at the end of this function (ops.h grad_batch:
     * one final launch for all of them on the GPU) */
    if (ops->grad_batch) OP(M2_OPK_OTHER, ops->grad_batch(ops, 1));

    /* recompute the conv output (dt and A are kept); the two norms' outputs (in the activation type: GEMM operands)
     * come back from the norms' own backwards below, which read the same inputs anyway (one pass over them, not two) */
    OP(M2_OPK_CONV, ops->conv_silu_fwd(ops, xbc_in, Win, at, p.conv_w, p.conv_b, un->nb, c->T, Cc, d->K, ln->xbc));

    /* out_proj and the gated norm: d(o) = dh W_out (into dxbc, free until the SSD's backward), then the norm's
     * backward (dy, dz into dzx's z columns, d(norm weight)) writing o, then dW_out += dh^T o */
    gemm_act(m, ln, 0, 0, R, Di, D, dh_op, D, weight_act(m, c, p.W_out), Di, 0, ln->dxbc, Di, at);
    OP(M2_OPK_GNORM, ops->gated_norm_bwd(ops, ln->dxbc, y, zx, Win, at, p.gnorm_w, R, Di, d->G, ln->dy, ln->dzx, Win,
                                         g.gnorm_w, ln->o));
    gemm_act(m, ln, 1, 0, D, Di, R, dh_op, D, ln->o, Di, 1, g.W_out, Di, M2_ACT_REAL);
    /* SSD: dx, dB, dC into dxbc (in the activation type: the conv backward widens them); ddt; dA; dD straight into
     * the gradient buffer */
    OP(M2_OPK_SSD, ops->ssd_bwd(ops, &s, ln->xbc, dt, A, act_at(m, ln->xbc, Di), act_at(m, ln->xbc, Di + GN), p.Dsk,
                                ln->dy, at, saved_at(m, c, un, l), ln->dxbc, ln->ddt, ln->dA, act_at(m, ln->dxbc, Di),
                                act_at(m, ln->dxbc, Di + GN), g.Dsk, ln->scratch));
    OP(M2_OPK_DT, ops->dt_bwd(ops, ln->ddt, dt_raw, Win, at, p.dt_bias, ln->dA, p.A_log, R, H,
                              act_at(m, ln->dzx, Di + Cc), g.dt_bias, g.A_log));
    OP(M2_OPK_CONV, ops->conv_silu_bwd(ops, ln->dxbc, xbc_in, Win, at, p.conv_w, p.conv_b, un->nb, c->T, Cc, d->K,
                                       act_at(m, ln->dzx, Di), Win, g.conv_w, g.conv_b));
    /* in_proj and RMSNorm: d(u) = dzx W_in in the activation type (into dxbc, read by the conv's backward above; the
     * in_proj's input gradient, as upstream's bf16 autocast gives its fused norm backward), then the norm's backward
     * (its gradient joins the residual stream's in fp32; dh_act, for the layer below, is the sum) writing u, then
     * dW_in += dzx^T u */
    gemm_act(m, ln, 0, 0, R, D, Win, ln->dzx, Win, weight_act(m, c, p.W_in), D, 0, ln->dxbc, D, at);
    OP(M2_OPK_NORM,
       ops->rmsnorm_bwd(ops, ln->dxbc, at, hl, p.norm_w, R, D, dh, g.norm_w, ln->u, l > 0 ? dha : NULL, at));
    gemm_act(m, ln, 1, 0, Win, D, R, ln->dzx, Win, ln->u, D, 1, g.W_in, D, M2_ACT_REAL);
    if (ops->grad_batch) OP(M2_OPK_OTHER, ops->grad_batch(ops, 0));
}

static void unit_embed_backward(m2_model *m, lane *ln, const call *c, const unit *un)
{
    const m2_ops *ops = m->ops;
    const m2_layout *lay = &m->lay;
    const int R = (int)un->rows, D = lay->d.D, F = lay->d.F;
    m2_real *g = grads_of(c, ln), *dh = m->dh + un->r0 * D;
    const m2_real *X = c->X + un->r0 * F;
    OP(M2_OPK_GEMM, ops->gemm(ops, 1, 0, D, F, R, 1, dh, D, X, F, 1, g + lay->embed_w, F));
    OP(M2_OPK_OTHER, ops->bias_grad(ops, dh, D, R, D, g + lay->embed_b));
    if (m->keep_dX)
        OP(M2_OPK_GEMM, ops->gemm(ops, 0, 0, R, F, D, 1, dh, D, c->params + lay->embed_w, F, 0, m->dX + un->r0 * F, F));
}

/* Called by every thread of the team once every unit's part of bucket k is done: adds the lanes' sums into
 * the caller's buffer (each thread a slice, lanes in order) and announces the bucket from the master. */
static void finish_bucket(m2_model *m, const call *c, int k)
{
    const int nl = omp_get_num_threads();
    if (c->lane_grads) {
        size_t lo, hi;
        m2_layout_bucket(&m->lay, k, &lo, &hi);
        const size_t n = hi - lo, per = (n + (size_t)nl - 1) / nl, a = lo + per * omp_get_thread_num();
        const size_t b = a + per < hi ? a + per : hi;
        if (a < b)
            for (int i = 0; i < nl; i++) {
                m->ops->add(m->ops, c->grads + a, m->lanes[i].grads + a, b - a);
                m->ops->memset0(m->ops, m->lanes[i].grads + a, (b - a) * sizeof(m2_real));
            }
#pragma omp barrier
    }
#pragma omp master
    {
        if (c->on_ready) c->on_ready(k, c->user);
    }
}

/* ---- the API ---- */
int m2_model_forward(m2_model *m, const m2_real *params, const m2_real *X, int B, int T, m2_real *pred)
{
    call c = {.params = params, .X = X, .pred = pred, .B = B, .T = T};
    int nl, rc = begin_call(m, &c, &nl);
    if (rc) return rc;
    params_to_act(m, &c);
#pragma omp parallel num_threads(nl) if (nl > 1)
    {
        lane *ln = &m->lanes[omp_get_thread_num()];
#pragma omp for schedule(static)
        for (int u = 0; u < c.n_units; u++) {
            unit un = unit_at(&c, u);
            unit_forward(m, ln, &c, &un);
        }
    }
    return M2_OK;
}

int m2_model_forward_backward(m2_model *m, const m2_real *params, m2_real *grads, const m2_real *X, const m2_real *Y,
                              int B, int T, int burn_in, double *sse, int64_t *count, m2_real *pred,
                              m2_bucket_ready_fn on_ready, void *user)
{
    if (m->inference)
        return m2_fail(M2_EUSAGE, "model: made for inference (m2_model_create_inference), it has no backward");
    call c = {.params = params,
              .X = X,
              .Y = Y,
              .grads = grads,
              .pred = pred ? pred : m->pred,
              .B = B,
              .T = T,
              .burn_in = burn_in,
              .on_ready = on_ready,
              .user = user};
    int nl, rc = begin_call(m, &c, &nl);
    if (rc) return rc;
    params_to_act(m, &c);
    const int L = m->lay.d.L;
    c.keep = 1;
#pragma omp parallel num_threads(nl) if (nl > 1)
    {
        lane *ln = &m->lanes[omp_get_thread_num()];
#pragma omp single
        c.lane_grads = omp_get_num_threads() > 1; /* the team we got (at most nl, lanes ready for all) */
#pragma omp for schedule(static)
        for (int u = 0; u < c.n_units; u++) {
            unit un = unit_at(&c, u);
            unit_forward(m, ln, &c, &un);
            unit_head_backward(m, ln, &c, &un);
        }
        finish_bucket(m, &c, 0);
        for (int l = L - 1; l >= 0; l--) {
#pragma omp for schedule(static)
            for (int u = 0; u < c.n_units; u++) {
                unit un = unit_at(&c, u);
                layer_backward(m, ln, &c, &un, l);
            }
            finish_bucket(m, &c, L - l);
        }
#pragma omp for schedule(static)
        for (int u = 0; u < c.n_units; u++) {
            unit un = unit_at(&c, u);
            unit_embed_backward(m, ln, &c, &un);
        }
        finish_bucket(m, &c, L + 1);
    }
    /* the loss, summed over units in order */
    *sse = 0;
    *count = 0;
    for (int u = 0; u < c.n_units; u++) {
        *sse += m->unit_sse[u];
        *count += m->unit_count[u];
    }
    return M2_OK;
}
