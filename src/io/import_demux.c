/* Splitting multi-instrument files (import_demux.h). */
#include "io/import_demux.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include <zlib.h>

#include "base/error.h"
#include "base/hash.h"
#include "io/import_rows.h"
#include "io/universe.h"

#define PART_BUFFER   (64 << 10)
#define ORIGIN_BUFFER 1024 /* line origins buffered per instrument (8 KiB) */
#define LINE_BITS     40   /* an origin: the input's index << LINE_BITS | its line number */

typedef struct {
    char name[64];
    char path[4200];
    char *buf;
    size_t used;
    uint64_t org[ORIGIN_BUFFER]; /* where the buffered lines came from, bound for the part's .lines file */
    int n_org;
} part;

typedef struct {
    part *p;
    int n, cap;
    int *slot; /* open-addressing hash of the names: index into p, -1 empty */
    int slots;
} parts;

static uint64_t hash(const char *s, size_t n) { return m2_fnv1a(s, n, M2_FNV_INIT); }

static int flush_part(part *q, const char *header)
{
    if (q->used == 0) return M2_OK;
    int fresh = access(q->path, F_OK) != 0;
    FILE *f = fopen(q->path, "a");
    int ok = f && (!fresh || fputs(header, f) >= 0) && fwrite(q->buf, 1, q->used, f) == q->used;
    if (f && fclose(f) != 0) ok = 0;
    q->used = 0;
    return ok ? M2_OK : m2_fail(M2_EFAIL, "import (%s): cannot write: %s", q->path, strerror(errno));
}

/* The part's .lines file, next to it: one origin (8 bytes) per data line, in the part's order. */
static void lines_path(const char *part_path, char *out, size_t cap)
{
    size_t n = strlen(part_path) > 4 ? strlen(part_path) - 4 : 0; /* without ".csv" */
    snprintf(out, cap, "%.*s.lines", (int)n, part_path);
}

static int flush_origins(part *q)
{
    if (q->n_org == 0) return M2_OK;
    char path[4300];
    lines_path(q->path, path, sizeof path);
    FILE *f = fopen(path, "ab");
    int ok = f && fwrite(q->org, sizeof q->org[0], (size_t)q->n_org, f) == (size_t)q->n_org;
    if (f && fclose(f) != 0) ok = 0;
    q->n_org = 0;
    return ok ? M2_OK : m2_fail(M2_EFAIL, "import (%s): cannot write: %s", path, strerror(errno));
}

static int rehash(parts *ps)
{
    int slots = ps->slots ? 2 * ps->slots : 256;
    int *s = malloc(sizeof *s * (size_t)slots);
    if (!s) return m2_fail(M2_EFAIL, "import: out of memory for the instruments");
    for (int i = 0; i < slots; i++) s[i] = -1;
    for (int k = 0; k < ps->n; k++) {
        size_t h = (size_t)(hash(ps->p[k].name, strlen(ps->p[k].name)) % (uint64_t)slots);
        while (s[h] >= 0) h = (h + 1) % (size_t)slots;
        s[h] = k;
    }
    free(ps->slot);
    ps->slot = s;
    ps->slots = slots;
    return M2_OK;
}

/* The part of instrument `name` (n characters), made on first sight. */
static part *find_part(parts *ps, const char *name, size_t n, const char *folder)
{
    if (2 * (ps->n + 1) > ps->slots && rehash(ps)) return NULL;
    size_t h = (size_t)(hash(name, n) % (uint64_t)ps->slots);
    for (; ps->slot[h] >= 0; h = (h + 1) % (size_t)ps->slots) {
        part *q = &ps->p[ps->slot[h]];
        if (strncmp(q->name, name, n) == 0 && q->name[n] == '\0') return q;
    }
    if (ps->n == ps->cap) {
        int c = ps->cap ? 2 * ps->cap : 64;
        part *p = realloc(ps->p, sizeof *p * (size_t)c);
        if (!p) return m2_fail(M2_EFAIL, "import: out of memory for the instruments"), NULL;
        ps->p = p;
        ps->cap = c;
    }
    part *q = &ps->p[ps->n];
    memset(q, 0, sizeof *q);
    memcpy(q->name, name, n);
    snprintf(q->path, sizeof q->path, "%s/%d.csv", folder, ps->n);
    if (!(q->buf = malloc(PART_BUFFER))) return m2_fail(M2_EFAIL, "import: out of memory for the instruments"), NULL;
    ps->slot[h] = ps->n++;
    return q;
}

/* Field `col` of a CSV line (unquoted, blanks trimmed): its start and length; -1 when the line is shorter. */
static int field(const char *line, int col, const char **start, size_t *len)
{
    const char *p = line;
    for (int i = 0; i < col; i++) {
        int quoted = 0;
        for (; *p && (quoted || *p != ','); p++)
            if (*p == '"') quoted = !quoted;
        if (*p != ',') return -1;
        p++;
    }
    const char *e = p;
    int quoted = 0;
    for (; *e && *e != '\n' && *e != '\r' && (quoted || *e != ','); e++)
        if (*e == '"') quoted = !quoted;
    while (p < e && (*p == ' ' || *p == '\t' || *p == '"')) p++;
    while (e > p && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '"')) e--;
    *start = p;
    *len = (size_t)(e - p);
    return 0;
}

