/* TEST-ONLY: the counters of emu_counters.h. Kernel bytes come from GCC's -fsanitize=thread instrumentation of the
 * kernel sources in the counting build (mamba2_cuda_emu_count): every load and store the compiler cannot prove
 * local calls __tsan_read<N> / __tsan_write<N>, implemented here (this file itself is never instrumented). Only
 * addresses inside a live cudaMalloc allocation, during a launch, are counted; distinct bytes are found with a
 * per-4-byte-word stamp of the launch number, so a word read by every thread of a grid counts 4 bytes once. */
#include "emu_count.h"
#include "emu_counters.h"
#include "emu_streams.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <map>
#include <string>
#include <vector>

namespace
{
struct allocation {
    uintptr_t base;
    size_t bytes;
    std::vector<uint32_t> rstamp, wstamp; /* per 4-byte word: the launch that last touched it */
};

std::map<uintptr_t, allocation> g_allocs;
uintptr_t g_lo = UINTPTR_MAX, g_hi = 0;
allocation *g_last = nullptr;
size_t g_now = 0, g_peak = 0;

std::vector<m2emu_kernel_count> g_records;
m2emu_kernel_count g_cur; /* the launch running, or the last one until it is named */
bool g_running = false, g_pending = false;
uint32_t g_epoch = 0;
bool g_instrumented = false; /* set by __tsan_init, which each instrumented file's constructor calls */

void merge_pending(const char *name)
{
    if (!g_pending) return;
    g_pending = false;
    if (name) snprintf(g_cur.name, sizeof g_cur.name, "%s", name);
    for (auto &r : g_records)
        if (!strcmp(r.name, g_cur.name) && !strcmp(r.key, g_cur.key)) {
            double *d = &r.launches;
            const double *s = &g_cur.launches;
            for (size_t i = 0; i < (sizeof r - offsetof(m2emu_kernel_count, launches)) / sizeof(double); i++)
                d[i] += s[i];
            return;
        }
    g_records.push_back(g_cur);
}

/* <digits><identifier> at *p (an Itanium-mangled source name), advancing p; "" when there is none */
std::string source_name(const char *&p)
{
    char *end;
    const long n = strtol(p, &end, 10);
    if (end == p || n <= 0 || (long)strlen(end) < n) return "";
    p = end + n;
    return std::string(end, (size_t)n);
}

/* Base name of the launch text, with the launching function's first template argument when the text has a
 * template argument list: the lambda's mangled type is Z<function>I<first argument>...E... (GCC's demangler
 * does not take lambda types with auto parameters, so the few cases needed are read here). */
void make_key(char *key, size_t n, const char *text, const char *enclosing)
{
    const std::string t(text), base = t.substr(0, t.find('<'));
    std::string arg;
    if (t.find('<') != std::string::npos && enclosing && enclosing[0] == 'Z') {
        const char *p = enclosing + 1;
        if (!source_name(p).empty() && *p == 'I') {
            p++;
            arg = source_name(p);
        }
    }
    snprintf(key, n, "%s%s%s%s", base.c_str(), arg.empty() ? "" : "<", arg.c_str(), arg.empty() ? "" : ">");
}

allocation *find(uintptr_t a)
{
    if (g_last && a >= g_last->base && a < g_last->base + g_last->bytes) return g_last;
    auto it = g_allocs.upper_bound(a);
    if (it == g_allocs.begin()) return nullptr;
    --it;
    if (a >= it->second.base + it->second.bytes) return nullptr;
    return g_last = &it->second;
}

inline void access(const void *p, size_t n, bool write)
{
    const uintptr_t a = (uintptr_t)p;
    if (!g_running || a < g_lo || a >= g_hi) return;
    allocation *al = find(a);
    if (!al) return;
    std::vector<uint32_t> &st = write ? al->wstamp : al->rstamp;
    if (st.empty()) st.assign((al->bytes + 3) / 4, 0);
    double distinct = 0;
    for (size_t w = (a - al->base) / 4, e = (a + n - 1 - al->base) / 4; w <= e && w < st.size(); w++)
        if (st[w] != g_epoch) {
            st[w] = g_epoch;
            distinct += 4;
        }
    g_cur.accesses += 1;
    (write ? g_cur.write_bytes : g_cur.read_bytes) += (double)n;
    (write ? g_cur.write_distinct : g_cur.read_distinct) += distinct;
}
} // namespace

