/* The backend choice (run/backend.h) with a fake device API whose GPU count the test sets: model.device auto, cpu
 * and cuda; the device index = local rank; errors with one clear message and the right code; dist.backend on each
 * side; the description line; MFU's peak from the device name; model.precision handed to the device (and refused
 * there when unknown), not looked at on the CPU. One process, groups described by hand (model.device
 * auto with one rank makes no collective call). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "run/backend.h"
#include "base/error.h"
#include "core/blas_core.h"
#include "core/flops.h"
#include "core/ops.h"

static int g_count = 1, g_init_device = -99, g_init_rc = M2_OK;
static const char *g_name = "NVIDIA H100 80GB HBM3";

static int available(char *why, size_t cap)
{
    if (g_count == 0) snprintf(why, cap, "fake: no driver");
    return g_count;
}
static int init(int device)
{
    g_init_device = device;
    return g_init_rc ? m2_fail(g_init_rc, "fake init failed") : M2_OK;
}
static const m2_ops *ops(void) { return m2_ops_cpu(); }
static void device_name(char *buf, size_t cap) { snprintf(buf, cap, "%s", g_name); }
static int comm_create(m2_dcomm **out, const m2_dist *pg, double timeout_s)
{
    return m2_dcomm_mpi_create(out, pg, ops());
}

static char g_precision[8];
static int set_precision(const char *name)
{
    if (strcmp(name, "bf16") && strcmp(name, "tf32") && strcmp(name, "fp32"))
        return m2_fail(M2_EUSAGE, "fake: unknown precision %s", name);
    snprintf(g_precision, sizeof g_precision, "%s", name);
    return M2_OK;
}

static int g_keep_states = -1;
static void keep_ssd_states(int keep) { g_keep_states = keep; }

static const m2_device_api api = {.name = "fakecuda",
                                  .available = available,
                                  .init = init,
                                  .ops = ops,
                                  .device_name = device_name,
                                  .set_precision = set_precision,
                                  .keep_ssd_states = keep_ssd_states,
                                  .comm_create = comm_create};
static const m2_device_api api_no_nccl = {.name = "fakecuda",
                                          .available = available,
                                          .init = init,
                                          .ops = ops,
                                          .device_name = device_name,
                                          .set_precision = set_precision};

static m2_config cfg_with(const char *device, const char *backend)
{
    m2_config c;
    m2_config_defaults(&c);
    snprintf(c.model.device, sizeof c.model.device, "%s", device);
    snprintf(c.dist.backend, sizeof c.dist.backend, "%s", backend);
    return c;
}

static m2_dist group(int local_rank)
{
    m2_dist pg;
    memset(&pg, 0, sizeof pg);
    pg.world = pg.local_size = 1;
    pg.local_rank = local_rank;
    pg.device = 7; /* must be overwritten */
    snprintf(pg.host, sizeof pg.host, "node1");
    return pg;
}

static void reset(void)
{
    g_count = 1;
    g_init_device = -99;
    g_init_rc = M2_OK;
    g_keep_states = -1;
    g_name = "NVIDIA H100 80GB HBM3";
}

