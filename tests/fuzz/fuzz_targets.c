/* The readers fuzzed (fuzz.h): their seeds, made by the project's own writers, and how each case is run. Beyond
 * "no crash", each run checks the error contract (one non-empty line) and, for configs, that whatever loads is
 * written back as text that reloads (what checkpoints store). */
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "base/config.h"
#include "base/error.h"
#include "base/layout.h"
#include "fuzz.h"
#include "io/checkpoint.h"
#include "io/dataset.h"
#include "io/import_csv.h"
#include "io/import_files.h"
#include "io/synth.h"
#include "io/synth_universe.h"
#include "run/config_file.h"

/* A failure must leave exactly one non-empty line (base/error.h); anything else is a finding. */
int64_t fuzz_accepted, fuzz_refused;

static int verdict(int rc, const char *what)
{
    if (rc == M2_OK) {
        fuzz_accepted++;
        return 0;
    }
    const char *msg = m2_last_error();
    fuzz_refused++;
    if (getenv("FUZZ_VERBOSE")) fprintf(stderr, "refused: %s\n", msg);
    if ((rc == M2_EUSAGE || rc == M2_EFAIL) && msg && *msg && !strchr(msg, '\n')) return 0;
    fprintf(stderr, "fuzz: %s failed (code %d) without one line of message: \"%s\"\n", what, rc, msg ? msg : "");
    return -1;
}

static void add_seed(fuzz_buf *seeds, int cap, int *n, const void *p, size_t len)
{
    if (*n >= cap) return;
    memset(&seeds[*n], 0, sizeof seeds[*n]);
    fuzz_buf_put(&seeds[*n], p, len);
    (*n)++;
}

static int add_seed_file(fuzz_buf *seeds, int cap, int *n, const char *path)
{
    if (*n >= cap) return M2_OK;
    memset(&seeds[*n], 0, sizeof seeds[*n]);
    if (fuzz_buf_read_file(&seeds[*n], path)) return M2_EFAIL;
    (*n)++;
    return M2_OK;
}

static int add_seed_gz(fuzz_buf *seeds, int cap, int *n, const char *path)
{
    gzFile in = gzopen(path, "rb");
    if (!in) return m2_fail(M2_EFAIL, "fuzz (%s): cannot open", path);
    if (*n < cap) {
        memset(&seeds[*n], 0, sizeof seeds[*n]);
        char chunk[65536];
        for (int k; (k = gzread(in, chunk, sizeof chunk)) > 0;) fuzz_buf_put(&seeds[*n], chunk, (size_t)k);
        (*n)++;
    }
    gzclose(in);
    return M2_OK;
}

static void small_synth(m2_synth_opts *o, int64_t ticks, int sessions, uint64_t seed)
{
    m2_synth_defaults(o);
    o->ticks = ticks;
    o->sessions = sessions;
    o->seed = seed;
}

/* ---- CSV import ----------------------------------------------------------------------------------- */

static int csv_seeds(fuzz_buf *seeds, int cap, int *n, const char *work)
{
    static const char quotes[] = "ts,bid,ask,bid_size,ask_size,venue\n"
                                 "2024-01-02T09:30:00Z,100.00,100.02,300,200,X\n"
                                 "2024-01-02T09:30:00.5Z,100.01,100.02,100,200,X\n"
                                 "1704187801000000000,100.01,100.03,100,200,X\n"
                                 "\"2024-01-02T09:30:08Z\",\"100.02\",100.04,100,200,\"a, b\"\n"
                                 "2024-01-03T09:30:00+01:00,100.02,100.04,100,200,X\r\n"
                                 "2024-01-03T09:30:02-0500,100.03,100.05,100,200,X\n";
    static const char trades[] = "ts,price,size,side\n"
                                 "2024-01-02 09:30:00.000000001,50.5,10,buy\n"
                                 "2024-01-02 09:30:01,50.6,,S\n"
                                 "2024-01-02 09:30:02,50.4,3,\n"
                                 "2024-01-02 09:30:03,50.5,1,-1\n";
    add_seed(seeds, cap, n, quotes, sizeof quotes - 1);
    add_seed(seeds, cap, n, trades, sizeof trades - 1);
    /* what m2_synth_write_csv writes: quotes with optional trades, several sessions (features can be built) */
    m2_synth_opts o;
    small_synth(&o, 400, 2, 3);
    int64_t rows;
    if (m2_synth_write_csv(&o, 1, work, &rows)) return M2_EFAIL;
    char pattern[4200];
    snprintf(pattern, sizeof pattern, "%s/SYN000_*.csv.gz", work);
    glob_t g;
    if (glob(pattern, 0, NULL, &g) != 0) return m2_fail(M2_EFAIL, "fuzz (%s): no synthetic CSV", pattern);
    int rc = add_seed_gz(seeds, cap, n, g.gl_pathv[0]); /* text: mutations of deflate bytes mean little */
    globfree(&g);
    return rc;
}

