/* Mutations of seed inputs (fuzz.h). Every choice is drawn from the counter-based generator keyed by (seed, case
 * index), so a case is re-created exactly from those two numbers. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/rng.h"
#include "fuzz.h"

/* ---- buffers -------------------------------------------------------------------------------------- */

static void reserve(fuzz_buf *b, size_t n)
{
    if (n <= b->cap) return;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < n) cap *= 2;
    unsigned char *d = realloc(b->data, cap);
    if (!d) {
        fprintf(stderr, "fuzz: out of memory (%zu bytes)\n", cap);
        abort();
    }
    b->data = d;
    b->cap = cap;
}

void fuzz_buf_put(fuzz_buf *b, const void *p, size_t n)
{
    reserve(b, b->len + n + 1);
    if (n) memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = 0; /* text readers may take the buffer as a string */
}

void fuzz_buf_free(fuzz_buf *b)
{
    free(b->data);
    memset(b, 0, sizeof *b);
}

int fuzz_buf_read_file(fuzz_buf *b, const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return m2_fail(M2_EFAIL, "fuzz (%s): cannot open", path);
    b->len = 0;
    fuzz_buf_put(b, "", 0);
    unsigned char chunk[65536];
    for (size_t n; (n = fread(chunk, 1, sizeof chunk, f)) > 0;) fuzz_buf_put(b, chunk, n);
    int bad = ferror(f);
    fclose(f);
    return bad ? m2_fail(M2_EFAIL, "fuzz (%s): read error", path) : M2_OK;
}

int fuzz_buf_write_file(const fuzz_buf *b, const char *path)
{
    FILE *f = fopen(path, "wb");
    if (!f) return m2_fail(M2_EFAIL, "fuzz (%s): cannot create", path);
    size_t put = b->len ? fwrite(b->data, 1, b->len, f) : 0;
    int bad = fclose(f) != 0 || put != b->len;
    return bad ? m2_fail(M2_EFAIL, "fuzz (%s): write error", path) : M2_OK;
}

/* ---- mutations ------------------------------------------------------------------------------------ */

/* Tokens that mean something to the text readers: separators, quotes, line ends, a BOM, numbers at and past the
 * limits, non-finite values, section and key syntax, the start of a long line. */
static const char *const text_tokens[] = {",",
                                          "\"",
                                          "\n",
                                          "\r\n",
                                          "\r",
                                          "\t",
                                          " ",
                                          "\0",
                                          "\xEF\xBB\xBF",
                                          "=",
                                          "[",
                                          "]",
                                          ";",
                                          "#",
                                          "-",
                                          "+",
                                          "e",
                                          ".",
                                          "0",
                                          "-1",
                                          "1e308",
                                          "1e-320",
                                          "-0",
                                          "nan",
                                          "inf",
                                          "-inf",
                                          "9223372036854775807",
                                          "9223372036854775808",
                                          "18446744073709551616",
                                          "2147483648",
                                          "0x10",
                                          "1e12",
                                          "1e300",
                                          "2262-04-12T00:00:00Z",
                                          "1969-12-31T23:59:59Z",
                                          "2024-02-30T09:30:00Z",
                                          "+99:99",
                                          "T",
                                          "Z",
                                          "[train]",
                                          "[model]",
                                          "[data]",
                                          "steps",
                                          "seq_len",
                                          "d_model",
                                          "path",
                                          "\"a,b\"",
                                          "\"\"",
                                          "buy",
                                          "sell"};

/* Values that are sizes, counts, offsets and addresses in a binary format's metadata. */
static const uint64_t binary_values[] = {0,
                                         1,
                                         2,
                                         0x7f,
                                         0x80,
                                         0xff,
                                         0x100,
                                         0x7fff,
                                         0xffff,
                                         0x7fffffff,
                                         0x80000000,
                                         0xffffffff,
                                         UINT64_C(1) << 40,
                                         UINT64_C(1) << 61,
                                         UINT64_C(0x7fffffffffffffff),
                                         UINT64_C(0x8000000000000000),
                                         ~UINT64_C(0)};

typedef struct {
    uint64_t key, counter;
} draw;

static uint64_t next(draw *d) { return m2_rng_u64(d->key, d->counter++); }
static size_t below(draw *d, size_t n) { return n ? (size_t)(next(d) % n) : 0; }