namespace m2emu
{
void count_alloc(void *p, size_t bytes)
{
    const uintptr_t a = (uintptr_t)p;
    g_allocs[a] = allocation{a, bytes, {}, {}};
    g_lo = std::min(g_lo, a);
    g_hi = std::max(g_hi, a + bytes);
    g_now += bytes;
    g_peak = std::max(g_peak, g_now);
}
void count_free(void *p)
{
    auto it = g_allocs.find((uintptr_t)p);
    if (it == g_allocs.end()) return;
    g_now -= it->second.bytes;
    if (g_last == &it->second) g_last = nullptr;
    g_allocs.erase(it);
}
void launch_begin(const char *text, const char *enclosing, unsigned blocks, unsigned threads)
{
    merge_pending(nullptr);
    memset(&g_cur, 0, sizeof g_cur);
    snprintf(g_cur.name, sizeof g_cur.name, "%s", text);
    make_key(g_cur.key, sizeof g_cur.key, text, enclosing);
    g_cur.launches = 1;
    g_cur.blocks = blocks;
    g_cur.threads = (double)blocks * threads;
    if (++g_epoch == 0) { /* wrapped: forget every stamp */
        for (auto &kv : g_allocs) kv.second.rstamp.clear(), kv.second.wstamp.clear();
        g_epoch = 1;
    }
    g_running = true;
}
void launch_end()
{
    g_running = false;
    g_pending = true;
}
void name_last_launch(const char *what)
{
    if (!interleaved()) merge_pending(what); /* interleaved, the launch has not run yet: it keeps its kernel name */
}
void count_flops(flop_kind kind, double flops)
{
    if (!g_running) return;
    (kind == FLOPS_BF16 ? g_cur.flops_bf16 : kind == FLOPS_TF32 ? g_cur.flops_tf32 : g_cur.flops_fp32_cuda) += flops;
}
void count_bytes(double read, double write)
{
    g_cur.read_bytes += read;
    g_cur.read_distinct += read;
    g_cur.write_bytes += write;
    g_cur.write_distinct += write;
}
} // namespace m2emu

extern "C" {
int m2emu_counts_bytes(void) { return g_instrumented; }
void m2emu_counters_reset(void)
{
    g_pending = false;
    g_records.clear();
    g_peak = g_now;
}
int m2emu_counters_get(m2emu_kernel_count *out, int max)
{
    merge_pending(nullptr);
    for (int i = 0; i < max && i < (int)g_records.size(); i++) out[i] = g_records[i];
    return (int)g_records.size();
}
size_t m2emu_device_bytes(void) { return g_now; }
size_t m2emu_device_peak_bytes(void) { return g_peak; }

/* The instrumentation's entry points (GCC -fsanitize=thread, --param=tsan-instrument-func-entry-exit=0). */
#define M2EMU_TSAN(n)                                               \
    void __tsan_read##n(void *p) { access(p, n, false); }           \
    void __tsan_write##n(void *p) { access(p, n, true); }           \
    void __tsan_unaligned_read##n(void *p) { access(p, n, false); } \
    void __tsan_unaligned_write##n(void *p) { access(p, n, true); } \
    void __tsan_volatile_read##n(void *p) { access(p, n, false); }  \
    void __tsan_volatile_write##n(void *p) { access(p, n, true); }
M2EMU_TSAN(1)
M2EMU_TSAN(2)
M2EMU_TSAN(4)
M2EMU_TSAN(8)
M2EMU_TSAN(16)
void __tsan_read_range(void *p, size_t n) { access(p, n, false); }
void __tsan_write_range(void *p, size_t n) { access(p, n, true); }
void __tsan_init(void) { g_instrumented = true; }
void __tsan_func_entry(void *) {}
void __tsan_func_exit(void) {}
void __tsan_vptr_read(void **) {}
void __tsan_vptr_update(void **, void *) {}
}