static int csv_run(const char *path)
{
    m2_import_opts o;
    m2_import_defaults(&o);
    int bad = 0;
    for (int strict = 0; strict < 2; strict++) {
        o.strict = strict;
        m2_dataset ds;
        m2_import_report rep;
        int rc = m2_import_csv(path, &o, &ds, &rep);
        bad |= verdict(rc, strict ? "import --strict" : "import");
        if (rc == M2_OK) {
            char text[2048];
            m2_import_report_text(&rep, text, sizeof text);
            bad |= verdict(m2_dataset_check(&ds, path), "dataset check after import");
            m2_dataset_free(&ds);
        }
    }
    /* the CLI's path: the same rows streamed in pieces through the two-pass writer into a file */
    char out[4200];
    snprintf(out, sizeof out, "%s.imported.h5", path);
    o.strict = 0;
    m2_dataset meta;
    m2_import_report rep;
    int rc = m2_import_one(path, &o, out, &meta, &rep);
    bad |= verdict(rc, "streaming import");
    if (rc == M2_OK) m2_dataset_free(&meta);
    unlink(out);
    return bad;
}

/* ---- INI configs ---------------------------------------------------------------------------------- */

static int ini_seeds(fuzz_buf *seeds, int cap, int *n, const char *work)
{
    m2_config c;
    m2_config_defaults(&c);
    char *text = m2_config_to_string(&c);
    if (!text) return m2_fail(M2_EFAIL, "fuzz: no config text");
    add_seed(seeds, cap, n, text, strlen(text));
    free(text);
    static const char small[] = "\xEF\xBB\xBF[train]\nsteps = 10 ; a comment\nlr=3e-4\n\n# another\n[model]\n"
                                "d_model = 32\n[data]\npath = \"/tmp/some file.h5\"\n";
    add_seed(seeds, cap, n, small, sizeof small - 1);
    const char *src = getenv("MAMBA2_SRC"); /* the committed configs (set by ctest) */
    static const char *const names[] = {"tiny.ini", "small.ini", "latency.ini", "8gpu.ini"};
    for (size_t i = 0; src && i < sizeof names / sizeof names[0]; i++) {
        char path[4200];
        snprintf(path, sizeof path, "%s/configs/%s", src, names[i]);
        if (add_seed_file(seeds, cap, n, path)) return M2_EFAIL;
    }
    (void)work;
    return M2_OK;
}

/* Whatever loaded must print as text that the checkpoint reader takes back (a checkpoint stores this text). */
static int reloads(const m2_config *c, const char *what)
{
    char *text = m2_config_to_string(c);
    if (!text) return verdict(m2_fail(M2_EFAIL, "fuzz: no config text"), what);
    m2_config back;
    m2_config_defaults(&back);
    int rc = m2_config_from_text(&back, text, "printed config");
    free(text);
    if (rc == M2_OK) return 0;
    fprintf(stderr, "fuzz: %s: the printed config does not reload: %s\n", what, m2_last_error());
    return -1;
}

static int ini_run(const char *path)
{
    m2_config c;
    m2_config_defaults(&c);
    int rc = m2_config_load_file(&c, path), bad = verdict(rc, "config file (inih)");
    if (rc == M2_OK && (rc = m2_config_validate(&c, path)) == M2_OK) bad |= reloads(&c, "config file (inih)");
    bad |= verdict(rc, "config validate");
    /* the same bytes through the checkpoint's config reader (no inih) */
    fuzz_buf text = {0};
    if (fuzz_buf_read_file(&text, path)) return verdict(M2_EFAIL, "reading the case");
    m2_config_defaults(&c);
    rc = m2_config_from_text(&c, (const char *)text.data, path);
    fuzz_buf_free(&text);
    bad |= verdict(rc, "config text (checkpoint reader)");
    if (rc == M2_OK) bad |= reloads(&c, "config text (checkpoint reader)");
    return bad;
}

/* ---- HDF5 datasets -------------------------------------------------------------------------------- */

