/* CPU ops: RMSNorm and the grouped gated RMSNorm (docs/MODEL.md §2, §2.5), forward and backward.
 *
 * Both backward passes use, for a segment v of n values normalised as out = v * r * w with
 * r = rsqrt(mean(v^2) + eps):
 *   dv = r * (w * dout) - v * r^3 / n * sum(w * dout * v),     dw += dout * v * r.
 * In the gated norm a segment is one group of Di/G channels, so n there is the GROUP size (upstream's
 * rmsnorm backward divides by the full width when G > 1, a known bug that docs/MODEL.md asks us not to copy). */
#include "core/ops_cpu.h"

#include <stdlib.h>

/* The segments' sums go through NPART partial sums, element-wise, so that GCC vectorises them without
 * -ffast-math (one running sum is a chain of n dependent additions: it made the norms a sixth of the training
 * step at AVX2, BENCHMARKS.md "One portable binary"). The order is fixed, so results stay deterministic. */
enum { NPART = 16 };

static inline m2_real sum_parts(const m2_real *part)
{
    m2_real s = 0;
    for (int i = 0; i < NPART; i++) s += part[i];
    return s;
}

/* sum v^2 and (when a is not NULL) sum a v over one segment */
static inline void seg_sums(const m2_real *restrict v, const m2_real *restrict a, int n, m2_real *ss, m2_real *sa)
{
    m2_real p2[NPART] = {0}, pa[NPART] = {0};
    int j = 0;
    for (; j + NPART <= n; j += NPART)
        for (int i = 0; i < NPART; i++) {
            p2[i] += v[j + i] * v[j + i];
            if (a) pa[i] += a[j + i] * v[j + i];
        }
    for (int i = 0; j + i < n; i++) {
        p2[i] += v[j + i] * v[j + i];
        if (a) pa[i] += a[j + i] * v[j + i];
    }
    *ss = sum_parts(p2);
    *sa = sum_parts(pa);
}

static inline m2_real seg_rstd(const m2_real *v, int n)
{
    m2_real ss, unused;
    seg_sums(v, NULL, n, &ss, &unused);
    return (m2_real)1 / M2_SQRT(ss / (m2_real)n + (m2_real)M2_NORM_EPS);
}

/* dv (overwritten; it holds w * dout for the sums first) and dw partial (ADDS) of one segment; out (NULL: not
 * wanted) the forward's v * r * w, the same expression from the same sum of squares as seg_rstd's (bitwise equal). */
static inline void seg_bwd(const m2_real *dout, const m2_real *v, const m2_real *w, int n, m2_real *dv,
                           m2_real *dw_part, m2_real *out)
{
    m2_real ss, s;
    for (int j = 0; j < n; j++) dv[j] = w[j] * dout[j];
    seg_sums(v, dv, n, &ss, &s);
    const m2_real r = (m2_real)1 / M2_SQRT(ss / (m2_real)n + (m2_real)M2_NORM_EPS);
    const m2_real c = r * r * r * s / (m2_real)n;
    for (int j = 0; j < n; j++) {
        dv[j] = r * w[j] * dout[j] - c * v[j];
        dw_part[j] += dout[j] * v[j] * r;
    }
    if (out)
        for (int j = 0; j < n; j++) out[j] = v[j] * r * w[j];
}

static size_t n_blocks(int rows) { return ((size_t)rows + M2_CPU_ROW_BLOCK - 1) / M2_CPU_ROW_BLOCK; }
static int block_end(size_t blk, int rows)
{
    size_t e = (blk + 1) * M2_CPU_ROW_BLOCK;
    return e < (size_t)rows ? (int)e : rows;
}

void m2_cpu_rmsnorm_fwd(const m2_ops *o, const m2_real *x, const m2_real *w, int rows, int n, m2_real *y)
{
#pragma omp parallel for schedule(static)
    for (int r = 0; r < rows; r++) {
        const m2_real *xr = x + (size_t)r * n;
        m2_real *yr = y + (size_t)r * n;
        m2_real rs = seg_rstd(xr, n);
        for (int j = 0; j < n; j++) yr[j] = xr[j] * rs * w[j];
    }
}

