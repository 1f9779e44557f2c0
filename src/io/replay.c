/* Time-ordered replay of a universe's split (replay.h). */
#include "io/replay.h"

#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/error.h"
#include "io/h5util.h"

struct m2_replay_cursor {
    int64_t part, last; /* current part and end of this instrument's parts in r->parts (pairs) */
    int64_t row, begin, end;
    int64_t buf_lo, buf_n; /* ts[0..buf_n) holds rows [buf_lo, buf_lo + buf_n) */
    int64_t *ts;
    int64_t next_ts; /* timestamp of `row` */
};

static int heap_less(const m2_replay *r, int32_t a, int32_t b)
{
    int64_t ta = r->cur[a].next_ts, tb = r->cur[b].next_ts;
    return ta < tb || (ta == tb && a < b);
}

static void heap_swap(m2_replay *r, int i, int j)
{
    int32_t t = r->heap[i];
    r->heap[i] = r->heap[j];
    r->heap[j] = t;
}

static void sift_down(m2_replay *r, int i)
{
    for (;;) {
        int l = 2 * i + 1, m = i;
        if (l < r->heap_n && heap_less(r, r->heap[l], r->heap[m])) m = l;
        if (l + 1 < r->heap_n && heap_less(r, r->heap[l + 1], r->heap[m])) m = l + 1;
        if (m == i) return;
        heap_swap(r, i, m);
        i = m;
    }
}

static void heap_push(m2_replay *r, int32_t inst)
{
    int i = r->heap_n++;
    r->heap[i] = inst;
    while (i > 0 && heap_less(r, r->heap[i], r->heap[(i - 1) / 2])) {
        heap_swap(r, i, (i - 1) / 2);
        i = (i - 1) / 2;
    }
}

/* Points cursor c at its current part's first row. */
static void enter_part(m2_replay *r, m2_replay_cursor *c)
{
    c->begin = c->row = r->parts[2 * c->part];
    c->end = r->parts[2 * c->part + 1];
}

/* Sets c->next_ts to row's timestamp, reading the next rows of the part into the buffer when needed. */
static int load_ts(m2_replay *r, m2_replay_cursor *c)
{
    if (c->row < c->buf_lo || c->row >= c->buf_lo + c->buf_n) {
        int64_t n = c->end - c->row < M2_REPLAY_BUF ? c->end - c->row : M2_REPLAY_BUF;
        if (r->fetch(r->ctx, c->row, n, c->ts)) return M2_EFAIL;
        c->buf_lo = c->row;
        c->buf_n = n;
    }
    c->next_ts = c->ts[c->row - c->buf_lo];
    return M2_OK;
}

/* Moves instrument i past the tick it just gave (at time t); *done = 1 when it has no rows left. */
static int advance(m2_replay *r, int i, int64_t t, int *done)
{
    m2_replay_cursor *c = &r->cur[i];
    if (++c->row == c->end) {
        if (++c->part == c->last) {
            *done = 1;
            return M2_OK;
        }
        enter_part(r, c);
    }
    *done = 0;
    if (load_ts(r, c)) return M2_EFAIL;
    if (c->next_ts < t)
        return m2_fail(M2_EFAIL,
                       "replay: instrument %s, row %lld: timestamp %lld ns is before the previous tick's %lld ns",
                       r->ds->inst_name ? r->ds->inst_name[i] : r->ds->instrument, (long long)c->row,
                       (long long)c->next_ts, (long long)t);
    return M2_OK;
}

/* The split's session parts as (begin, end) pairs grouped by instrument (a counting sort keeps each instrument's
 * parts in row order, which is its time order); cursor i gets its range. */
static int group_parts(m2_replay *r, int split)
{
    const m2_dataset *ds = r->ds;
    int64_t *first = m2_alloc_array((int64_t)r->n_inst + 1, sizeof *first, "replay parts");
    r->parts = first ? m2_alloc_array(2 * ds->n_sessions + 2, sizeof *r->parts, "replay parts") : NULL;
    if (!r->parts) {
        free(first);
        return M2_EFAIL;
    }
    memset(first, 0, sizeof *first * ((size_t)r->n_inst + 1));
    for (int64_t s = 0; s < ds->n_sessions; s++) {
        int64_t b, e;
        m2_dataset_session_part(ds, split, s, &b, &e);
        if (b < e) first[(ds->session_inst ? ds->session_inst[s] : 0) + 1]++;
    }
    for (int i = 0; i < r->n_inst; i++) first[i + 1] += first[i];
    for (int i = 0; i < r->n_inst; i++) r->cur[i] = (m2_replay_cursor){.part = first[i], .last = first[i]};
    for (int64_t s = 0; s < ds->n_sessions; s++) {
        int64_t b, e;
        m2_dataset_session_part(ds, split, s, &b, &e);
        if (b >= e) continue;
        m2_replay_cursor *c = &r->cur[ds->session_inst ? ds->session_inst[s] : 0];
        r->parts[2 * c->last] = b;
        r->parts[2 * c->last++ + 1] = e;
    }
    free(first);
    return M2_OK;
}

