/* CPU ops: the causal depthwise conv1d + SiLU over the x, B, C channels (docs/MODEL.md §2 step 3) and
 * dt = softplus(dt_raw + dt_bias) (§2.3), forward and backward. */
#include "core/ops_cpu.h"

#include <stdlib.h>
#include <string.h>

/* The weights transposed to [K][C], so the inner loops run over contiguous channels. */
static m2_real *transpose_w(const m2_real *w, int C, int K)
{
    m2_real *wT = m2_cpu_xmalloc((size_t)K * C * sizeof *wT);
    for (int c = 0; c < C; c++)
        for (int k = 0; k < K; k++) wT[(size_t)k * C + c] = w[(size_t)c * K + k];
    return wT;
}

/* Pre-activation of row t of sequence `seq`: a[c] = b[c] + sum_k w[c,k] in[t-K+1+k, c] (zero before t=0).
 * The usual K = 4 past the first ticks takes one pass over the channels instead of one per tap (the same sums in
 * the same order: b, then the taps oldest first). */
static inline void conv_row(const m2_real *seq, int ld_in, const m2_real *wT, const m2_real *b, int t, int C, int K,
                            m2_real *restrict a)
{
    if (K == 4 && t >= 3) {
        const m2_real *restrict i0 = seq + (size_t)(t - 3) * ld_in, *restrict i1 = i0 + ld_in,
                                *restrict i2 = i1 + ld_in, *restrict i3 = i2 + ld_in;
        const m2_real *restrict w0 = wT, *restrict w1 = wT + C, *restrict w2 = w1 + C, *restrict w3 = w2 + C;
        for (int c = 0; c < C; c++) a[c] = b[c] + w0[c] * i0[c] + w1[c] * i1[c] + w2[c] * i2[c] + w3[c] * i3[c];
        return;
    }
    memcpy(a, b, (size_t)C * sizeof *a);
    for (int k = 0; k < K; k++) {
        int ts = t - K + 1 + k;
        if (ts < 0) continue;
        const m2_real *irow = seq + (size_t)ts * ld_in, *wk = wT + (size_t)k * C;
        for (int c = 0; c < C; c++) a[c] += wk[c] * irow[c];
    }
}

void m2_cpu_conv_silu_fwd(const m2_ops *o, const m2_real *in, int ld_in, const m2_real *w, const m2_real *b, int B,
                          int T, int C, int K, m2_real *out)
{
    m2_real *wT = transpose_w(w, C, K);
    const int rows = B * T;
#pragma omp parallel for schedule(static)
    for (int r = 0; r < rows; r++) {
        m2_real *a = out + (size_t)r * C;
        conv_row(in + (size_t)(r / T) * T * ld_in, ld_in, wT, b, r % T, C, K, a);
        for (int c = 0; c < C; c++) a[c] *= m2_sigmoid(a[c]);
    }
    free(wT);
}

/* One input tick t of the backward with K = 4 and every tap inside the block, in one pass over the channels (the
 * general loop below takes one per tap; the same sums in the same order): d = d(pre-activation) of ticks t..t+3,
 * in = input ticks t-3..t. din[t] = sum_k w_k d[t+3-k]; the weight partials pw [K][C] and then the bias's [C] get
 * d[t] times input tick t-3+k, and d[t]. */
static void conv4_bwd_row(const m2_real *d, const m2_real *in, int ld_in, const m2_real *wT, int C,
                          m2_real *restrict dir, m2_real *restrict pw)
{
    const m2_real *restrict d0 = d, *restrict d1 = d + C, *restrict d2 = d1 + C, *restrict d3 = d2 + C;
    const m2_real *restrict i0 = in, *restrict i1 = i0 + ld_in, *restrict i2 = i1 + ld_in, *restrict i3 = i2 + ld_in;
    const m2_real *restrict w0 = wT, *restrict w1 = wT + C, *restrict w2 = w1 + C, *restrict w3 = w2 + C;
    m2_real *restrict p0 = pw, *restrict p1 = pw + C, *restrict p2 = p1 + C, *restrict p3 = p2 + C,
                      *restrict pb = p3 + C;
    for (int c = 0; c < C; c++) {
        dir[c] = w0[c] * d3[c] + w1[c] * d2[c] + w2[c] * d1[c] + w3[c] * d0[c];
        p0[c] += d0[c] * i0[c];
        p1[c] += d0[c] * i1[c];
        p2[c] += d0[c] * i2[c];
        p3[c] += d0[c] * i3[c];
        pb[c] += d0[c];
    }
}

