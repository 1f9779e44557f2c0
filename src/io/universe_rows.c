/* Pass 2 of the universe writer, one instrument in blocks of rows (universe_spool.h; FORMATS.md "Universe
 * import"). A row's features need only itself and the row before it in its session, its targets the rows up to the
 * largest horizon ahead in its session (features.c), so a block of rows [b, e) is computed exactly from the spooled
 * rows [b - 1, e + horizon) clipped to its session: memory is a block plus the horizon, whatever the instrument's
 * rows. The train statistics are the two-pass mean and deviation of m2_features_normalise, summed in the same row
 * order (bit-identical), from two extra passes over the train blocks: the train features and targets are computed
 * once, in the first, and kept in the spool's cache file (44 bytes per train row of one instrument, on disk) for the
 * deviations and the write. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "io/universe_spool.h"

enum { BLOCK = 1 << 16 }; /* rows per block: ~7 MB of raw rows, features and targets */

typedef struct {
    const m2_spool *sp;
    int i;
    const m2_feature_opts *o;
    m2_dataset idx; /* the instrument's sessions, cut at the splits; no arrays */
    m2_dataset blk; /* the block read back, with its features */
    int64_t cap, reach;
    int64_t xy_cap;   /* rows blk.X and blk.y have room for */
    int cache;        /* train blocks: CACHE_WRITE computed and kept, CACHE_READ / CACHE_READ_RAW read back */
    int64_t cache_at; /* byte offset of the next block in the cache file */
} inst_pass;

enum { CACHE_OFF, CACHE_WRITE, CACHE_READ, CACHE_READ_RAW };

static int blk_reserve(inst_pass *p, int64_t n)
{
    if (n <= p->cap) return M2_OK;
    m2_dataset *b = &p->blk;
    void **col[] = {(void **)&b->ts_ns,  (void **)&b->bid_px,   (void **)&b->ask_px,  (void **)&b->bid_sz,
                    (void **)&b->ask_sz, (void **)&b->trade_px, (void **)&b->trade_sz};
    int ok = 1;
    for (size_t c = 0; c < sizeof col / sizeof col[0]; c++) {
        free(*col[c]);
        ok &= (*col[c] = malloc(8 * (size_t)n)) != NULL;
    }
    free(b->side);
    free(b->extra);
    ok &= (b->side = malloc((size_t)n)) != NULL;
    ok &= (b->extra = malloc(sizeof(float) * (size_t)(n * (b->n_extra ? b->n_extra : 1)))) != NULL;
    p->cap = ok ? n : 0;
    return ok ? M2_OK : m2_fail(M2_EFAIL, "universe (instrument %s): out of memory for a block", b->instrument);
}

/* The block's rows as m2_dataset_check wants them: one session, the whole block "train". */
static void block_layout(inst_pass *p, int64_t n)
{
    p->blk.n_rows = n;
    p->blk.sessions[1] = n;
    for (int k = 0; k < 3; k++) p->blk.split[k][0] = k ? n : 0, p->blk.split[k][1] = n;
}

/* Rows [b, e) of a train block back from the cache (with their raw rows for CACHE_READ_RAW), at row 0 of blk. */
static int cached_block(inst_pass *p, int64_t b, int64_t e)
{
    m2_dataset *k = &p->blk;
    const int64_t n = e - b;
    const size_t nx = sizeof(float) * (size_t)(n * k->n_features), ny = sizeof(float) * (size_t)(n * k->n_targets);
    if (p->xy_cap < n) {
        free(k->X);
        free(k->y);
        k->X = malloc(sizeof(float) * (size_t)(BLOCK * k->n_features));
        k->y = malloc(sizeof(float) * (size_t)(BLOCK * k->n_targets));
        p->xy_cap = k->X && k->y ? BLOCK : 0;
        if (!p->xy_cap) return m2_fail(M2_EFAIL, "universe (instrument %s): out of memory for a block", k->instrument);
    }
    if (p->cache == CACHE_READ_RAW && (blk_reserve(p, n) || m2_spool_rows(p->sp, p->i, b, e, k))) return M2_EFAIL;
    if (m2_spool_cache_get(p->sp, p->cache_at, k->X, nx) || m2_spool_cache_get(p->sp, p->cache_at + nx, k->y, ny))
        return M2_EFAIL;
    p->cache_at += nx + ny;
    block_layout(p, n);
    return M2_OK;
}

