/* Input lists and the universe import (import_files.h). */
#include "io/import_files.h"

#include <ctype.h>
#include <dirent.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/error.h"
#include "io/universe.h"

static int ends_with(const char *s, const char *tail)
{
    size_t n = strlen(s), t = strlen(tail);
    return n >= t && strcmp(s + n - t, tail) == 0;
}

static int is_csv(const char *name) { return ends_with(name, ".csv") || ends_with(name, ".csv.gz"); }

/* "20240102" or "2024-01-02" (month 1-12, day 1-31) as 20240102; 0 otherwise. */
static int parse_date(const char *s, size_t n)
{
    char d[9];
    if (n == 8) {
        memcpy(d, s, 8);
    } else if (n == 10 && s[4] == '-' && s[7] == '-') {
        memcpy(d, s, 4);
        memcpy(d + 4, s + 5, 2);
        memcpy(d + 6, s + 8, 2);
    } else {
        return 0;
    }
    for (int i = 0; i < 8; i++)
        if (!isdigit((unsigned char)d[i])) return 0;
    d[8] = '\0';
    int v = atoi(d), month = v / 100 % 100, day = v % 100;
    return month >= 1 && month <= 12 && day >= 1 && day <= 31 ? v : 0;
}

/* TICKER_YYYY-MM-DD_START_END_message_N.csv: the ticker and the date. */
static int lobster_name(const char *b, char instrument[64], int *date)
{
    const char *u = strchr(b, '_');
    size_t n = u ? (size_t)(u - b) : 0;
    *date = u ? parse_date(u + 1, 10) : 0;
    if (n == 0 || n >= 64)
        return m2_fail(M2_EUSAGE, "LOBSTER (%s): the ticker part of the file name has %zu characters, need 1..63", b,
                       n);
    memcpy(instrument, b, n);
    instrument[n] = '\0';
    return M2_OK;
}

int m2_file_name_parse(const char *path, char instrument[64], int *date)
{
    const char *b = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    if (m2_lobster_is_message(path)) return lobster_name(b, instrument, date);
    size_t n = strlen(b);
    if (ends_with(b, ".gz")) n -= 3;
    if (n >= 4 && strncmp(b + n - 4, ".csv", 4) == 0) n -= 4;
    const char *us = NULL;
    for (size_t i = 0; i < n; i++)
        if (b[i] == '_') us = b + i;
    *date = us ? parse_date(us + 1, n - (size_t)(us + 1 - b)) : 0;
    if (*date) n = (size_t)(us - b);
    if (n == 0 || n >= 64)
        return m2_fail(M2_EUSAGE,
                       "import (%s): the instrument part of the file name has %zu characters, "
                       "need 1..63",
                       path, n);
    memcpy(instrument, b, n);
    instrument[n] = '\0';
    return M2_OK;
}

static int add_path(m2_file_list *l, int *cap, const char *path)
{
    const char *b = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    if (strstr(b, "_orderbook_")) return M2_OK; /* read with its message file */
    if (l->n == *cap) {
        int c = *cap ? 2 * *cap : 64;
        char **p = realloc(l->path, sizeof *p * (size_t)c);
        if (!p) return m2_fail(M2_EFAIL, "import: out of memory for the file list");
        l->path = p;
        *cap = c;
    }
    if (!(l->path[l->n] = strdup(path))) return m2_fail(M2_EFAIL, "import: out of memory for the file list");
    l->n++;
    return M2_OK;
}

static int add_folder(m2_file_list *l, int *cap, const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return m2_fail(M2_EFAIL, "import (%s): cannot open the folder", dir);
    int rc = M2_OK, before = l->n;
    char path[4096];
    for (struct dirent *e; rc == M2_OK && (e = readdir(d));)
        if (e->d_name[0] != '.' && is_csv(e->d_name)) {
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            rc = add_path(l, cap, path);
        }
    closedir(d);
    if (rc == M2_OK && l->n == before)
        rc = m2_fail(M2_EFAIL, "import (%s): no .csv or .csv.gz file in the folder", dir);
    return rc;
}