/* d(pre-activation) of tick t into d: the pre-activation recomputed, times SiLU's derivative, times dout. */
static inline void dpre_row(const m2_real *seq, int ld_in, const m2_real *wT, const m2_real *b, const m2_real *dor,
                            int t, int C, int K, m2_real *restrict d)
{
    conv_row(seq, ld_in, wT, b, t, C, K, d);
    for (int c = 0; c < C; c++) {
        m2_real a = d[c], s = m2_sigmoid(a);
        d[c] = dor[c] * s * ((m2_real)1 + a * ((m2_real)1 - s));
    }
}

/* The input gradient of tick t and its weight/bias partials from the d(pre-activation) rows in dpre (row i is
 * tick t0 + i, ticks before te); K = 4 inside the block takes conv4_bwd_row. */
static void din_row(const m2_real *dpre, const m2_real *seq, int ld_in, const m2_real *wT, int t, int t0, int te, int C,
                    int K, m2_real *restrict dir, m2_real *restrict pw)
{
    if (K == 4 && t >= 3 && t + 3 < te) {
        conv4_bwd_row(dpre + (size_t)(t - t0) * C, seq + (size_t)(t - 3) * ld_in, ld_in, wT, C, dir, pw);
        return;
    }
    const m2_real *dt_ = dpre + (size_t)(t - t0) * C;
    m2_real *pb = pw + (size_t)K * C;
    memset(dir, 0, (size_t)C * sizeof *dir);
    for (int k = 0; k < K; k++) {
        int tf = t + K - 1 - k; /* the output tick that saw input t through tap k */
        if (tf < te) {
            const m2_real *df = dpre + (size_t)(tf - t0) * C, *wk = wT + (size_t)k * C;
            for (int c = 0; c < C; c++) dir[c] += wk[c] * df[c];
        }
        int ts = t - K + 1 + k; /* the input tick tap k of output t saw */
        if (ts >= 0) {
            const m2_real *irow = seq + (size_t)ts * ld_in;
            m2_real *pk = pw + (size_t)k * C;
            for (int c = 0; c < C; c++) pk[c] += dt_[c] * irow[c];
        }
    }
    for (int c = 0; c < C; c++) pb[c] += dt_[c];
}

/* Work is cut into blocks of M2_CPU_ROW_BLOCK ticks of one sequence. A block needs d(pre-activation) of its
 * ticks and of the K-1 ticks after it (din[t] gathers from t..t+K-1), so it recomputes those few rows rather
 * than sharing them; its weight and bias gradients go to its own partial sums ([K][C] then [C]). Input tick t is
 * done as soon as d(pre-activation) of tick t+K-1 is, so the rows it reads (d of t..t+K-1, the inputs t-K+1..t)
 * were touched a few rows before and are still in L1: one sweep over the block instead of two (the same sums in
 * the same order). */