static int write_seed_dataset(fuzz_buf *seeds, int cap, int *n, const char *work, m2_dataset *ds, const char *name)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", work, name);
    int rc = m2_dataset_write(path, ds);
    m2_dataset_free(ds);
    return rc ? rc : add_seed_file(seeds, cap, n, path);
}

static int dataset_seeds(fuzz_buf *seeds, int cap, int *n, const char *work)
{
    m2_synth_opts o;
    small_synth(&o, 300, 2, 5); /* small: most bytes are metadata, where a mutation means most */
    o.levels = 2;
    m2_dataset ds;
    if (m2_synth_dataset(&o, &ds, NULL) || write_seed_dataset(seeds, cap, n, work, &ds, "one.h5")) return M2_EFAIL;
    small_synth(&o, 200, 2, 6);
    char path[4200];
    snprintf(path, sizeof path, "%s/universe.h5", work);
    if (m2_synth_universe(&o, 2, path, &ds)) return M2_EFAIL;
    m2_dataset_free(&ds);
    return add_seed_file(seeds, cap, n, path);
}

static int dataset_run(const char *path)
{
    m2_dataset ds;
    int rc = m2_dataset_read(path, &ds, 1);
    if (rc == M2_OK) m2_dataset_free(&ds);
    return verdict(rc, "dataset read");
}

/* ---- checkpoints ---------------------------------------------------------------------------------- */

static int checkpoint_seeds(fuzz_buf *seeds, int cap, int *n, const char *work)
{
    m2_checkpoint ck;
    memset(&ck, 0, sizeof ck);
    m2_config_defaults(&ck.cfg);
    ck.cfg.model.d_model = 8;
    ck.cfg.model.n_layers = 1;
    ck.cfg.model.headdim = 4;
    ck.cfg.model.d_state = 4;
    ck.cfg.train.seq_len = 16;
    ck.cfg.train.burn_in = 4;
    m2_dims d;
    if (m2_dims_init(&d, &ck.cfg, 3, 2) || m2_layout_init(&ck.lay, &d)) return M2_EFAIL;
    const size_t np = ck.lay.n_params;
    float *buf = calloc(3 * np, sizeof *buf);
    if (!buf) return m2_fail(M2_EFAIL, "fuzz: out of memory");
    ck.params = buf, ck.m = buf + np, ck.v = buf + 2 * np;
    m2_params_init(&ck.lay, ck.params, 5);
    for (size_t i = 0; i < np; i++) ck.m[i] = 1e-3f * (float)((int)(i % 7) - 3), ck.v[i] = 1e-6f * (float)(i % 5);
    ck.step = 7;
    ck.tokens_seen = 7 * (int64_t)ck.cfg.train.global_batch * ck.cfg.train.seq_len;
    ck.world_size_at_save = 2;
    ck.optim_step = 6;
    ck.data_seed = 1234;
    ck.data_step = 7;
    ck.n_features = 3;
    ck.best_step = -1;
    for (int j = 0; j < 3; j++) {
        snprintf(ck.feature_names[j], sizeof ck.feature_names[j], "f%d", j);
        ck.mean[j] = 0.5 * j;
        ck.std[j] = 1.0 + j;
    }
    char path[4200];
    int rc = m2_checkpoint_save_as(work, "seed.h5", &ck, path, sizeof path);
    free(buf);
    m2_layout_free(&ck.lay);
    return rc ? rc : add_seed_file(seeds, cap, n, path);
}

static int checkpoint_run(const char *path)
{
    m2_checkpoint ck;
    int rc = m2_checkpoint_load(path, &ck, 1);
    if (rc == M2_OK) m2_checkpoint_free(&ck);
    return verdict(rc, "checkpoint load");
}

/* ---- the table ------------------------------------------------------------------------------------ */

static const fuzz_target targets[] = {
    {"csv", ".csv", 0, csv_seeds, csv_run},
    {"ini", ".ini", 0, ini_seeds, ini_run},
    {"dataset", ".h5", 1, dataset_seeds, dataset_run},
    {"checkpoint", ".h5", 1, checkpoint_seeds, checkpoint_run},
};

const fuzz_target *fuzz_find_target(const char *name)
{
    for (size_t i = 0; i < sizeof targets / sizeof targets[0]; i++)
        if (strcmp(targets[i].name, name) == 0) return &targets[i];
    return NULL;
}

const char *fuzz_target_names(void) { return "csv, ini, dataset, checkpoint"; }
