/* Snapshots of one stream's recurrent state (mamba2_stream.h: m2_stream_snapshot, m2_stream_restore; the format is
 * docs/FORMATS.md "Stream state snapshots"). The state goes out in a canonical order, free of the engine's padding
 * and ring position, behind a header naming the model it belongs to, so that a trading process can restart
 * mid-session, or hand a stream to a standby process, without replaying the session's ticks; a snapshot restores
 * into any handle opened from the same parameters (fp32 or bf16 weights, any CPU level: the state is fp32 in all). */
#include "stream/engine.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "base/error.h"
#include "base/hash.h"

enum { SNAPSHOT_VERSION = 1 };
static const char SNAPSHOT_MAGIC[8] = "M2STATE"; /* with its terminating zero: 8 bytes */

typedef struct {
    char magic[8];        /* SNAPSHOT_MAGIC */
    uint32_t version;     /* SNAPSHOT_VERSION */
    int32_t dims[8];      /* D, L, Di, H, P, N, G, K of the model */
    uint32_t reserved;    /* 0 */
    uint64_t fingerprint; /* m2_hash64 of the model's parameters */
    uint64_t checksum;    /* m2_hash64 of the payload and the last event */
} snapshot_header;
_Static_assert(sizeof(snapshot_header) == 64, "the header's layout is the file format's");

/* The featuriser's memory of the stream (m2_stream_features), after the payload. */
typedef struct {
    int64_t ts_ns;
    double bid_px, ask_px, bid_sz, ask_sz, trade_sz;
    int32_t side;
    uint32_t has_last; /* 0: no previous event (the next starts a session), 1: the fields above are it */
    uint64_t reserved; /* 0 */
} snapshot_event;
_Static_assert(sizeof(snapshot_event) == 64, "the block's layout is the file format's");

static const char *const DIM_NAMES[8] = {"D", "L", "Di", "H", "P", "N", "G", "K"};

static void model_dims(const m2_dims *d, int32_t dims[8])
{
    const int32_t v[8] = {d->D, d->L, d->Di, d->H, d->P, d->N, d->G, d->K};
    memcpy(dims, v, sizeof v);
}

/* Floats of the payload: per layer, the conv window (K-1 rows of Cc channels) and S (H N rows of P). */
static size_t payload_floats(const m2_dims *d)
{
    return (size_t)d->L * ((size_t)(d->K - 1) * d->Cc + (size_t)d->H * d->N * d->P);
}

/* Bytes the checksum covers: the payload, then the featuriser's block. */
static size_t body_bytes(const m2_dims *d) { return payload_floats(d) * sizeof(float) + sizeof(snapshot_event); }

size_t m2_stream_snapshot_bytes(const m2_stream *s) { return sizeof(snapshot_header) + body_bytes(m2_stream_dims(s)); }

/* Between the engine's state of a stream and a payload in canonical order, per layer: the conv window's rows
 * oldest first, then S's rows (h, n) of P values. save != 0: state -> payload, else payload -> state (the ring rows
 * refilled from the same position, so the stream's position stays valid). The payload is bytes: a caller's buffer
 * need not be aligned for floats. */
static void copy_state(const m2_dims *d, m2s_state_view v, unsigned char *payload, int save)
{
    const int rows = d->K - 1;
    const size_t ring_row = (size_t)d->Cc * sizeof(float), s_row = (size_t)d->P * sizeof(float);
    unsigned char *p = payload;
    for (int l = 0; l < d->L; l++) {
        float *ring = v.state + (size_t)l * v.layer_stride, *S = ring + (size_t)rows * v.ldc;
        for (int r = 0; r < rows; r++, p += ring_row) {
            float *row = ring + (size_t)((*v.pos + r) % rows) * v.ldc;
            memcpy(save ? (void *)p : (void *)row, save ? (void *)row : (void *)p, ring_row);
        }
        for (int hn = 0; hn < d->H * d->N; hn++, p += s_row) {
            float *row = S + (size_t)hn * v.ldp;
            memcpy(save ? (void *)p : (void *)row, save ? (void *)row : (void *)p, s_row);
        }
    }
    snapshot_event b;
    if (save) {
        const m2_event *e = v.last_event;
        snapshot_event out = {.ts_ns = e->ts_ns,
                              .bid_px = e->bid_px,
                              .ask_px = e->ask_px,
                              .bid_sz = e->bid_sz,
                              .ask_sz = e->ask_sz,
                              .trade_sz = e->trade_sz,
                              .side = e->side,
                              .has_last = *v.has_last};
        if (!*v.has_last) memset(&out, 0, sizeof out);
        memcpy(p, &out, sizeof out);
    } else {
        memcpy(&b, p, sizeof b);
        m2_event e = {.ts_ns = b.ts_ns,
                      .bid_px = b.bid_px,
                      .ask_px = b.ask_px,
                      .bid_sz = b.bid_sz,
                      .ask_sz = b.ask_sz,
                      .trade_sz = b.trade_sz,
                      .side = b.side};
        *v.last_event = e;
        *v.has_last = (unsigned char)b.has_last;
    }
}

static int check_index(const m2_stream *s, int stream, const char *fn)
{
    if (stream < 0 || stream >= m2_stream_max_streams(s))
        return m2_fail(M2_EUSAGE, "%s (stream): %d is not in [0, %d)", fn, stream, m2_stream_max_streams(s));
    return M2_OK;
}

