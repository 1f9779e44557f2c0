/* Choosing where the model runs (model.device = auto|cpu|cuda) and how the data-parallel step communicates
 * (dist.backend = auto|mpi|nccl|none), for the trainer (and anything else that runs the model).
 *
 * The core library is compiled without CUDA. A program built with the CUDA backend hands its device API (a table
 * of plain functions, kernels/backend_cuda.h: m2_cuda_device_api()) to m2_backend_choose; a build without it passes
 * NULL. Tests pass other tables (the CPU ops dressed as a device, the CUDA emulation) to drive the device path on
 * machines without a GPU.
 *
 * The rules:
 *   model.device auto: the device when the API is there and every rank sees a usable GPU for its local rank,
 *                      else the CPU (and why, in the description);
 *                cuda: the device, or an error "model.device (cuda): no CUDA GPU: <reason>";
 *                cpu:  the CPU.
 *   On the device, rank r uses GPU = its local rank (the API's init selects it before anything is allocated), and
 *   model.precision sets the operands of its matrix products (GEMMs and the SSD's chunk products; accumulation and
 *   everything else stay fp32, docs/MODEL.md §3). The CPU computes in fp32 whatever the key says.
 *   dist.backend on the CPU: auto/mpi: ZeRO-1 on host buffers through MPI (dist/zero.h); none: the same, one rank
 *                only; nccl: an error (NCCL works on device buffers).
 *                on the device: auto: NCCL when the API has it, else MPI; nccl: NCCL; mpi: MPI through host
 *                staging (dist/dcomm.h); none: one rank, no collectives. */
#ifndef MAMBA2_BACKEND_H
#define MAMBA2_BACKEND_H

#include <stddef.h>

#include "base/config.h"
#include "core/ops.h"
#include "dist/dcomm.h"
#include "dist/dist.h"
#include "dist/zero.h"

/* What a device backend offers. */
typedef struct {
    const char *name;                           /* "cuda" */
    int (*available)(char *why, size_t cap);    /* usable devices (> 0), or 0 with the reason */
    int (*init)(int device);                    /* selects the device and creates the backend on it */
    const m2_ops *(*ops)(void);                 /* the backend's ops (after init); NULL with a message */
    void (*device_name)(char *buf, size_t cap); /* the selected device's name (after init) */
    /* Sets the operand precision of the device's matrix products (model.precision: "bf16", "tf32" or "fp32");
     * M2_EUSAGE for another name. NULL: the device has one precision (the key is then not looked at). */
    int (*set_precision)(const char *name);
    /* Keeps the SSD's chunk states from the forward for the backward (keep != 0) or recomputes them there
     * (model.ssd_states: "keep" or "recompute"; BENCHMARKS.md, issue 16d, gives the memory and time of each). Called
     * before any model is created. NULL: the device has one way (the key is then not looked at). */
    void (*keep_ssd_states)(int keep);
    /* The device's own collectives over pg (NCCL: dist.backend nccl), or NULL when the build has none. */
    int (*comm_create)(m2_dcomm **out, const m2_dist *pg, double timeout_s);
} m2_device_api;

typedef struct {
    const m2_ops *ops;
    const m2_device_api *api; /* the device's API; NULL on the CPU */
    int device;               /* this rank's device; -1 on the CPU */
    char dist[16];            /* the data-parallel collectives: "mpi", "nccl" or "none" */
    char device_name[256];    /* the device's name ("" on the CPU) */
    char precision[8];        /* the device's matrix-product operands (model.precision; "" on the CPU: fp32) */
    char ssd_states[12];      /* the device's SSD chunk states for the backward (model.ssd_states; "" on the CPU) */
    double peak_flops;        /* the device's bf16 dense peak (core/flops.h), 0 when unknown */
    char note[320];           /* why model.device = auto chose the CPU ("" otherwise) */
} m2_backend;

/* Chooses and initialises the backend by the rules above. pg: the ranks (collective over them when model.device is
 * auto), or NULL for a lone process without collectives (device 0; dist.backend is not looked at: evaluation);
 * pg->device is set (the GPU, or -1). api may be NULL.
 * Returns M2_OK, M2_EUSAGE (a combination the config cannot have) or M2_EFAIL (no GPU, init failed). */
int m2_backend_choose(m2_backend *be, const m2_config *cfg, m2_dist *pg, const m2_device_api *api);

/* One line for the log, e.g. "backend: cuda (NVIDIA H200, device = local rank), collectives: nccl". */
void m2_backend_describe(const m2_backend *be, char *buf, size_t cap);

/* The data-parallel step for this backend (dist/zero.h): ZeRO-1 on the backend's ops with the chosen collectives
 * (MPI on the CPU; NCCL or host-staged MPI on a device). Collective when they are NCCL (the communicator is built
 * here). */
int m2_backend_make_zero(const m2_backend *be, const m2_dist *pg, size_t n_params, const unsigned char *decay_mask,
                         m2_zero **out);

#endif