int m2_replay_init(m2_replay *r, const m2_dataset *ds, int split, int64_t window_ns, m2_replay_fetch fetch, void *ctx)
{
    *r = (m2_replay){.ds = ds, .window_ns = window_ns, .fetch = fetch, .ctx = ctx, .n_inst = ds->n_instruments};
    if (window_ns < 0) return m2_fail(M2_EUSAGE, "replay: window %lld ns must be >= 0", (long long)window_ns);
    if (r->n_inst < 1) r->n_inst = 1;
    const size_t I = (size_t)r->n_inst;
    if (!(r->cur = m2_alloc_array((int64_t)I, sizeof *r->cur, "replay cursors")) ||
        !(r->heap = m2_alloc_array((int64_t)I, sizeof *r->heap, "replay heap")) ||
        !(r->in_batch = m2_alloc_array((int64_t)I, sizeof *r->in_batch, "replay batches")) ||
        !(r->ts_buf = m2_alloc_array((int64_t)I * M2_REPLAY_BUF, sizeof *r->ts_buf, "replay timestamps")))
        return M2_EFAIL;
    if (group_parts(r, split)) return M2_EFAIL;
    for (int i = 0; i < r->n_inst; i++) {
        m2_replay_cursor *c = &r->cur[i];
        c->ts = r->ts_buf + (size_t)i * M2_REPLAY_BUF;
        r->in_batch[i] = -1;
        if (c->part == c->last) continue;
        enter_part(r, c);
        if (load_ts(r, c)) return M2_EFAIL;
        heap_push(r, i);
    }
    return M2_OK;
}

int m2_replay_next(m2_replay *r, int64_t *rows, int *streams, unsigned char *reset, int *n)
{
    int k = 0;
    int64_t t0 = 0;
    r->batch++;
    while (r->heap_n > 0) {
        const int i = r->heap[0];
        m2_replay_cursor *c = &r->cur[i];
        const int64_t t = c->next_ts;
        if (k > 0 && (t - t0 > r->window_ns || r->in_batch[i] == r->batch)) break;
        if (k == 0) t0 = t;
        rows[k] = c->row;
        streams[k] = i;
        reset[k++] = c->row == c->begin;
        r->in_batch[i] = r->batch;
        int done;
        if (advance(r, i, t, &done)) return M2_EFAIL;
        if (done) r->heap[0] = r->heap[--r->heap_n];
        sift_down(r, 0);
    }
    *n = k;
    return M2_OK;
}

void m2_replay_free(m2_replay *r)
{
    free(r->cur);
    free(r->parts);
    free(r->heap);
    free(r->in_batch);
    free(r->ts_buf);
    memset(r, 0, sizeof *r);
}

struct m2_replay_file {
    hid_t file;
    m2_h5_rows ts;
};

int m2_replay_file_open(const char *path, m2_replay_file **out)
{
    m2_h5_quiet();
    m2_replay_file *f = calloc(1, sizeof *f);
    if (!f) return m2_fail(M2_EFAIL, "replay: out of memory");
    f->ts.ds = H5I_INVALID_HID;
    f->file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    int rc = f->file < 0 ? m2_h5_fail(M2_EFAIL, "cannot open", path, NULL) : M2_OK;
    if (rc == M2_OK && !m2_h5_exists(f->file, "/raw/ts_ns"))
        rc = m2_fail(M2_EFAIL,
                     "dataset /raw/ts_ns (%s): missing: replaying instruments in time order needs the "
                     "event times",
                     path);
    if (rc == M2_OK) rc = m2_h5_rows_open(f->file, "/raw/ts_ns", M2_H5_I64, &f->ts);
    if (rc) {
        m2_replay_file_close(f);
        return rc;
    }
    *out = f;
    return M2_OK;
}

int m2_replay_file_fetch(void *f, int64_t row, int64_t n, int64_t *ts)
{
    return m2_h5_rows_read(&((m2_replay_file *)f)->ts, row, n, ts);
}

void m2_replay_file_close(m2_replay_file *f)
{
    if (!f) return;
    m2_h5_rows_close(&f->ts);
    if (f->file >= 0) H5Fclose(f->file);
    free(f);
}