static void test_auto(void **state)
{
    reset();
    m2_backend be;
    m2_dist pg = group(0);
    m2_config c = cfg_with("auto", "auto");
    assert_int_equal(m2_backend_choose(&be, &c, &pg, &api), M2_OK);
    assert_ptr_equal(be.api, &api);
    assert_int_equal(be.device, 0);
    assert_int_equal(pg.device, 0);
    assert_int_equal(g_init_device, 0);
    assert_string_equal(be.dist, "nccl");
    assert_true(be.peak_flops == 989e12);
    char line[512];
    m2_backend_describe(&be, line, sizeof line);
    assert_string_equal(line, "backend: fakecuda (NVIDIA H100 80GB HBM3, device = local rank, bf16 peak 989 TFLOP/s, "
                              "bf16 matrix products, SSD chunk states: recompute), collectives: nccl (ZeRO-1 on device "
                              "buffers)");

    /* no NCCL in the API: auto takes MPI through host staging */
    assert_int_equal(m2_backend_choose(&be, &c, &pg, &api_no_nccl), M2_OK);
    assert_string_equal(be.dist, "mpi");

    /* no GPU, no API: the CPU, saying why */
    g_count = 0;
    assert_int_equal(m2_backend_choose(&be, &c, &pg, &api), M2_OK);
    assert_null(be.api);
    assert_int_equal(be.device, -1);
    assert_int_equal(pg.device, -1);
    assert_string_equal(be.dist, "mpi");
    assert_true(be.peak_flops == 0);
    m2_backend_describe(&be, line, sizeof line);
    char want[512], blas[160];
    m2_blas_core_describe(blas, sizeof blas);
    snprintf(want, sizeof want,
             "backend: cpu (auto: no CUDA GPU: fake: no driver), collectives: mpi (ZeRO-1 on host "
             "buffers), CPU kernels: %s, matrix products: %s",
             m2_ops_cpu_isa(), blas);
    assert_string_equal(line, want);
    assert_int_equal(m2_backend_choose(&be, &c, &pg, NULL), M2_OK);
    assert_null(be.api);
    assert_non_null(strstr(be.note, "this build has no CUDA backend"));

    /* fewer GPUs than local ranks: the CPU */
    g_count = 2;
    pg = group(2);
    assert_int_equal(m2_backend_choose(&be, &c, &pg, &api), M2_OK);
    assert_null(be.api);
    assert_non_null(strstr(be.note, "rank 0 is local rank 2 on node1 but only 2 CUDA GPU(s) are visible"));
}

static void test_cuda(void **state)
{
    reset();
    m2_backend be;
    m2_dist pg = group(1);
    m2_config c = cfg_with("cuda", "auto");
    g_count = 2;
    g_name = "Some Future GPU";
    assert_int_equal(m2_backend_choose(&be, &c, &pg, &api), M2_OK);
    assert_int_equal(be.device, 1); /* the local rank */
    assert_int_equal(g_init_device, 1);
    assert_int_equal(pg.device, 1);
    assert_true(be.peak_flops == 0);          /* not in the table: no MFU */
    assert_string_equal(g_precision, "bf16"); /* the default of model.precision, handed to the device */
    assert_string_equal(be.precision, "bf16");
    assert_int_equal(g_keep_states, 0); /* model.ssd_states' default, recompute, handed to the device */
    snprintf(c.model.ssd_states, sizeof c.model.ssd_states, "keep");
    snprintf(c.model.precision, sizeof c.model.precision, "tf32");
    assert_int_equal(m2_backend_choose(&be, &c, &pg, &api), M2_OK);
    assert_string_equal(g_precision, "tf32");
    assert_int_equal(g_keep_states, 1);
    char line[512];
    m2_backend_describe(&be, line, sizeof line);
    assert_non_null(strstr(line, ", tf32 matrix products, SSD chunk states: keep)"));
    snprintf(c.model.precision, sizeof c.model.precision, "fp8"); /* what the config would refuse earlier */
    assert_int_equal(m2_backend_choose(&be, &c, &pg, &api), M2_EUSAGE);
    assert_string_equal(m2_last_error(), "model.precision (fp8): fake: unknown precision fp8");
    m2_config on_cpu = cfg_with("cpu", "auto");
    snprintf(on_cpu.model.precision, sizeof on_cpu.model.precision, "tf32");
    assert_int_equal(m2_backend_choose(&be, &on_cpu, &pg, &api), M2_OK);
    assert_string_equal(be.precision, ""); /* the CPU computes in fp32 */
    snprintf(c.model.precision, sizeof c.model.precision, "bf16");

    g_count = 0;
    assert_int_equal(m2_backend_choose(&be, &c, &pg, &api), M2_EFAIL);
    assert_string_equal(m2_last_error(), "model.device (cuda): no CUDA GPU: fake: no driver");
    assert_int_equal(pg.device, -1);
    assert_int_equal(m2_backend_choose(&be, &c, &pg, NULL), M2_EFAIL);
    assert_non_null(strstr(m2_last_error(), "model.device (cuda): this build has no CUDA backend"));
    g_count = 1;
    assert_int_equal(m2_backend_choose(&be, &c, &pg, &api), M2_EFAIL); /* local rank 1, one GPU */
    assert_non_null(strstr(m2_last_error(), "only 1 CUDA GPU(s) are visible"));

    g_count = 2;
    g_init_rc = M2_EFAIL;
    assert_int_equal(m2_backend_choose(&be, &c, &pg, &api), M2_EFAIL);
    assert_string_equal(m2_last_error(), "model.device (fakecuda, rank 0, device 1): fake init failed");
}

