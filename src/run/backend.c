#include "run/backend.h"

#include "base/cpu.h"
#include "base/error.h"
#include "core/blas_core.h"
#include "core/flops.h"
#include "core/ops.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* A usable device for this rank: the API is there, a GPU is present, and there is one for its local rank. Returns 1,
 * or 0 with the reason in why. */
static int device_usable(const m2_device_api *api, const m2_dist *pg, char *why, size_t cap)
{
    if (!api) {
        snprintf(why, cap, "this build has no CUDA backend (nvcc not found, or -DMAMBA2_CUDA=OFF)");
        return 0;
    }
    char reason[256] = "";
    const int n = api->available(reason, sizeof reason);
    if (n <= 0) {
        snprintf(why, cap, "no CUDA GPU: %s", reason);
        return 0;
    }
    const int local = pg ? pg->local_rank : 0;
    if (local >= n) {
        snprintf(why, cap, "rank %d is local rank %d on %s but only %d CUDA GPU(s) are visible (one GPU per rank)",
                 pg->rank, local, pg->host, n);
        return 0;
    }
    return 1;
}

/* model.device -> the device (1) or the CPU (0); -1 on error (message left). */
static int want_device(m2_backend *be, const m2_config *cfg, const m2_dist *pg, const m2_device_api *api)
{
    const char *pref = cfg->model.device;
    if (strcmp(pref, "cpu") == 0) return 0;
    char why[300];
    int usable = device_usable(api, pg, why, sizeof why);
    if (strcmp(pref, "cuda") == 0) {
        if (usable) return 1;
        m2_fail(M2_EFAIL, "model.device (cuda): %s", why);
        return -1;
    }
    /* auto: all ranks must agree, so the device only when every rank has one */
    if (pg && pg->world > 1) {
        int64_t missing = !usable;
        if (m2_dist_allreduce_max_i64(pg, &missing, 1)) return -1;
        if (missing && usable) snprintf(why, sizeof why, "another rank has no usable CUDA GPU");
        usable = !missing;
    }
    if (!usable) snprintf(be->note, sizeof be->note, "%s", why);
    return usable;
}

/* dist.backend for the chosen device (a lone process has no collectives). */
static int choose_dist(m2_backend *be, const m2_config *cfg, const m2_dist *pg)
{
    const char *want = cfg->dist.backend;
    if (!pg) {
        snprintf(be->dist, sizeof be->dist, "none");
        return M2_OK;
    }
    if (strcmp(want, "none") == 0 && pg->world > 1)
        return m2_fail(M2_EUSAGE, "dist.backend (none): %d ranks need collectives; use auto, mpi or nccl", pg->world);
    if (!be->api) {
        if (strcmp(want, "nccl") == 0)
            return m2_fail(M2_EUSAGE,
                           "dist.backend (nccl): NCCL works on GPU buffers but the model runs on the CPU "
                           "(model.device = %s%s%s)",
                           cfg->model.device, be->note[0] ? ": " : "", be->note);
        snprintf(be->dist, sizeof be->dist, "%s", strcmp(want, "none") == 0 ? "none" : "mpi");
        return M2_OK;
    }
    if (strcmp(want, "nccl") == 0 && !be->api->comm_create)
        return m2_fail(M2_EUSAGE, "dist.backend (nccl): the %s backend of this build has no NCCL collectives",
                       be->api->name);
    if (strcmp(want, "auto") == 0) want = be->api->comm_create ? "nccl" : "mpi";
    snprintf(be->dist, sizeof be->dist, "%s", want);
    return M2_OK;
}

int m2_backend_choose(m2_backend *be, const m2_config *cfg, m2_dist *pg, const m2_device_api *api)
{
    memset(be, 0, sizeof *be);
    be->device = -1;
    int rc = m2_cpu_check_env(); /* an unknown MAMBA2_CPU is refused, not silently read as scalar */
    if (rc) return rc;
    be->ops = m2_ops_cpu();
    if (pg) pg->device = -1;
    const int dev = want_device(be, cfg, pg, api);
    if (dev < 0) return M2_EFAIL;
    if (dev) be->api = api;
    rc = choose_dist(be, cfg, pg);
    if (rc || !dev) return rc;

    be->device = pg ? pg->local_rank : 0;
    if ((rc = api->init(be->device)))
        return m2_fail_context(rc, "model.device (%s, rank %d, device %d)", api->name, pg ? pg->rank : 0, be->device);
    if (!(be->ops = api->ops())) return m2_fail_context(M2_EFAIL, "model.device (%s)", api->name);
    if (api->set_precision) {
        if ((rc = api->set_precision(cfg->model.precision)))
            return m2_fail_context(rc, "model.precision (%s)", cfg->model.precision);
        snprintf(be->precision, sizeof be->precision, "%s", cfg->model.precision);
    }
    if (api->keep_ssd_states) {
        api->keep_ssd_states(strcmp(cfg->model.ssd_states, "keep") == 0); /* the config allows only the two names */
        snprintf(be->ssd_states, sizeof be->ssd_states, "%s", cfg->model.ssd_states);
    }
    if (pg) pg->device = be->device;
    api->device_name(be->device_name, sizeof be->device_name);
    be->peak_flops = m2_gpu_bf16_peak(be->device_name);
    return M2_OK;
}

void m2_backend_describe(const m2_backend *be, char *buf, size_t cap)
{
    static const char *dist_what[][2] = {
        {"mpi", "ZeRO-1"},
        {"nccl", "ZeRO-1"},
        {"none", "one rank"},
    };
    const char *how = "";
    for (size_t i = 0; i < sizeof dist_what / sizeof dist_what[0]; i++)
        if (strcmp(be->dist, dist_what[i][0]) == 0) how = dist_what[i][1];
    if (!be->api) {
        char blas[160];
        m2_blas_core_describe(blas, sizeof blas);
        snprintf(
            buf, cap, "backend: cpu%s%s%s, collectives: %s (%s on host buffers), CPU kernels: %s, matrix products: %s",
            be->note[0] ? " (auto: " : "", be->note, be->note[0] ? ")" : "", be->dist, how, m2_ops_cpu_isa(), blas);
        return;
    }
    char peak[64] = "", prec[48] = "", states[48] = "";
    if (be->peak_flops > 0) snprintf(peak, sizeof peak, ", bf16 peak %.0f TFLOP/s", be->peak_flops / 1e12);
    if (be->precision[0]) snprintf(prec, sizeof prec, ", %s matrix products", be->precision);
    if (be->ssd_states[0]) snprintf(states, sizeof states, ", SSD chunk states: %s", be->ssd_states);
    snprintf(buf, cap, "backend: %s (%s, device = local rank%s%s%s), collectives: %s (%s on device buffers%s)",
             be->api->name, be->device_name, peak, prec, states, be->dist, how,
             strcmp(be->dist, "mpi") == 0 ? ", staged through host memory" : "");
}

int m2_backend_make_zero(const m2_backend *be, const m2_dist *pg, size_t n_params, const unsigned char *decay_mask,
                         m2_zero **out)
{
    m2_dcomm *comm = NULL;
    int rc = be->api && strcmp(be->dist, "nccl") == 0 ? be->api->comm_create(&comm, pg, pg->timeout_s)
                                                      : m2_dcomm_mpi_create(&comm, pg, be->ops);
    if (rc) return rc;
    return m2_zero_create(out, pg, be->ops, comm, n_params, decay_mask);
}