static int header_column(const char *header, const char *column, const char *path)
{
    for (int c = 0;; c++) {
        const char *s;
        size_t n;
        if (field(header, c, &s, &n)) break;
        if (n >= 3 && strncmp(s, "\xef\xbb\xbf", 3) == 0) s += 3, n -= 3; /* UTF-8 BOM */
        if (n == strlen(column) && strncasecmp(s, column, n) == 0) return c;
    }
    m2_fail(M2_EUSAGE, "import (%s): no column %s in the header (--instrument-column)", path, column);
    return -1;
}

/* Streams one input file into its instruments' parts (an instrument of several files continues its part). */
static int split_file(const char *path, int input, const char *column, const char *folder, parts *ps,
                      char **first_header, const char **first_path)
{
    gzFile in = gzopen(path, "rb");
    if (!in) return m2_fail(M2_EFAIL, "import (%s): %s", path, strerror(errno ? errno : ENOMEM));
    gzbuffer(in, 1 << 18);
    char *line = NULL, *header = NULL;
    size_t cap = 0;
    ssize_t len;
    int64_t lineno = 0;
    int col = -1, rc = M2_OK;
    while (rc == M2_OK && (len = m2_gz_line(in, &line, &cap)) >= 0) {
        lineno++;
        if (strspn(line, " \t\r\n") == (size_t)len) continue;
        if (!header) {
            if (!(header = malloc((size_t)len + 2))) rc = m2_fail(M2_EFAIL, "import: out of memory");
            if (rc == M2_OK) snprintf(header, (size_t)len + 2, "%s%s", line, line[len - 1] == '\n' ? "" : "\n");
            if (rc == M2_OK && (col = header_column(header, column, path)) < 0) rc = M2_EUSAGE;
            /* lines are copied unparsed under the first file's header, so every file must have that header */
            if (rc == M2_OK && *first_header && strcmp(header, *first_header) != 0)
                rc = m2_fail(M2_EUSAGE,
                             "import (%s): header differs from that of %s (--instrument-column needs one "
                             "header for all files)",
                             path, *first_path);
            continue;
        }
        const char *name;
        size_t n;
        if (field(line, col, &name, &n) || n == 0 || n > 63) {
            rc = m2_fail(M2_EFAIL, "import (%s:%lld): instrument column %s is %s", path, (long long)lineno, column,
                         n > 63 ? "longer than 63 characters" : "missing or empty");
            break;
        }
        part *q = find_part(ps, name, n, folder);
        if (!q) rc = M2_EFAIL;
        if (rc == M2_OK && (size_t)len + 1 > PART_BUFFER)
            rc = m2_fail(M2_EFAIL, "import (%s:%lld): line longer than %d bytes", path, (long long)lineno, PART_BUFFER);
        if (rc == M2_OK && q->used + (size_t)len + 1 > PART_BUFFER) rc = flush_part(q, header);
        if (rc == M2_OK && q->n_org == ORIGIN_BUFFER) rc = flush_origins(q);
        if (rc == M2_OK) {
            memcpy(q->buf + q->used, line, (size_t)len);
            q->used += (size_t)len;
            if (line[len - 1] != '\n') q->buf[q->used++] = '\n';
            q->org[q->n_org++] = (uint64_t)input << LINE_BITS | (uint64_t)lineno;
        }
    }
    int err = Z_OK;
    const char *zmsg = gzerror(in, &err);
    if (rc == M2_OK && err != Z_OK && err != Z_STREAM_END)
        rc = m2_fail(M2_EFAIL, "import (%s): gzip data corrupt or truncated: %s", path, zmsg);
    if (rc == M2_OK && !header) rc = m2_fail(M2_EFAIL, "import (%s): empty file", path);
    for (int k = 0; rc == M2_OK && k < ps->n; k++)
        if ((rc = flush_part(&ps->p[k], header)) == M2_OK) rc = flush_origins(&ps->p[k]);
    free(line);
    if (rc == M2_OK && !*first_header) {
        *first_header = header;
        *first_path = path;
    } else {
        free(header);
    }
    gzclose(in);
    return rc;
}

static int cmp_part(const void *a, const void *b) { return strcmp(((const part *)a)->name, ((const part *)b)->name); }

/* The new list: one entry per instrument, sorted by name. */
static int take_parts(m2_file_list *list, parts *ps)
{
    qsort(ps->p, (size_t)ps->n, sizeof *ps->p, cmp_part);
    char **path = calloc((size_t)ps->n, sizeof *path);
    char(*inst)[64] = calloc((size_t)ps->n, sizeof *inst);
    int *date = calloc((size_t)ps->n, sizeof *date);
    int rc = path && inst && date ? M2_OK : m2_fail(M2_EFAIL, "import: out of memory for the file list");
    for (int k = 0; rc == M2_OK && k < ps->n; k++) {
        if (!(path[k] = strdup(ps->p[k].path))) rc = m2_fail(M2_EFAIL, "import: out of memory for the file list");
        memcpy(inst[k], ps->p[k].name, sizeof inst[k]);
    }
    if (rc) {
        for (int k = 0; path && k < ps->n; k++) free(path[k]);
        free(path);
        free(inst);
        free(date);
        return rc;
    }
    m2_file_list_free(list);
    list->n = ps->n;
    list->path = path;
    list->instrument = inst;
    list->date = date;
    return M2_OK;
}

