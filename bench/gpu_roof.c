/* The three-roof model (gpu_roof.h). */
#include "gpu_roof.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"

/* Published figures, SXM parts: H100 (HBM3 3.35 TB/s), H200 (HBM3e 4.8 TB/s); both 132 SMs at a 1.98 GHz boost
 * clock, dense (no sparsity) tensor peaks bf16 989.4 TFLOP/s and tf32 494.7 TFLOP/s, fp32 66.9 TFLOP/s on CUDA
 * cores. Issue: 4 warp schedulers per SM, one instruction each per clock. Launch: ~3 us per kernel back to back on
 * one stream without graphs (the usual measured range is 2-5 us). */
static const m2_gpu_roof g_roofs[] = {
    {"H100 SXM", 3.35e12, 989.4e12, 494.7e12, 66.9e12, 132, 1.98e9, 4, 3e-6},
    {"H200", 4.8e12, 989.4e12, 494.7e12, 66.9e12, 132, 1.98e9, 4, 3e-6},
};

const m2_gpu_roof *m2_gpu_roofs(int *n)
{
    *n = (int)(sizeof g_roofs / sizeof g_roofs[0]);
    return g_roofs;
}

int m2_sass_load(m2_sass_table *t, const char *path)
{
    memset(t, 0, sizeof *t);
    FILE *f = fopen(path, "r");
    if (!f) return m2_fail(M2_EFAIL, "SASS table (%s): cannot open (tools/sass_report.py writes it)", path);
    char line[1024];
    int cap = 0;
    if (!fgets(line, sizeof line, f)) line[0] = 0; /* header */
    while (fgets(line, sizeof line, f)) {
        m2_sass_row r;
        char object[128], per[32];
        double loop_hmma;
        if (sscanf(line, "%95s %7s %127s %lf %lf %lf %lf %lf %31s %lf %lf %lf", r.key, r.prec, object, &r.instrs,
                   &r.gmem, &r.loop, &r.loop_gmem, &loop_hmma, per, &r.regs, &r.smem, &r.blocks_per_sm) != 12)
            continue;
        r.per_hmma = strcmp(per, "-") ? atof(per) : 0;
        if (t->n == cap) {
            cap = cap ? 2 * cap : 64;
            m2_sass_row *nr = realloc(t->rows, (size_t)cap * sizeof *nr);
            if (!nr) {
                fclose(f);
                m2_sass_free(t);
                return m2_fail(M2_EFAIL, "SASS table (%s): out of memory", path);
            }
            t->rows = nr;
        }
        t->rows[t->n++] = r;
    }
    fclose(f);
    return M2_OK;
}

void m2_sass_free(m2_sass_table *t)
{
    free(t->rows);
    memset(t, 0, sizeof *t);
}

const m2_sass_row *m2_sass_find(const m2_sass_table *t, const char *key, const char *prec)
{
    for (int i = 0; i < t->n; i++)
        if (!strcmp(t->rows[i].key, key) && (!strcmp(t->rows[i].prec, prec) || !strcmp(t->rows[i].prec, "-")))
            return &t->rows[i];
    const size_t base = strcspn(key, "<");
    for (int i = 0; i < t->n; i++)
        if (strcspn(t->rows[i].key, "<") == base && !strncmp(t->rows[i].key, key, base)) return &t->rows[i];
    return NULL;
}

m2_roof_time m2_roof_predict(const m2_gpu_roof *g, const m2emu_kernel_count *c, const m2_sass_row *sass)
{
    m2_roof_time r;
    memset(&r, 0, sizeof r);
    /* compulsory traffic: every distinct byte once (an upper bound on what caches can save) */
    r.t_mem = (c->read_distinct + c->write_distinct) / g->hbm_bytes_s;
    r.t_tensor = c->flops_bf16 / g->bf16_flops_s + c->flops_tf32 / g->tf32_flops_s +
                 c->flops_fp32_cuda / g->fp32_flops_s;
    /* HMMA.16816 (bf16) does 16x8x16 fma, HMMA.1684 (tf32) 16x8x4 */
    r.hmma = c->flops_bf16 / 4096 + c->flops_tf32 / 1024;
    if (sass && r.hmma > 0 && sass->per_hmma > 0) {
        /* tensor-core kernels: HMMA x the main loop's instructions per HMMA */
        r.issued = r.hmma * sass->per_hmma;
    } else if (sass) {
        /* the others: the threads' global accesses (per lane, so /32 warp instructions) times the instructions
         * per global-memory instruction of the main loop (of the whole kernel when its loop has none) */
        const double per = sass->loop_gmem > 0 ? sass->loop / sass->loop_gmem
                           : sass->gmem > 0    ? sass->instrs / sass->gmem
                                               : 0;
        r.issued = c->accesses / 32 * per;
    }
    r.t_issue = r.issued / (g->sms * g->issue_per_clk * g->clock_hz);
    r.t_launch = c->launches * g->launch_s;
    double roof = r.t_mem;
    r.bound = "memory";
    if (r.t_tensor > roof) roof = r.t_tensor, r.bound = "tensor";
    if (r.t_issue > roof) roof = r.t_issue, r.bound = "issue";
    if (r.t_launch > roof) r.bound = "launch";
    r.total = roof + r.t_launch;
    return r;
}
