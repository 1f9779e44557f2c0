/* CPU ops: the training loss of docs/MODEL.md §4 before normalisation (sum of squared errors and its count). */
#include "core/ops_cpu.h"

#include <math.h>
#include <stdlib.h>

/* Per sequence in double, then summed in sequence order: the same figure for every thread count. */
void m2_cpu_mse_loss(const m2_ops *o, const m2_real *pred, const m2_real *Y, int B, int T, int O, int burn_in,
                     m2_real *dpred, double *sse, int64_t *count)
{
    double *part = m2_cpu_xmalloc((size_t)B * sizeof *part);
    int64_t *cnt = m2_cpu_xmalloc((size_t)B * sizeof *cnt);
#pragma omp parallel for schedule(static)
    for (int b = 0; b < B; b++) {
        double s = 0;
        int64_t c = 0;
        for (int t = 0; t < T; t++) {
            size_t base = ((size_t)b * T + t) * O;
            for (int j = 0; j < O; j++) {
                m2_real y = Y[base + j];
                /* Masked terms get an exact zero gradient, whatever pred holds. */
                if (t < burn_in || !isfinite(y)) {
                    dpred[base + j] = 0;
                    continue;
                }
                m2_real e = pred[base + j] - y;
                dpred[base + j] = 2 * e;
                s += (double)e * (double)e;
                c++;
            }
        }
        part[b] = s;
        cnt[b] = c;
    }
    double s = 0;
    int64_t c = 0;
    for (int b = 0; b < B; b++) {
        s += part[b];
        c += cnt[b];
    }
    *sse = s;
    *count = c;
    free(part);
    free(cnt);
}
