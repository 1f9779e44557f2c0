/* The table of one instruction-set level's element-wise ops and chunked SSD: compiled, like those ops, once per
 * level (cmake/isa.cmake), so each copy names its own level's functions (ops_cpu.h). */
#include "core/ops_cpu.h"

const m2_cpu_kernels M2_ISA_FN(m2_cpu_kernels) = {
    .level = M2_ISA_LEVEL,
    .rmsnorm_fwd = m2_cpu_rmsnorm_fwd,
    .rmsnorm_bwd = m2_cpu_rmsnorm_bwd,
    .gated_norm_fwd = m2_cpu_gated_norm_fwd,
    .gated_norm_bwd = m2_cpu_gated_norm_bwd,
    .conv_silu_fwd = m2_cpu_conv_silu_fwd,
    .conv_silu_bwd = m2_cpu_conv_silu_bwd,
    .dt_fwd = m2_cpu_dt_fwd,
    .dt_bwd = m2_cpu_dt_bwd,
    .mse_loss = m2_cpu_mse_loss,
    .ssd_forward = m2_ssd_forward,
    .ssd_backward = m2_ssd_backward,
};