static int add_input(m2_file_list *l, int *cap, const char *in)
{
    struct stat st;
    if (stat(in, &st) == 0) return S_ISDIR(st.st_mode) ? add_folder(l, cap, in) : add_path(l, cap, in);
    glob_t g;
    int rc = glob(in, 0, NULL, &g);
    if (rc != 0) {
        if (rc != GLOB_NOMATCH) globfree(&g);
        return m2_fail(M2_EFAIL, "import (%s): no such file, folder or matching file", in);
    }
    rc = M2_OK;
    for (size_t i = 0; rc == M2_OK && i < g.gl_pathc; i++) rc = add_path(l, cap, g.gl_pathv[i]);
    globfree(&g);
    return rc;
}

typedef struct {
    char *path;
    char instrument[64];
    int date;
} entry;

static int cmp_entry(const void *a, const void *b)
{
    const entry *x = a, *y = b;
    int c = strcmp(x->instrument, y->instrument);
    if (c == 0) c = (x->date > y->date) - (x->date < y->date);
    return c ? c : strcmp(x->path, y->path);
}

/* Each instrument with several files must have one dated file per day, and daily files (any name with a date)
 * mean every file must be one: a name without its day is a mistake, not another instrument. */
static int check_days(const entry *e, int n)
{
    int dated = 0;
    for (int i = 0; i < n; i++) dated |= e[i].date != 0;
    for (int i = 0; dated && i < n; i++)
        if (e[i].date == 0)
            return m2_fail(M2_EUSAGE,
                           "import (%s): file name has no date (NAME_YYYYMMDD.csv[.gz] or "
                           "NAME_YYYY-MM-DD), but other inputs are daily files",
                           e[i].path);
    for (int i = 0; i + 1 < n; i++) {
        if (strcmp(e[i].instrument, e[i + 1].instrument) != 0) continue;
        const entry *bad = e[i].date == 0 ? &e[i] : e[i + 1].date == 0 ? &e[i + 1] : NULL;
        if (bad)
            return m2_fail(M2_EUSAGE,
                           "import (%s): file name has no date (NAME_YYYYMMDD.csv[.gz] or "
                           "NAME_YYYY-MM-DD): instrument %s has several files, so each needs its day",
                           bad->path, bad->instrument);
        if (e[i].date == e[i + 1].date)
            return m2_fail(M2_EUSAGE, "import (%s): same day %d as %s for instrument %s", e[i + 1].path, e[i].date,
                           e[i].path, e[i].instrument);
    }
    return M2_OK;
}

static int sort_list(m2_file_list *l, const m2_import_opts *o)
{
    entry *e = calloc((size_t)l->n, sizeof *e);
    l->instrument = calloc((size_t)l->n, sizeof *l->instrument);
    l->date = calloc((size_t)l->n, sizeof *l->date);
    if (!e || !l->instrument || !l->date) {
        free(e);
        return m2_fail(M2_EFAIL, "import: out of memory for the file list");
    }
    int rc = M2_OK;
    for (int i = 0; rc == M2_OK && i < l->n; i++) {
        e[i].path = l->path[i];
        rc = m2_file_name_parse(l->path[i], e[i].instrument, &e[i].date);
        if (o->instrument) snprintf(e[i].instrument, sizeof e[i].instrument, "%s", o->instrument);
    }
    if (rc == M2_OK) {
        qsort(e, (size_t)l->n, sizeof *e, cmp_entry);
        rc = check_days(e, l->n);
    }
    for (int i = 0; i < l->n; i++) {
        l->path[i] = e[i].path;
        memcpy(l->instrument[i], e[i].instrument, sizeof e[i].instrument);
        l->date[i] = e[i].date;
    }
    free(e);
    return rc;
}