int m2_file_list_demux(m2_file_list *list, const char *column, const char *folder)
{
    /* Files are read in date order (then by path), so an instrument's rows reach its part in time order. */
    int *order = malloc(sizeof *order * (size_t)list->n), rc = M2_OK;
    if (!order) return m2_fail(M2_EFAIL, "import: out of memory for the file list");
    for (int i = 0; i < list->n; i++) order[i] = i;
    for (int i = 1; i < list->n; i++) /* insertion sort: lists are short next to the data */
        for (int j = i; j > 0; j--) {
            int a = order[j - 1], b = order[j];
            int c = list->date[a] != list->date[b] ? (list->date[a] > list->date[b]) - (list->date[a] < list->date[b])
                                                   : strcmp(list->path[a], list->path[b]);
            if (c <= 0) break;
            order[j - 1] = b;
            order[j] = a;
        }
    parts ps = {0};
    char *header = NULL;
    const char *header_path = NULL;
    for (int i = 0; rc == M2_OK && i < list->n; i++) {
        const char *path = list->path[order[i]];
        if (m2_lobster_is_message(path))
            rc = m2_fail(M2_EUSAGE, "import (%s): --instrument-column applies to CSV files, not LOBSTER pairs", path);
        if (rc == M2_OK) rc = split_file(path, order[i], column, folder, &ps, &header, &header_path);
    }
    free(header);
    free(order);
    if (rc == M2_OK && ps.n == 0) rc = m2_fail(M2_EFAIL, "import: no data rows in the inputs");
    if (rc == M2_OK) rc = take_parts(list, &ps);
    for (int k = 0; k < ps.n; k++) free(ps.p[k].buf);
    free(ps.p);
    free(ps.slot);
    return rc;
}

void m2_demux_folder_remove(const char *folder)
{
    DIR *d = opendir(folder);
    if (!d) return;
    char path[4400];
    for (struct dirent *e; (e = readdir(d));)
        if (e->d_name[0] != '.') {
            snprintf(path, sizeof path, "%s/%s", folder, e->d_name);
            unlink(path);
        }
    closedir(d);
    rmdir(folder);
}

/* The inputs before the split, for bad rows' origins (m2_import_opts.origin). */
typedef struct {
    char **path;
    int n;
} inputs;

/* Data line `line` of a part (line 1 is its header) is entry line - 2 of its .lines file. */
static int part_origin(void *ctx, const char *file, int64_t line, char *name, size_t cap, int64_t *orig_line)
{
    const inputs *in = ctx;
    char path[4300];
    lines_path(file, path, sizeof path);
    uint64_t org = 0;
    FILE *f = line >= 2 ? fopen(path, "rb") : NULL;
    int ok = f && fseeko(f, (off_t)(8 * (line - 2)), SEEK_SET) == 0 && fread(&org, sizeof org, 1, f) == 1;
    if (f) fclose(f);
    int k = (int)(org >> LINE_BITS);
    if (!ok || k >= in->n) return M2_EFAIL;
    snprintf(name, cap, "%s", in->path[k]);
    *orig_line = (int64_t)(org & ((1ULL << LINE_BITS) - 1));
    return M2_OK;
}

int m2_import_universe_by_column(m2_file_list *list, const m2_import_opts *o, const char *path, m2_dataset *meta,
                                 m2_import_report *rep)
{
    memset(rep, 0, sizeof *rep);
    memset(meta, 0, sizeof *meta);
    char folder[4200];
    inputs in = {calloc((size_t)list->n, sizeof(char *)), list->n};
    int rc = in.path ? M2_OK : m2_fail(M2_EFAIL, "import: out of memory for the file list");
    for (int i = 0; rc == M2_OK && i < in.n; i++)
        if (!(in.path[i] = strdup(list->path[i]))) rc = m2_fail(M2_EFAIL, "import: out of memory for the file list");
    snprintf(folder, sizeof folder, "%s.parts.XXXXXX", path);
    if (rc == M2_OK && !mkdtemp(folder))
        rc = m2_fail(M2_EFAIL, "import (%s): cannot create a folder: %s", folder, strerror(errno));
    else if (rc == M2_OK) {
        m2_import_opts by_part = *o;
        by_part.origin = part_origin;
        by_part.origin_ctx = &in;
        rc = m2_file_list_demux(list, o->instrument_column, folder);
        if (rc == M2_OK) rc = m2_import_universe(list, &by_part, path, meta, rep);
        m2_demux_folder_remove(folder);
    }
    for (int i = 0; in.path && i < in.n; i++) free(in.path[i]);
    free(in.path);
    return rc;
}