/* An offset into a buffer of len bytes; binary formats keep their metadata near the start of the file and of each
 * object, so half the offsets fall in the first 4 KiB. */
static size_t offset(draw *d, size_t len, int binary)
{
    if (binary && (next(d) & 1)) return below(d, len < 4096 ? len : 4096);
    return below(d, len);
}

static void insert(fuzz_buf *b, size_t at, const void *p, size_t n)
{
    reserve(b, b->len + n + 1);
    memmove(b->data + at + n, b->data + at, b->len - at);
    memcpy(b->data + at, p, n);
    b->len += n;
    b->data[b->len] = 0;
}

static void erase(fuzz_buf *b, size_t at, size_t n)
{
    if (at + n > b->len) n = b->len - at;
    memmove(b->data + at, b->data + at + n, b->len - at - n);
    b->len -= n;
    b->data[b->len] = 0;
}

/* One mutation of b. */
static void mutate_once(draw *d, fuzz_buf *b, int binary, const fuzz_buf *other)
{
    size_t len = b->len, at = offset(d, len, binary);
    /* An HDF5 file whose length changes fails at H5Fopen (end of file vs the superblock): binary inputs are mostly
     * changed in place, so that cases reach the object headers and the readers' own checks. */
    size_t op = binary && below(d, 8) ? below(d, 3) : below(d, 9);
    switch (op) {
    case 0: /* flip one bit */
        if (len) b->data[at] ^= (unsigned char)(1u << below(d, 8));
        break;
    case 1: /* any byte */
        if (len) b->data[at] = (unsigned char)next(d);
        break;
    case 2: { /* an interesting value of 1, 2, 4 or 8 bytes, little-endian (HDF5's byte order) */
        uint64_t v = binary_values[below(d, sizeof binary_values / sizeof binary_values[0])];
        size_t w = (size_t)1 << below(d, 4);
        for (size_t i = 0; i < w && at + i < len; i++) b->data[at + i] = (unsigned char)(v >> (8 * i));
        break;
    }
    case 3: /* delete a run */ erase(b, at, 1 + below(d, binary ? 64 : 16)); break;
    case 4: { /* insert a token (text) or random bytes (binary) */
        if (!binary) {
            const char *t = text_tokens[below(d, sizeof text_tokens / sizeof text_tokens[0])];
            insert(b, at, t, t[0] ? strlen(t) : 1);
        } else {
            unsigned char r[16];
            size_t n = 1 + below(d, sizeof r);
            for (size_t i = 0; i < n; i++) r[i] = (unsigned char)next(d);
            insert(b, at, r, n);
        }
        break;
    }
    case 5: { /* duplicate a run elsewhere (repeated lines, fields, structures) */
        if (!len) break;
        size_t from = below(d, len), n = 1 + below(d, len - from < 256 ? len - from : 256);
        unsigned char *copy = malloc(n);
        if (!copy) abort();
        memcpy(copy, b->data + from, n);
        insert(b, at, copy, n);
        free(copy);
        break;
    }
    case 6: /* truncate */
        if (len) b->len = below(d, len), b->data[b->len] = 0;
        break;
    case 7: { /* splice: this buffer's head with another seed's tail */
        if (!other->len) break;
        size_t from = below(d, other->len);
        b->len = at;
        fuzz_buf_put(b, other->data + from, other->len - from);
        break;
    }
    case 8: { /* a long run of one byte (long lines, long fields) */
        size_t n = 1 + below(d, binary ? 64 : 4096);
        unsigned char *run = malloc(n);
        if (!run) abort();
        memset(run, binary ? 0 : (int)"a9,\n "[below(d, 5)], n);
        insert(b, at, run, n);
        free(run);
        break;
    }
    }
}

void fuzz_mutate(const fuzz_target *t, const fuzz_buf *seeds, int n_seeds, uint64_t seed, int64_t index, fuzz_buf *out)
{
    draw d = {m2_rng_key(seed, M2_RNG_TEST, (uint64_t)index, 0x66757a7a), 0};
    const fuzz_buf *base = &seeds[below(&d, (size_t)n_seeds)], *other = &seeds[below(&d, (size_t)n_seeds)];
    out->len = 0;
    fuzz_buf_put(out, base->data, base->len);
    int n = 1 + (int)below(&d, t->binary ? 4 : 8);
    for (int i = 0; i < n; i++) mutate_once(&d, out, t->binary, other);
}