int m2_file_list_expand(const char *const *inputs, int n, const m2_import_opts *o, m2_file_list *list)
{
    memset(list, 0, sizeof *list);
    int cap = 0, rc = M2_OK;
    for (int i = 0; rc == M2_OK && i < n; i++) rc = add_input(list, &cap, inputs[i]);
    if (rc == M2_OK && list->n == 0) rc = m2_fail(M2_EUSAGE, "import: no input files");
    if (rc == M2_OK) rc = sort_list(list, o);
    if (rc) m2_file_list_free(list);
    return rc;
}

void m2_file_list_free(m2_file_list *list)
{
    for (int i = 0; list->path && i < list->n; i++) free(list->path[i]);
    free(list->path);
    free(list->instrument);
    free(list->date);
    memset(list, 0, sizeof *list);
}

static void add_report(m2_import_report *sum, const m2_import_report *r)
{
    sum->lines += r->lines;
    sum->rows += r->rows;
    for (int i = 0; i < r->n_listed && sum->n_listed < M2_IMPORT_LISTED; i++) {
        sum->bad_line[sum->n_listed] = r->bad_line[i];
        memcpy(sum->bad_why[sum->n_listed++], r->bad_why[i], sizeof r->bad_why[i]);
    }
    sum->bad += r->bad;
    sum->tick_inferred |= r->tick_inferred;
}

typedef struct {
    const m2_file_list *list;
    const m2_import_opts *o;
    int *first; /* [n_instruments + 1]: instrument k's files are list entries [first[k], first[k+1]) */
    m2_import_report *rep;
} import_ctx;

/* Instrument k's files read one after the other, its rows emitted in pieces (m2_import_events_pieces), so pass 1
 * holds one piece of rows, not a file, a session or the instrument. */
static int import_source(void *ctx, int k, m2_universe_emit emit, void *sink)
{
    import_ctx *c = ctx;
    m2_import_opts one = *c->o;
    m2_import_report r;
    int a = c->first[k];
    one.instrument = c->list->instrument[a];
    int rc = m2_import_events_pieces((const char *const *)c->list->path + a, c->first[k + 1] - a, &one, emit, sink, &r);
    add_report(c->rep, &r);
    return rc;
}

int m2_import_universe(const m2_file_list *list, const m2_import_opts *o, const char *path, m2_dataset *meta,
                       m2_import_report *rep)
{
    memset(rep, 0, sizeof *rep);
    memset(meta, 0, sizeof *meta);
    int n_inst = 0;
    int *first = malloc(sizeof *first * (size_t)(list->n + 1));
    if (!first) return m2_fail(M2_EFAIL, "import (%d files): out of memory", list->n);
    for (int i = 0; i < list->n; i++)
        if (i == 0 || strcmp(list->instrument[i], list->instrument[i - 1]) != 0) first[n_inst++] = i;
    first[n_inst] = list->n;
    char source[64];
    snprintf(source, sizeof source, "import %d instruments, %d files", n_inst, list->n);
    import_ctx c = {list, o, first, rep};
    int rc = m2_universe_write(path, n_inst, import_source, &c, &o->feat, n_inst > 1 ? source : NULL, meta);
    free(first);
    return rc;
}

typedef struct {
    const char *csv;
    const m2_import_opts *o;
    m2_import_report *rep;
} one_ctx;

static int one_source(void *ctx, int k, m2_universe_emit emit, void *sink)
{
    (void)k;
    one_ctx *c = ctx;
    return m2_import_events_pieces(&c->csv, 1, c->o, emit, sink, c->rep);
}

int m2_import_one(const char *csv, const m2_import_opts *o, const char *path, m2_dataset *meta, m2_import_report *rep)
{
    memset(rep, 0, sizeof *rep);
    one_ctx c = {csv, o, rep};
    return m2_universe_write_one(path, one_source, &c, &o->feat, NULL, NULL, meta);
}