int m2_stream_snapshot(const m2_stream *s, int stream, void *buf, size_t bytes)
{
    int rc = check_index(s, stream, "m2_stream_snapshot");
    if (rc) return rc;
    const size_t need = m2_stream_snapshot_bytes(s);
    if (!buf || bytes < need)
        return m2_fail(M2_EUSAGE,
                       "m2_stream_snapshot (buffer): %zu bytes, a snapshot of this model takes %zu "
                       "(m2_stream_snapshot_bytes)",
                       buf ? bytes : 0, need);
    const m2_dims *d = m2_stream_dims(s);
    const m2s_state_view v = m2s_state_of(s, stream);
    unsigned char *payload = (unsigned char *)buf + sizeof(snapshot_header);
    copy_state(d, v, payload, 1);
    snapshot_header h = {.version = SNAPSHOT_VERSION, .fingerprint = v.fingerprint};
    memcpy(h.magic, SNAPSHOT_MAGIC, sizeof h.magic);
    model_dims(d, h.dims);
    h.checksum = m2_hash64(payload, body_bytes(d), 0);
    memcpy(buf, &h, sizeof h);
    return M2_OK;
}

/* Whether buf is a snapshot this handle can take: every check before the state is touched. */
static int check_snapshot(const m2_stream *s, const void *buf, size_t bytes)
{
    const char *fn = "m2_stream_restore";
    snapshot_header h;
    if (!buf || bytes < sizeof h)
        return m2_fail(M2_EUSAGE, "%s: %zu bytes, shorter than a snapshot's header (%zu)", fn, buf ? bytes : 0,
                       sizeof h);
    memcpy(&h, buf, sizeof h);
    if (memcmp(h.magic, SNAPSHOT_MAGIC, sizeof h.magic) != 0)
        return m2_fail(M2_EUSAGE, "%s: not a stream snapshot (no M2STATE magic)", fn);
    if (h.version != SNAPSHOT_VERSION)
        return m2_fail(M2_EUSAGE, "%s: snapshot format version %" PRIu32 ", this library reads %d", fn, h.version,
                       SNAPSHOT_VERSION);
    const m2_dims *d = m2_stream_dims(s);
    int32_t mine[8];
    model_dims(d, mine);
    for (int i = 0; i < 8; i++)
        if (h.dims[i] != mine[i])
            return m2_fail(M2_EUSAGE,
                           "%s: the snapshot is of a model with %s = %" PRId32 ", this handle's has %" PRId32, fn,
                           DIM_NAMES[i], h.dims[i], mine[i]);
    const uint64_t fp = m2s_state_of(s, 0).fingerprint;
    if (h.fingerprint != fp)
        return m2_fail(M2_EUSAGE,
                       "%s: the snapshot is of a model with other parameters (fingerprint %016" PRIx64
                       ", this handle's %016" PRIx64 "): another checkpoint of the same shape",
                       fn, h.fingerprint, fp);
    const size_t need = m2_stream_snapshot_bytes(s);
    if (bytes != need)
        return m2_fail(M2_EUSAGE, "%s: %zu bytes, a snapshot of this model has %zu (%s)", fn, bytes, need,
                       bytes < need ? "truncated" : "trailing bytes");
    const unsigned char *payload = (const unsigned char *)buf + sizeof h;
    const size_t n = payload_floats(d);
    if (m2_hash64(payload, body_bytes(d), 0) != h.checksum)
        return m2_fail(M2_EUSAGE, "%s: the snapshot's checksum does not match its contents (corrupted)", fn);
    /* a float is not finite when its exponent bits are all set: one branch-free pass, then the index if any is */
    unsigned any = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t w;
        memcpy(&w, payload + i * sizeof w, sizeof w);
        any |= (w & 0x7f800000u) == 0x7f800000u;
    }
    for (size_t i = 0; any && i < n; i++) {
        float x;
        memcpy(&x, payload + i * sizeof x, sizeof x);
        if (!isfinite(x)) return m2_fail(M2_EUSAGE, "%s: the snapshot holds a non-finite value (float %zu)", fn, i);
    }
    snapshot_event b;
    memcpy(&b, payload + n * sizeof(float), sizeof b);
    const double q[5] = {b.bid_px, b.ask_px, b.bid_sz, b.ask_sz, b.trade_sz};
    int ok = b.has_last <= 1 && b.side >= -1 && b.side <= 1;
    for (int i = 0; i < 4; i++) ok = ok && isfinite(q[i]);
    if (!ok) return m2_fail(M2_EUSAGE, "%s: the snapshot's last event (the featuriser's) is not valid", fn);
    return M2_OK;
}

int m2_stream_restore(m2_stream *s, int stream, const void *buf, size_t bytes)
{
    int rc = check_index(s, stream, "m2_stream_restore");
    if (!rc) rc = check_snapshot(s, buf, bytes);
    if (rc) return rc;
    /* only read in this direction: the const is dropped for copy_state's one signature */
    copy_state(m2_stream_dims(s), m2s_state_of(s, stream), (unsigned char *)buf + sizeof(snapshot_header), 0);
    return M2_OK;
}