static void test_dist_rules(void **state)
{
    reset();
    m2_backend be;
    m2_dist pg = group(0);
    m2_config c = cfg_with("cpu", "nccl");
    assert_int_equal(m2_backend_choose(&be, &c, &pg, &api), M2_EUSAGE);
    assert_non_null(strstr(m2_last_error(), "dist.backend (nccl): NCCL works on GPU buffers"));
    c = cfg_with("cpu", "none");
    assert_int_equal(m2_backend_choose(&be, &c, &pg, &api), M2_OK);
    assert_string_equal(be.dist, "none");
    pg.world = 2;
    assert_int_equal(m2_backend_choose(&be, &c, &pg, &api), M2_EUSAGE);
    assert_string_equal(m2_last_error(), "dist.backend (none): 2 ranks need collectives; use auto, mpi or nccl");
    pg.world = 1;
    c = cfg_with("cuda", "mpi");
    assert_int_equal(m2_backend_choose(&be, &c, &pg, &api), M2_OK);
    assert_string_equal(be.dist, "mpi");
    c = cfg_with("cuda", "nccl");
    assert_int_equal(m2_backend_choose(&be, &c, &pg, &api_no_nccl), M2_EUSAGE);
    /* a lone process (evaluation): no collectives whatever dist.backend says */
    assert_int_equal(m2_backend_choose(&be, &c, NULL, &api), M2_OK);
    assert_string_equal(be.dist, "none");
    assert_int_equal(be.device, 0);
}

static void test_peak_table(void **state)
{
    assert_true(m2_gpu_bf16_peak("NVIDIA H200") == 989e12);
    assert_true(m2_gpu_bf16_peak("NVIDIA H100 PCIe") == 756e12);
    assert_true(m2_gpu_bf16_peak("NVIDIA A100-SXM4-80GB") == 312e12);
    assert_true(m2_gpu_bf16_peak("NVIDIA GeForce RTX 4090") == 0);
    assert_true(m2_gpu_bf16_peak(NULL) == 0);
    /* one layer of D=2, E=2 (Di=4), P=2 (H=2), N=1, G=1, Q=4, F=1, O=1 (Win = 2*4 + 2 + 2 = 12), by hand:
     * GEMMs 2(2*12 + 4*2) = 64, SSD 1*4*1 + 2(4*2 + 4*1*2) = 36, embed+head 2*1*2 + 2*2*1 = 8: 3 * 108 = 324 */
    m2_dims d = {.F = 1, .O = 1, .D = 2, .L = 1, .E = 2, .P = 2, .N = 1, .G = 1, .K = 4, .Q = 4};
    d.Di = 4;
    d.H = 2;
    d.Win = 12;
    assert_true(m2_train_flops_per_token(&d) == 324.0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_auto),
        cmocka_unit_test(test_cuda),
        cmocka_unit_test(test_dist_rules),
        cmocka_unit_test(test_peak_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
