/* Timing helpers that mamba2_stream and bench_stream share: latency percentiles, the weight-streaming floor,
 * the core's stall census and pinning. */
#ifndef MAMBA2_STREAM_TIMING_H
#define MAMBA2_STREAM_TIMING_H

#include <stddef.h>

typedef struct {
    double p50, p99, p999, max, mean; /* ns */
} m2_latency;

/* Sorts ns[0..n) in place and fills the percentiles (nearest rank). */
void m2_latency_summarize(double *ns, size_t n, m2_latency *out);

/* Nanoseconds on CLOCK_MONOTONIC (a vDSO read, no system call where the clock source allows it). */
double m2_now_ns(void);

/* The weight-streaming floor: median time (ns) to read `bytes` once with wide loads.
 *  hot:  the same buffer read again and again, so it comes from the cache level a buffer of that size
 *        settles in, as the weights do when ticks come back to back;
 *  cold: a different `bytes` slice of a 256 MiB arena each time, so every read misses the caches (weights
 *        evicted by other work between sparse ticks). */
double m2_stream_floor_ns(size_t bytes, int cold, int reps);

/* The same read loop, with the whole distribution of its reps times (the floor's own tail: a plain read of
 * the weight bytes is hit by the same interrupts and stalls as a tick). Returns 0, or -1 out of memory. */
int m2_stream_floor(size_t bytes, int cold, int reps, m2_latency *out);

/* The same read loop's reps times themselves, in t[0, reps) (a benchmark that pools them with other samples: one
 * that times ticks and floor reads in alternating blocks). Returns 0, or -1 out of memory. */
int m2_stream_floor_times(size_t bytes, int cold, int reps, double *t);

/* The state floor: median time (ns) to read and write `bytes` of state once, as a tick does with its streams' conv
 * rings and SSM states (glibc's memmove by one vector within a buffer of that size: its widest loads and stores for
 * this CPU), over 101 passes of the same buffer, so at the bandwidth of the cache level that size sits in. 0 for at
 * most 16 floats, -1 out of memory. */
double m2_stream_state_floor_ns(size_t bytes);

/* Stalls of this core as a program sees them: spins on the monotonic clock for `seconds` and counts the gaps
 * between consecutive reads that are at least min_ns long (time in which this thread did not run: timer and
 * other interrupts, the hypervisor taking the CPU). *per_s: gaps per second; *share: fraction of the time
 * lost in them. A tick of length t is hit by one with probability about per_s * t. */
void m2_stall_census(double seconds, double min_ns, double *per_s, double *share);

/* Pins the calling thread to one CPU (the one it runs on now); returns that CPU, or -1. */
int m2_pin_to_current_cpu(void);

#endif
