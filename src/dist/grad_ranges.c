#include "dist/grad_ranges.h"

#include "base/error.h"

#include <stdlib.h>

void m2_grad_ranges_init(m2_grad_ranges *g, size_t n, int rank) { *g = (m2_grad_ranges){.n = n, .rank = rank}; }

void m2_grad_ranges_free(m2_grad_ranges *g)
{
    free(g->r);
    m2_grad_ranges_init(g, g->n, g->rank);
}

void m2_grad_ranges_clear(m2_grad_ranges *g) { g->count = 0; }

int m2_grad_ranges_add(m2_grad_ranges *g, size_t begin, size_t end)
{
    if (begin >= end || end > g->n)
        return m2_fail(M2_EUSAGE, "ZeRO-1 bucket (rank %d): range [%zu, %zu) is empty or past %zu parameters", g->rank,
                       begin, end, g->n);
    for (int i = 0; i < g->count; i++)
        if (begin < g->r[i].end && g->r[i].begin < end)
            return m2_fail(M2_EUSAGE, "ZeRO-1 bucket (rank %d): range [%zu, %zu) overlaps [%zu, %zu) started earlier",
                           g->rank, begin, end, g->r[i].begin, g->r[i].end);
    if (g->count == g->cap) {
        const int cap = g->cap ? 2 * g->cap : 32;
        m2_range *r = realloc(g->r, (size_t)cap * sizeof *r);
        if (!r) return m2_fail(M2_EFAIL, "ZeRO-1 (rank %d): out of memory for buckets", g->rank);
        g->r = r;
        g->cap = cap;
    }
    g->r[g->count++] = (m2_range){begin, end};
    return M2_OK;
}

static int by_begin(const void *a, const void *b)
{
    const size_t x = ((const m2_range *)a)->begin, y = ((const m2_range *)b)->begin;
    return (x > y) - (x < y);
}

int m2_grad_ranges_gaps(const m2_grad_ranges *g, m2_range **out, int *count)
{
    *out = NULL;
    *count = 0;
    /* Disjoint ranges, sorted: a gap lies before each one and after the last. At most count + 1 gaps. */
    m2_range *sorted = malloc(((size_t)g->count + 1) * sizeof *sorted);
    m2_range *gaps = malloc(((size_t)g->count + 1) * sizeof *gaps);
    if (!sorted || !gaps) {
        free(sorted);
        free(gaps);
        return m2_fail(M2_EFAIL, "ZeRO-1 (rank %d): out of memory", g->rank);
    }
    for (int i = 0; i < g->count; i++) sorted[i] = g->r[i];
    qsort(sorted, (size_t)g->count, sizeof *sorted, by_begin);
    sorted[g->count] = (m2_range){g->n, g->n}; /* sentinel: the end of the buffer */
    size_t at = 0;
    int k = 0;
    for (int i = 0; i <= g->count; i++) {
        if (sorted[i].begin > at) gaps[k++] = (m2_range){at, sorted[i].begin};
        at = sorted[i].end;
    }
    free(sorted);
    if (k == 0) {
        free(gaps);
        gaps = NULL;
    }
    *out = gaps;
    *count = k;
    return M2_OK;
}

m2_range m2_shard_part(size_t shard, int rank, size_t begin, size_t end)
{
    size_t lo = (size_t)rank * shard, hi = lo + shard;
    if (lo < begin) lo = begin;
    if (hi > end) hi = end;
    return hi > lo ? (m2_range){lo, hi} : (m2_range){lo, lo};
}
