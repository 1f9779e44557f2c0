/* The ranges of the flat gradient buffer whose reduction one ZeRO-1 step has started: the buckets the backward
 * reports as it completes them (model.h's on_ready), then, at the step, the gaps no bucket covered. Shared by the
 * ZeRO-1 step (zero.c), whatever its backend, so every backend accepts and completes the same ranges in the same
 * order, which is what lets them compute the same bits.
 *
 * Ranks must start the same ranges in the same order (collectives match by order); the backward reports buckets
 * in the same order on every rank. Errors follow base/error.h. */
#ifndef MAMBA2_GRAD_RANGES_H
#define MAMBA2_GRAD_RANGES_H

#include <stddef.h>

typedef struct {
    size_t begin, end;
} m2_range;

typedef struct {
    size_t n;    /* the real parameters: ranges lie in [0, n) */
    int rank;    /* for messages */
    m2_range *r; /* started this step, in start order */
    int count, cap;
} m2_grad_ranges;

void m2_grad_ranges_init(m2_grad_ranges *g, size_t n, int rank);
void m2_grad_ranges_free(m2_grad_ranges *g);
void m2_grad_ranges_clear(m2_grad_ranges *g); /* a new step */

/* Records [begin, end) as started. M2_EUSAGE when it is empty, passes n, or overlaps a range started this step
 * (one line naming the rank and both ranges); M2_EFAIL when out of memory. */
int m2_grad_ranges_add(m2_grad_ranges *g, size_t begin, size_t end);

/* The gaps of [0, n) that no started range covers, ascending (the same on every rank that started the same
 * ranges): *out is malloc'ed (free it; NULL when there is none), *count its length. */
int m2_grad_ranges_gaps(const m2_grad_ranges *g, m2_range **out, int *count);

/* The part of [begin, end) that rank owns under ZeRO-1 shards of `shard` elements ([rank*shard, (rank+1)*shard)):
 * possibly empty (begin == end). */
m2_range m2_shard_part(size_t shard, int rank, size_t begin, size_t end);

#endif