/* The features and targets of rows [b, e) of session [sb, se), at rows [*off, *off + e - b) of p->blk: computed
 * (and with CACHE_WRITE kept in the cache, so the two later passes over the train rows read them back instead of
 * computing the logarithms and sines again) or read back. */
static int compute_block(inst_pass *p, int64_t sb, int64_t se, int64_t b, int64_t e, int64_t *off)
{
    if (p->cache >= CACHE_READ) {
        *off = 0;
        return cached_block(p, b, e);
    }
    int64_t lo = b > sb ? b - 1 : b, hi = se - e > p->reach ? e + p->reach : se;
    if (blk_reserve(p, hi - lo) || m2_spool_rows(p->sp, p->i, lo, hi, &p->blk)) return M2_EFAIL;
    block_layout(p, hi - lo);
    *off = b - lo;
    if (m2_features_compute(&p->blk, p->o)) return M2_EFAIL;
    p->xy_cap = hi - lo;
    if (p->cache != CACHE_WRITE) return M2_OK;
    const m2_dataset *k = &p->blk;
    const size_t nx = sizeof(float) * (size_t)((e - b) * k->n_features);
    const size_t ny = sizeof(float) * (size_t)((e - b) * k->n_targets);
    if (m2_spool_cache_put(p->sp, p->cache_at, k->X + *off * k->n_features, nx) ||
        m2_spool_cache_put(p->sp, p->cache_at + nx, k->y + *off * k->n_targets, ny))
        return M2_EFAIL;
    p->cache_at += nx + ny;
    return M2_OK;
}

typedef int (*block_fn)(inst_pass *p, int64_t off, int64_t n, int64_t session_row, void *ctx);

/* fn on every block of every session of split k, in row order; session_row is the block's first row in the
 * instrument when it begins a session, else -1. */
static int each_block(inst_pass *p, int k, block_fn fn, void *ctx)
{
    for (int64_t s = 0; s < p->idx.n_sessions; s++) {
        int64_t sb, se, off;
        m2_dataset_session_part(&p->idx, k, s, &sb, &se);
        for (int64_t b = sb; b < se; b += BLOCK) {
            int64_t e = se - b > BLOCK ? b + BLOCK : se;
            if (compute_block(p, sb, se, b, e, &off) || fn(p, off, e - b, b == sb ? b : -1, ctx)) return M2_EFAIL;
        }
    }
    return M2_OK;
}

typedef struct {
    double sum[M2_MAX_FEATURES], ss[M2_MAX_FEATURES], mean[M2_MAX_FEATURES];
} moments;

static int add_sum(inst_pass *p, int64_t off, int64_t n, int64_t session_row, void *ctx)
{
    (void)session_row;
    moments *m = ctx;
    const int F = p->blk.n_features;
    for (int64_t r = off; r < off + n; r++)
        for (int j = 0; j < F; j++) m->sum[j] += p->blk.X[r * F + j];
    return M2_OK;
}

static int add_square(inst_pass *p, int64_t off, int64_t n, int64_t session_row, void *ctx)
{
    (void)session_row;
    moments *m = ctx;
    const int F = p->blk.n_features;
    for (int64_t r = off; r < off + n; r++)
        for (int j = 0; j < F; j++) {
            double d = p->blk.X[r * F + j] - m->mean[j];
            m->ss[j] += d * d;
        }
    return M2_OK;
}

/* The train statistics into p->blk.mean and std, by the rule of m2_features_normalise. */
static int train_stats(inst_pass *p, int64_t n_train)
{
    moments m;
    memset(&m, 0, sizeof m);
    p->cache = CACHE_WRITE;
    p->cache_at = 0;
    if (each_block(p, M2_SPLIT_TRAIN, add_sum, &m)) return M2_EFAIL;
    for (int j = 0; j < M2_MAX_FEATURES; j++) m.mean[j] = m.sum[j] / (double)n_train;
    p->cache = CACHE_READ;
    p->cache_at = 0;
    if (each_block(p, M2_SPLIT_TRAIN, add_square, &m)) return M2_EFAIL;
    for (int j = 0; j < p->blk.n_features; j++) {
        double sd = sqrt(m.ss[j] / (double)n_train);
        p->blk.mean[j] = m.mean[j];
        p->blk.std[j] = sd > 1e-9 * fmax(1.0, fabs(m.mean[j])) ? sd : 1.0;
    }
    return M2_OK;
}

typedef struct {
    m2_dataset_writer *dw;
    int64_t *at;
    m2_session_list *l;
    int inst;
    double mean[M2_MAX_FEATURES], std[M2_MAX_FEATURES];
} placing;