void m2_cpu_rmsnorm_bwd(const m2_ops *o, const m2_real *dy, const m2_real *x, const m2_real *w, int rows, int n,
                        m2_real *dx, m2_real *dw, m2_real *y)
{
    size_t nblk = n_blocks(rows);
    m2_real *part = m2_cpu_partials(nblk, (size_t)n);
#pragma omp parallel
    {
        m2_real *dv = m2_cpu_xmalloc((size_t)n * sizeof *dv);
#pragma omp for schedule(static)
        for (size_t blk = 0; blk < nblk; blk++) {
            for (int r = (int)(blk * M2_CPU_ROW_BLOCK); r < block_end(blk, rows); r++) {
                seg_bwd(dy + (size_t)r * n, x + (size_t)r * n, w, n, dv, part + blk * (size_t)n,
                        y ? y + (size_t)r * n : NULL);
                m2_real *dxr = dx + (size_t)r * n;
                for (int j = 0; j < n; j++) dxr[j] += dv[j];
            }
        }
        free(dv);
    }
    m2_cpu_partials_reduce(part, nblk, (size_t)n, dw);
}

/* v = y * silu(z) for one row. */
static inline void gate_row(const m2_real *y, const m2_real *z, int n, m2_real *v)
{
    for (int j = 0; j < n; j++) v[j] = y[j] * z[j] * m2_sigmoid(z[j]);
}

void m2_cpu_gated_norm_fwd(const m2_ops *o, const m2_real *y, const m2_real *z, int ld_z, const m2_real *w, int rows,
                           int n, int G, m2_real *out)
{
    const int ng = n / G;
#pragma omp parallel for schedule(static)
    for (int r = 0; r < rows; r++) {
        m2_real *v = out + (size_t)r * n; /* gate in place, then normalise */
        gate_row(y + (size_t)r * n, z + (size_t)r * ld_z, n, v);
        for (int g = 0; g < G; g++) {
            m2_real *vg = v + g * ng;
            m2_real rs = seg_rstd(vg, ng);
            for (int j = 0; j < ng; j++) vg[j] *= rs * w[g * ng + j];
        }
    }
}

void m2_cpu_gated_norm_bwd(const m2_ops *o, const m2_real *dout, const m2_real *y, const m2_real *z, int ld_z,
                           const m2_real *w, int rows, int n, int G, m2_real *dy, m2_real *dz, int ld_dz, m2_real *dw)
{
    const int ng = n / G;
    size_t nblk = n_blocks(rows);
    m2_real *part = m2_cpu_partials(nblk, (size_t)n);
#pragma omp parallel
    {
        /* per row: sigmoid(z) (computed once, used for v and for both gradients), v, dv */
        m2_real *sg = m2_cpu_xmalloc((size_t)3 * n * sizeof *sg), *v = sg + n, *dv = v + n;
#pragma omp for schedule(static)
        for (size_t blk = 0; blk < nblk; blk++) {
            for (int r = (int)(blk * M2_CPU_ROW_BLOCK); r < block_end(blk, rows); r++) {
                const m2_real *yr = y + (size_t)r * n, *zr = z + (size_t)r * ld_z, *dor = dout + (size_t)r * n;
                for (int j = 0; j < n; j++) {
                    sg[j] = m2_sigmoid(zr[j]);
                    v[j] = yr[j] * zr[j] * sg[j];
                }
                for (int g = 0; g < G; g++)
                    seg_bwd(dor + g * ng, v + g * ng, w + g * ng, ng, dv + g * ng, part + blk * (size_t)n + g * ng,
                            NULL);
                m2_real *dyr = dy + (size_t)r * n, *dzr = dz + (size_t)r * ld_dz;
                for (int j = 0; j < n; j++) {
                    dyr[j] = dv[j] * zr[j] * sg[j];
                    /* d silu(z)/dz = s (1 + z (1 - s)) */
                    dzr[j] = dv[j] * yr[j] * sg[j] * ((m2_real)1 + zr[j] * ((m2_real)1 - sg[j]));
                }
            }
        }
        free(sg);
    }
    m2_cpu_partials_reduce(part, nblk, (size_t)n, dw);
}