void m2_cpu_conv_silu_bwd(const m2_ops *o, const m2_real *dout, const m2_real *in, int ld_in, const m2_real *w,
                          const m2_real *b, int B, int T, int C, int K, m2_real *din, int ld_din, m2_real *dw,
                          m2_real *db)
{
    const int TB = M2_CPU_ROW_BLOCK;
    const int nTB = (T + TB - 1) / TB;
    const size_t nblk = (size_t)B * nTB, npart = (size_t)(K + 1) * C;
    m2_real *wT = transpose_w(w, C, K);
    m2_real *part = m2_cpu_partials(nblk, npart);
#pragma omp parallel
    {
        m2_real *dpre = m2_cpu_xmalloc((size_t)(TB + K - 1) * C * sizeof *dpre);
#pragma omp for schedule(static)
        for (size_t blk = 0; blk < nblk; blk++) {
            const int bb = (int)(blk / nTB), t0 = (int)(blk % nTB) * TB;
            const int t1 = t0 + TB < T ? t0 + TB : T, te = t1 + K - 1 < T ? t1 + K - 1 : T;
            const m2_real *seq = in + (size_t)bb * T * ld_in;
            const m2_real *dseq = dout + (size_t)bb * T * C;
            m2_real *pw = part + blk * npart, *dseq_in = din + (size_t)bb * T * ld_din;
            int next = t0; /* the next input tick to finish */
            for (int t = t0; t < te; t++) {
                dpre_row(seq, ld_in, wT, b, dseq + (size_t)t * C, t, C, K, dpre + (size_t)(t - t0) * C);
                for (; next < t1 && next + K - 1 <= t; next++)
                    din_row(dpre, seq, ld_in, wT, next, t0, te, C, K, dseq_in + (size_t)next * ld_din, pw);
            }
            for (; next < t1; next++) /* the last ticks of the sequence: fewer than K outputs saw them */
                din_row(dpre, seq, ld_in, wT, next, t0, te, C, K, dseq_in + (size_t)next * ld_din, pw);
        }
        free(dpre);
    }
    m2_real *sum = m2_cpu_partials(1, npart);
    m2_cpu_partials_reduce(part, nblk, npart, sum);
    for (int c = 0; c < C; c++) {
        for (int k = 0; k < K; k++) dw[(size_t)c * K + k] += sum[(size_t)k * C + c];
        db[c] += sum[(size_t)K * C + c];
    }
    free(sum);
    free(wT);
}

/* base/vmath.h's softplus in the product (shared with the streaming engine); libm in the fp64 test build. */
static inline m2_real softplus(m2_real v)
{
#ifdef MAMBA2_FP64
    return v > (m2_real)M2_SOFTPLUS_THRESHOLD ? v : M2_LOG1P(M2_EXP(v));
#else
    return m2_softplusf(v);
#endif
}

void m2_cpu_dt_fwd(const m2_ops *o, const m2_real *dt_raw, int ld, const m2_real *dt_bias, int rows, int H, m2_real *dt)
{
#pragma omp parallel for schedule(static)
    for (int r = 0; r < rows; r++)
        for (int h = 0; h < H; h++) dt[(size_t)r * H + h] = softplus(dt_raw[(size_t)r * ld + h] + dt_bias[h]);
}

void m2_cpu_dt_bwd(const m2_ops *o, const m2_real *ddt, const m2_real *dt_raw, int ld, const m2_real *dt_bias, int rows,
                   int H, m2_real *ddt_raw, m2_real *ddt_bias)
{
    size_t nblk = ((size_t)rows + M2_CPU_ROW_BLOCK - 1) / M2_CPU_ROW_BLOCK;
    m2_real *part = m2_cpu_partials(nblk, (size_t)H);
#pragma omp parallel for schedule(static)
    for (size_t blk = 0; blk < nblk; blk++) {
        size_t r1 = (blk + 1) * M2_CPU_ROW_BLOCK < (size_t)rows ? (blk + 1) * M2_CPU_ROW_BLOCK : (size_t)rows;
        for (size_t r = blk * M2_CPU_ROW_BLOCK; r < r1; r++)
            for (int h = 0; h < H; h++) {
                m2_real v = dt_raw[r * ld + h] + dt_bias[h];
                /* softplus'(v) = sigmoid(v); exactly 1 where softplus is the identity */
                m2_real g = ddt[r * H + h] * (v > (m2_real)M2_SOFTPLUS_THRESHOLD ? (m2_real)1 : m2_sigmoid(v));
                ddt_raw[r * ld + h] = g;
                part[blk * H + h] += g;
            }
    }
    m2_cpu_partials_reduce(part, nblk, (size_t)H, ddt_bias);
}