/* Normalises, checks (what the file's reader checks of X and y) and writes one block. */
static int put_block(inst_pass *p, int64_t off, int64_t n, int64_t session_row, void *ctx)
{
    placing *w = ctx;
    m2_features_apply(&p->blk, w->mean, w->std, p->o->clip);
    if (m2_dataset_check(&p->blk, p->blk.instrument) || m2_dataset_writer_put(w->dw, *w->at, &p->blk, off, off + n))
        return M2_EFAIL;
    if (session_row >= 0 && m2_session_list_add(w->l, *w->at, w->inst)) return M2_EFAIL;
    *w->at += n;
    return M2_OK;
}

/* Instrument i's statistics into the index; the first also names the columns. */
static void describe(m2_dataset *meta, const m2_dataset *ev, int i, int n)
{
    const int F = ev->n_features;
    if (i == 0) {
        memcpy(meta->feature_names, ev->feature_names, sizeof meta->feature_names);
        memcpy(meta->horizons, ev->horizons, sizeof meta->horizons);
        meta->clip = ev->clip;
        meta->tick_size = ev->tick_size;
        snprintf(meta->instrument, sizeof meta->instrument, "%s", n == 1 ? ev->instrument : "universe");
        /* Stored rows are already z-scored per instrument: the root statistics are the identity, and a universe
         * of one keeps its instrument's (as a file of version 1 has them). */
        for (int j = 0; j < F; j++) {
            meta->mean[j] = n == 1 ? ev->mean[j] : 0.0;
            meta->std[j] = n == 1 ? ev->std[j] : 1.0;
        }
    }
    snprintf(meta->inst_name[i], sizeof meta->inst_name[i], "%s", ev->instrument);
    memcpy(meta->inst_mean + i * M2_MAX_FEATURES, ev->mean, sizeof(double) * (size_t)F);
    memcpy(meta->inst_std + i * M2_MAX_FEATURES, ev->std, sizeof(double) * (size_t)F);
    meta->inst_tick[i] = ev->tick_size;
}

static int open_pass(inst_pass *p, const int64_t count[3])
{
    const m2_spooled *s = &p->sp->inst[p->i];
    p->idx.n_rows = s->rows;
    p->idx.n_sessions = s->sessions;
    p->blk.n_extra = s->n_extra;
    p->blk.tick_size = s->tick;
    p->blk.n_sessions = 1;
    snprintf(p->blk.instrument, sizeof p->blk.instrument, "%s", s->name);
    for (int k = 0; k < p->o->n_horizons; k++)
        if (p->o->horizons[k] > p->reach) p->reach = p->o->horizons[k];
    if (!(p->blk.sessions = calloc(2, sizeof *p->blk.sessions)))
        return m2_fail(M2_EFAIL, "universe (instrument %s): out of memory", s->name);
    if (m2_spool_sessions(p->sp, p->i, &p->idx.sessions)) return M2_EFAIL;
    return m2_features_split_at(&p->idx, count[0], count[0] + count[1]);
}

int m2_universe_put_instrument(const m2_spool *sp, int i, const int64_t count[3], const m2_feature_opts *o,
                               const m2_put_target *t)
{
    inst_pass p;
    memset(&p, 0, sizeof p);
    p.sp = sp;
    p.i = i;
    p.o = o;
    int rc = open_pass(&p, count);
    if (rc == M2_OK && t->mean) {
        memcpy(p.blk.mean, t->mean, sizeof p.blk.mean);
        memcpy(p.blk.std, t->std, sizeof p.blk.std);
    } else if (rc == M2_OK) {
        rc = train_stats(&p, count[0]);
    }
    placing w = {.dw = t->dw, .inst = t->inst};
    memcpy(w.mean, p.blk.mean, sizeof w.mean);
    memcpy(w.std, p.blk.std, sizeof w.std);
    for (int k = 0; rc == M2_OK && k < 3; k++) {
        w.at = &t->at[k];
        w.l = &t->l[k];
        p.cache = k == M2_SPLIT_TRAIN && !t->mean ? CACHE_READ_RAW : CACHE_OFF; /* train_stats filled the cache */
        p.cache_at = 0;
        rc = each_block(&p, k, put_block, &w);
    }
    if (rc == M2_OK && t->meta) describe(t->meta, &p.blk, i, t->n);
    m2_dataset_free(&p.idx);
    m2_dataset_free(&p.blk);
    return rc;
}
