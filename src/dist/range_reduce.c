#include "dist/range_reduce.h"

#include "base/error.h"

#include <stdlib.h>

static int grow(m2_range_reduces *q, int rank)
{
    if (q->n < q->cap) return M2_OK;
    const int cap = q->cap ? 2 * q->cap : 32;
    int **c = realloc(q->counts, (size_t)cap * sizeof *c);
    if (c) q->counts = c;
    MPI_Request *r = c ? realloc(q->reqs, (size_t)cap * sizeof *r) : NULL;
    if (r) q->reqs = r;
    m2_range *m = r ? realloc(q->mine, (size_t)cap * sizeof *m) : NULL;
    if (m) q->mine = m;
    if (!m) return m2_fail(M2_EFAIL, "ZeRO-1 (rank %d): out of memory for buckets", rank);
    q->cap = cap;
    return M2_OK;
}

int m2_range_reduce_start(m2_range_reduces *q, const m2_dist *pg, const float *send, float *shard_grad, size_t shard,
                          size_t begin, size_t end)
{
    int err = grow(q, pg->rank);
    if (err) return err;
    int *counts = malloc((size_t)pg->world * sizeof *counts);
    if (!counts) return m2_fail(M2_EFAIL, "ZeRO-1 (rank %d): out of memory", pg->rank);
    for (int r = 0; r < pg->world; r++) {
        const m2_range part = m2_shard_part(shard, r, begin, end);
        counts[r] = (int)(part.end - part.begin); /* shards are at most INT_MAX (zero.c checks) */
    }
    const m2_range mine = m2_shard_part(shard, pg->rank, begin, end);
    /* when nothing lands here, any valid address */
    float *recv = mine.end > mine.begin ? shard_grad + (mine.begin - (size_t)pg->rank * shard) : shard_grad;
    int rc = MPI_Ireduce_scatter(send + begin, recv, counts, MPI_FLOAT, MPI_SUM, pg->comm, &q->reqs[q->n]);
    if (rc != MPI_SUCCESS) {
        free(counts);
        return m2_dist_check(pg, rc, "MPI_Ireduce_scatter");
    }
    q->counts[q->n] = counts;
    q->mine[q->n] = mine;
    q->n++;
    int done = 0;
    return m2_dist_check(pg, MPI_Testall(q->n, q->reqs, &done, MPI_STATUSES_IGNORE), "MPI_Testall");
}

void m2_range_reduce_clear(m2_range_reduces *q)
{
    for (int i = 0; i < q->n; i++) free(q->counts[i]);
    q->n = 0;
}

int m2_range_reduce_wait(m2_range_reduces *q, const m2_dist *pg, const char *what)
{
    return q->n ? m2_dist_wait(pg, q->n, q->reqs, what) : M2_OK;
}

void m2_range_reduce_free(m2_range_reduces *q)
{
    m2_range_reduce_clear(q);
    free(q->counts);
    free(q->reqs);
    free(q->mine);
    *q = (m2_range_reduces){0};
}
