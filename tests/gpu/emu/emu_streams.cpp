/* TEST-ONLY: streams as queues and events as markers in them (emu_streams.h). */
#include "emu_streams.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <deque>
#include <vector>

struct CUstream_st {
    struct op {
        std::function<void()> run;
        CUevent_st *wait_on = nullptr; /* a wait: blocked until the event's record number `seq` has run */
        uint64_t seq = 0;
    };
    std::deque<op> q;
};

struct CUevent_st {
    CUstream_st *stream = nullptr;   /* where it was last recorded */
    uint64_t recorded = 0, done = 0; /* records issued, and the last one that has run */
};

namespace
{
CUstream_st g_default;
std::vector<CUstream_st *> g_streams = {&g_default};
int g_mode = -1; /* -1: not read yet */

CUstream_st *of(cudaStream_t s) { return s ? s : &g_default; }

/* Runs the head of s; a wait whose record has not run yet first drains the recording stream up to it. */
void step(CUstream_st *s, int depth)
{
    if (depth > 64) {
        fprintf(stderr, "cuda emulator: event waits form a cycle between streams\n");
        abort();
    }
    CUstream_st::op o = std::move(s->q.front());
    s->q.pop_front();
    if (o.wait_on) {
        CUevent_st *e = o.wait_on;
        while (e->done < o.seq && e->stream && !e->stream->q.empty()) step(e->stream, depth + 1);
        return;
    }
    o.run();
}
} // namespace

namespace m2emu
{
bool interleaved()
{
    if (g_mode < 0) {
        const char *v = getenv("M2_EMU_STREAMS");
        g_mode = v && !strcmp(v, "interleave");
    }
    return g_mode == 1;
}
void enqueue(cudaStream_t s, std::function<void()> op)
{
    if (!interleaved()) {
        op();
        return;
    }
    CUstream_st::op o;
    o.run = std::move(op);
    of(s)->q.push_back(std::move(o));
}
void drain(cudaStream_t s)
{
    CUstream_st *q = of(s);
    while (!q->q.empty()) step(q, 0);
}
void drain_all()
{
    for (CUstream_st *s : g_streams) drain(s == &g_default ? nullptr : s);
}
} // namespace m2emu

extern "C" void m2emu_set_interleave(int on)
{
    m2emu::drain_all();
    g_mode = on ? 1 : 0;
}

/* ---- the runtime's stream and event calls ---- */
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags)
{
    *s = new CUstream_st;
    g_streams.push_back(*s);
    return cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t s)
{
    if (!s) return cudaErrorInvalidValue;
    m2emu::drain(s);
    for (size_t i = 0; i < g_streams.size(); i++)
        if (g_streams[i] == s) g_streams.erase(g_streams.begin() + (long)i);
    delete s;
    return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t s)
{
    m2emu::drain(s);
    return cudaSuccess;
}
/* Not ready while work is queued; each poll runs one operation, so a polling loop ends. */
cudaError_t cudaStreamQuery(cudaStream_t s)
{
    CUstream_st *q = of(s);
    if (q->q.empty()) return cudaSuccess;
    step(q, 0);
    return cudaErrorNotReady;
}
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned flags)
{
    *e = new CUevent_st;
    return cudaSuccess;
}
cudaError_t cudaEventDestroy(cudaEvent_t e)
{
    delete e;
    return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s)
{
    if (!e) return cudaErrorInvalidValue;
    e->stream = of(s);
    const uint64_t seq = ++e->recorded;
    m2emu::enqueue(s, [e, seq]() { e->done = seq; });
    return cudaSuccess;
}
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned flags)
{
    if (!e) return cudaErrorInvalidValue;
    if (!m2emu::interleaved() || e->recorded == 0) return cudaSuccess; /* nothing recorded yet: no wait */
    CUstream_st::op o;
    o.wait_on = e;
    o.seq = e->recorded;
    of(s)->q.push_back(std::move(o));
    return cudaSuccess;
}
