/* TEST-ONLY: the emulation's side of emu_counters.h (called by emu.cpp, mma.h and the counting hooks). */
#ifndef MAMBA2_EMU_COUNT_H
#define MAMBA2_EMU_COUNT_H

#include <stddef.h>

namespace m2emu
{
enum flop_kind { FLOPS_BF16, FLOPS_TF32, FLOPS_FP32_CUDA };
void count_alloc(void *p, size_t bytes);
void count_free(void *p);
/* A launch: `text` is the kernel as the launch spells it (k or k<Op>), `enclosing` the mangled type of a lambda
 * defined in the launching function (it names that function's template arguments), or NULL. */
void launch_begin(const char *text, const char *enclosing, unsigned blocks, unsigned threads);
void launch_end();
void name_last_launch(const char *what);
void count_flops(flop_kind kind, double flops);
/* bytes moved by a call the emulation performs itself (cuBLAS, memset, copies): total = distinct */
void count_bytes(double read, double write);
} // namespace m2emu

#endif
