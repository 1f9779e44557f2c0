/* TEST-ONLY: streams and events of the emulated runtime (emu_streams.cpp). Two modes:
 * - synchronous (the default): every operation runs when it is issued; events only check their arguments;
 * - interleaved (M2_EMU_STREAMS=interleave in the environment, or m2emu_set_interleave(1)): each stream is a
 *   queue that runs only when something forces it (cudaStreamSynchronize, a cudaStreamQuery poll, a blocking
 *   copy to the host, cudaFree, or another stream's cudaStreamWaitEvent on an event recorded in it), and then as
 *   late as possible: work on other streams is never run early, so a reader whose event wait is missing sees
 *   the data as it was before the writer ran, and fails a test where the GPU would race. */
#ifndef MAMBA2_EMU_STREAMS_H
#define MAMBA2_EMU_STREAMS_H

#include <functional>

#include "cuda_host_api.h"

namespace m2emu
{
bool interleaved();
/* Runs op now (synchronous mode) or queues it on s (nullptr: the default stream). */
void enqueue(cudaStream_t s, std::function<void()> op);
/* Runs s's queue to its end (and, for its event waits, other streams' up to the recorded events). */
void drain(cudaStream_t s);
void drain_all();
} // namespace m2emu

extern "C" void m2emu_set_interleave(int on);

#endif
