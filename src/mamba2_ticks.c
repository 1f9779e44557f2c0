/* mamba2_ticks: make and inspect tick datasets (docs/CLI.md).
 *   synth   simulate a limit-order book with a planted signal and write a dataset
 *   import  CSV of quotes or trades → dataset
 *   info    readable summary of a dataset */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "base/cli.h"
#include "base/error.h"
#include "base/version.h"
#include "io/dataset.h"
#include "io/features.h"
#include "io/h5util.h"
#include "io/import_csv.h"
#include "io/import_demux.h"
#include "io/import_files.h"
#include "io/synth.h"
#include "io/synth_universe.h"
#include "io/universe_append.h"

static const char *const prog = "mamba2_ticks";

/* The bad-row summary of an import, printed after the import's outcome (docs/CLI.md: an error is the first line on
 * stderr; a warning summary may follow it, never precede it). */
static char bad_rows_warning[2400];

static const char usage_synth[] =
    "mamba2_ticks synth --out FILE [options]\n"
    "  Simulates a zero-intelligence limit-order book and writes a tick dataset.\n"
    "  --out FILE          dataset to write (required)\n"
    "  --ticks N           rows (top-of-book changes and trades)       default 200000\n"
    "  --sessions S        trading sessions (separated by overnight gaps)  default 10\n"
    "  --seed S            random seed                                   default 1\n"
    "  --signal MODE       none | linear | memory                        default memory\n"
    "  --horizons H,...    target horizons in rows                       default 10,50,100\n"
    "  --split A,B,C       train,val,test fractions (by time)           default 0.8,0.1,0.1\n"
    "  --clip C            clip of the z-scored features                 default 5\n"
    "  --instruments K     a universe of K instruments SYN000..            default 1\n"
    "  --csv-dir DIR       write DIR/SYNkkk_YYYYMMDD.csv.gz per instrument and day instead of --out\n"
    "  --levels K          keep K book levels: depth features depth_imb_1..K, depth_imb_cum (K <= 10)\n"
    "  --lobster-dir DIR   write LOBSTER message/orderbook pairs (K levels, default 1) per instrument and day\n";

static const char usage_import[] =
    "mamba2_ticks import [--csv FILE]... [INPUT]... --out FILE [options]\n"
    "  Converts CSVs of quotes (ts,bid,ask[,bid_size,ask_size]) or trades (ts,price[,size,side]) into a dataset.\n"
    "  An INPUT is a .csv or .csv.gz file, a folder (its .csv and .csv.gz files) or a quoted glob pattern; files\n"
    "  named NAME_YYYYMMDD.csv[.gz] are days of instrument NAME. More than one file makes a universe.\n"
    "  --csv FILE          an input CSV with a header row (repeatable; same as an INPUT)\n"
    "  --out FILE          dataset to write (required unless --append)\n"
    "  --append FILE       add the inputs' new days to the universe FILE (frozen cuts and statistics; the new\n"
    "                      rows join the test split; FILE is replaced atomically)\n"
    "  --instrument NAME   every input is this instrument     default: from the file names\n"
    "  --instrument-column NAME  rows name their instrument in column NAME (several per file, any interleaving)\n"
    "  --tick-size X       price tick                        default: smallest price change seen\n"
    "  --horizons H,...    target horizons in rows           default 10,50,100\n"
    "  --split A,B,C       train,val,test fractions          default 0.8,0.1,0.1\n"
    "  --session-gap SEC   a longer gap starts a session     default 3600\n"
    "  --clip C            clip of the z-scored features     default 5\n"
    "  --strict            the first bad row is fatal        default: skip, count and report bad rows\n"
    "  --depth K           LOBSTER: depth imbalance features of book levels 1..K and cumulative (K <= 10)\n"
    "  LOBSTER: TICKER_YYYY-MM-DD_START_END_message_N.csv is read with its _orderbook_N.csv (pass either or a\n"
    "  folder of pairs).\n";

static const char usage_info[] =
    "mamba2_ticks info FILE\n"
    "  Prints sessions, rows per split, feature names and statistics, target statistics and NaN counts.\n";

static void print_usage(FILE *out)
{
    fprintf(out,
            "usage: mamba2_ticks COMMAND [options]   (mamba2_ticks COMMAND --help for one command)\n"
            "       mamba2_ticks --help | --version\n\n%s\n%s\n%s",
            usage_synth, usage_import, usage_info);
}

/* ---- option values -------------------------------------------------------------------------------- */

/* Options that synth and import share. */
enum {
    OPT_INSTRUMENTS = 200,
    OPT_CSV_DIR,
    OPT_DEPTH,
    OPT_LEVELS,
    OPT_LOBSTER_DIR,
    OPT_HORIZONS = 256,
    OPT_SPLIT,
    OPT_CLIP,
    OPT_TICKS,
    OPT_SESSIONS,
    OPT_SEED,
    OPT_SIGNAL,
    OPT_OUT,
    OPT_CSV,
    OPT_INSTRUMENT,
    OPT_INSTRUMENT_COLUMN,
    OPT_APPEND,
    OPT_TICK_SIZE,
    OPT_STRICT,
    OPT_GAP,
    OPT_HELP
};

static int feature_option(int c, const char *arg, m2_feature_opts *f)
{
    double clip = 0;
    switch (c) {
    case OPT_HORIZONS: return m2_parse_horizons(arg, "--horizons", f);
    case OPT_SPLIT: return m2_parse_split(arg, "--split", f);
    case OPT_CLIP:
        if (m2_parse_f64("--clip", arg, 0, FLT_MAX, 1, &clip)) return M2_EUSAGE;
        f->clip = (float)clip;
        return M2_OK;
    }
    return m2_fail(M2_EUSAGE, "option: unexpected");
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void print_written(const char *out, const m2_dataset *ds, double seconds)
{
    printf("wrote %s: %lld rows, %lld sessions, %d features, %d targets; train/val/test rows %lld/%lld/%lld (%.2f s)\n",
           out, (long long)ds->n_rows, (long long)ds->n_sessions, ds->n_features, ds->n_targets,
           (long long)(ds->split[0][1] - ds->split[0][0]), (long long)(ds->split[1][1] - ds->split[1][0]),
           (long long)(ds->split[2][1] - ds->split[2][0]), seconds);
}

/* ---- synth ---------------------------------------------------------------------------------------- */

/* A universe file, or the per-instrument, per-day CSV files of one. */
static int synth_universe(const m2_synth_opts *o, int instruments, const char *out, const char *csv_dir,
                          const char *lobster_dir)
{
    double t0 = now_s();
    int64_t rows = 0;
    if (csv_dir || lobster_dir) {
        int rc = csv_dir ? m2_synth_write_csv(o, instruments, csv_dir, &rows)
                         : m2_synth_write_lobster(o, instruments, lobster_dir, &rows);
        if (rc == M2_OK)
            printf("wrote %s: %d instruments x %d days, %lld rows (%.2f s)\n", csv_dir ? csv_dir : lobster_dir,
                   instruments, o->sessions, (long long)rows, now_s() - t0);
        return rc ? m2_report(prog, rc) : M2_OK;
    }
    m2_dataset ds;
    int rc = m2_synth_universe(o, instruments, out, &ds);
    if (rc == M2_OK) print_written(out, &ds, now_s() - t0);
    m2_dataset_free(&ds);
    return rc ? m2_report(prog, rc) : M2_OK;
}

static int cmd_synth(int argc, char **argv)
{
    static const struct option opts[] = {{"out", required_argument, 0, OPT_OUT},
                                         {"ticks", required_argument, 0, OPT_TICKS},
                                         {"sessions", required_argument, 0, OPT_SESSIONS},
                                         {"seed", required_argument, 0, OPT_SEED},
                                         {"signal", required_argument, 0, OPT_SIGNAL},
                                         {"horizons", required_argument, 0, OPT_HORIZONS},
                                         {"split", required_argument, 0, OPT_SPLIT},
                                         {"clip", required_argument, 0, OPT_CLIP},
                                         {"instruments", required_argument, 0, OPT_INSTRUMENTS},
                                         {"csv-dir", required_argument, 0, OPT_CSV_DIR},
                                         {"levels", required_argument, 0, OPT_LEVELS},
                                         {"lobster-dir", required_argument, 0, OPT_LOBSTER_DIR},
                                         {"help", no_argument, 0, OPT_HELP},
                                         {0, 0, 0, 0}};
    static const char help[] = "mamba2_ticks synth --help";
    m2_synth_opts o;
    m2_synth_defaults(&o);
    const char *out = NULL, *csv_dir = NULL, *lobster_dir = NULL;
    int c, instruments = 1;
    int64_t v;
    while ((c = m2_cli_next(argc, argv, opts, help)) != -1) {
        int rc = M2_OK;
        switch (c) {
        case OPT_OUT: out = optarg; break;
        case OPT_CSV_DIR: csv_dir = optarg; break;
        case OPT_LOBSTER_DIR: lobster_dir = optarg; break;
        case OPT_LEVELS: rc = m2_parse_int("--levels", optarg, 1, 10, &o.levels); break;
        case OPT_INSTRUMENTS: rc = m2_parse_int("--instruments", optarg, 1, 999, &instruments); break;
        case OPT_TICKS: rc = m2_parse_i64("--ticks", optarg, 2, (int64_t)1 << 40, &o.ticks); break;
        case OPT_SESSIONS:
            rc = m2_parse_i64("--sessions", optarg, 1, 1000000, &v);
            o.sessions = (int)v;
            break;
        case OPT_SEED:
            rc = m2_parse_i64("--seed", optarg, 0, INT64_MAX, &v);
            o.seed = (uint64_t)v;
            break;
        case OPT_SIGNAL:
            if ((o.signal = m2_signal_from_name(optarg)) < 0)
                rc = m2_fail(M2_EUSAGE, "--signal (%s): must be none, linear or memory", optarg);
            break;
        case OPT_HORIZONS:
        case OPT_SPLIT:
        case OPT_CLIP: rc = feature_option(c, optarg, &o.feat); break;
        case OPT_HELP: fputs(usage_synth, stdout); return M2_OK;
        default: rc = M2_EUSAGE; /* M2_CLI_BAD: the message is set */
        }
        if (rc) return m2_report(prog, rc);
    }
    if (m2_cli_no_extra(argc, argv, 0)) return m2_report(prog, M2_EUSAGE);
    if ((out != NULL) + (csv_dir != NULL) + (lobster_dir != NULL) != 1)
        return m2_report(prog, m2_fail(M2_EUSAGE, "synth: one of --out FILE, --csv-dir DIR and --lobster-dir DIR is "
                                                  "required"));
    if (csv_dir || lobster_dir || instruments > 1) return synth_universe(&o, instruments, out, csv_dir, lobster_dir);
    double t0 = now_s();
    m2_dataset ds;
    int rc = m2_synth_one(&o, out, &ds);
    if (rc == M2_OK) print_written(out, &ds, now_s() - t0);
    m2_dataset_free(&ds);
    return rc ? m2_report(prog, rc) : M2_OK;
}

/* ---- import --------------------------------------------------------------------------------------- */

static int import_inputs(const char **inputs, int n, const char *out, const m2_import_opts *o);
static int append_inputs(const char **inputs, int n, const char *file, const char *out, const m2_import_opts *o);

static int cmd_import(int argc, char **argv)
{
    static const struct option opts[] = {{"csv", required_argument, 0, OPT_CSV},
                                         {"out", required_argument, 0, OPT_OUT},
                                         {"instrument", required_argument, 0, OPT_INSTRUMENT},
                                         {"instrument-column", required_argument, 0, OPT_INSTRUMENT_COLUMN},
                                         {"append", required_argument, 0, OPT_APPEND},
                                         {"tick-size", required_argument, 0, OPT_TICK_SIZE},
                                         {"horizons", required_argument, 0, OPT_HORIZONS},
                                         {"split", required_argument, 0, OPT_SPLIT},
                                         {"clip", required_argument, 0, OPT_CLIP},
                                         {"strict", no_argument, 0, OPT_STRICT},
                                         {"session-gap", required_argument, 0, OPT_GAP},
                                         {"help", no_argument, 0, OPT_HELP},
                                         {"depth", required_argument, 0, OPT_DEPTH},
                                         {0, 0, 0, 0}};
    static const char help[] = "mamba2_ticks import --help";
    m2_import_opts o;
    m2_import_defaults(&o);
    const char *out = NULL, *append = NULL, **inputs = calloc((size_t)argc + 1, sizeof *inputs);
    int c, n_inputs = 0;
    if (!inputs) return m2_report(prog, m2_fail(M2_EFAIL, "import: out of memory"));
    while ((c = m2_cli_next(argc, argv, opts, help)) != -1) {
        int rc = M2_OK;
        switch (c) {
        case OPT_CSV: inputs[n_inputs++] = optarg; break;
        case OPT_OUT: out = optarg; break;
        case OPT_APPEND: append = optarg; break;
        case OPT_INSTRUMENT:
            if (strlen(optarg) >= sizeof((m2_dataset *)0)->instrument)
                rc = m2_fail(M2_EUSAGE, "--instrument (%.20s...): longer than 63 characters", optarg);
            o.instrument = optarg;
            break;
        case OPT_INSTRUMENT_COLUMN: o.instrument_column = optarg; break;
        case OPT_TICK_SIZE: rc = m2_parse_f64("--tick-size", optarg, 0, DBL_MAX, 1, &o.tick_size); break;
        case OPT_GAP: rc = m2_parse_f64("--session-gap", optarg, 0, DBL_MAX, 1, &o.session_gap_s); break;
        case OPT_STRICT: o.strict = 1; break;
        case OPT_DEPTH: rc = m2_parse_int("--depth", optarg, 1, M2_IMPORT_MAX_DEPTH, &o.depth_levels); break;
        case OPT_HORIZONS:
        case OPT_SPLIT:
        case OPT_CLIP: rc = feature_option(c, optarg, &o.feat); break;
        case OPT_HELP:
            free(inputs);
            fputs(usage_import, stdout);
            return M2_OK;
        default: rc = M2_EUSAGE; /* M2_CLI_BAD: the message is set */
        }
        if (rc) {
            free(inputs);
            return m2_report(prog, rc);
        }
    }
    while (optind < argc) inputs[n_inputs++] = argv[optind++];
    int rc = append ? append_inputs(inputs, n_inputs, append, out, &o) : import_inputs(inputs, n_inputs, out, &o);
    free(inputs);
    if (rc) m2_report(prog, rc);
    fputs(bad_rows_warning, stderr);
    return rc;
}

static void warn_bad(const m2_import_report *rep, const char *what)
{
    char bad[2048];
    m2_import_report_text(rep, bad, sizeof bad);
    if (bad[0]) snprintf(bad_rows_warning, sizeof bad_rows_warning, "%s: warning: %s (%s)\n", prog, bad, what);
}

static int import_one(const char *csv, const char *out, const m2_import_opts *o)
{
    double t0 = now_s();
    m2_dataset ds;
    m2_import_report rep;
    int rc = m2_import_one(csv, o, out, &ds, &rep);
    warn_bad(&rep, csv);
    if (rc) return rc;
    printf("read %s: %lld data lines, %lld rows kept, %lld bad; tick size %g%s\n", csv, (long long)rep.lines,
           (long long)rep.rows, (long long)rep.bad, ds.tick_size, rep.tick_inferred ? " (inferred)" : "");
    print_written(out, &ds, now_s() - t0);
    m2_dataset_free(&ds);
    return rc;
}

/* A universe from the inputs, written to `out` or (append) grown in `out`. */
static int universe_inputs(const char **inputs, int n, const char *out, const m2_import_opts *o, int append)
{
    double t0 = now_s();
    m2_file_list list;
    int rc = m2_file_list_expand(inputs, n, o, &list);
    if (rc) return rc;
    m2_dataset ds;
    m2_import_report rep;
    int n_files = list.n; /* --instrument-column replaces the list by one part per instrument */
    rc = append                 ? m2_universe_append(out, &list, o, &ds, &rep)
         : o->instrument_column ? m2_import_universe_by_column(&list, o, out, &ds, &rep)
                                : m2_import_universe(&list, o, out, &ds, &rep);
    warn_bad(&rep, n == 1 ? inputs[0] : "inputs");
    if (rc == M2_OK)
        printf("%s %d files: %lld data lines, %lld rows kept, %lld bad; %d instruments\n", append ? "appended" : "read",
               n_files, (long long)rep.lines, (long long)rep.rows, (long long)rep.bad, ds.n_instruments);
    m2_file_list_free(&list);
    if (rc == M2_OK) print_written(out, &ds, now_s() - t0);
    m2_dataset_free(&ds);
    return rc;
}

/* One plain file keeps the single-instrument import (row-fraction split); anything else is a universe. */
static int import_inputs(const char **inputs, int n, const char *out, const m2_import_opts *o)
{
    if (n == 0 || !out)
        return m2_fail(M2_EUSAGE, "import: an input (--csv FILE, a file, folder or glob) and --out FILE are required");
    if (o->instrument && o->instrument_column)
        return m2_fail(M2_EUSAGE, "import: --instrument and --instrument-column exclude each other");
    struct stat st;
    if (n == 1 && stat(inputs[0], &st) == 0 && S_ISREG(st.st_mode) && !m2_lobster_is_message(inputs[0]) &&
        !o->instrument_column)
        return import_one(inputs[0], out, o);
    return universe_inputs(inputs, n, out, o, 0);
}

/* --append FILE: the inputs' days added to the universe FILE (universe_append.h). */
static int append_inputs(const char **inputs, int n, const char *file, const char *out, const m2_import_opts *o)
{
    if (n == 0 || out)
        return m2_fail(M2_EUSAGE, "import --append FILE: inputs are required and --out is not taken (FILE is updated)");
    if (o->instrument_column)
        return m2_fail(M2_EUSAGE, "import --append: --instrument-column is not supported when appending");
    return universe_inputs(inputs, n, file, o, 1);
}

/* ---- info ----------------------------------------------------------------------------------------- */

typedef struct {
    int64_t n, nan;
    double mean, sd;
} col_stats;

/* Mean and std of the finite values of column j of a row-major [rows, cols] array over rows [b, e). */
static col_stats column_stats(const float *a, int cols, int j, int64_t b, int64_t e)
{
    col_stats s = {0, 0, 0, 0};
    double sum = 0, ss = 0;
    for (int64_t i = b; i < e; i++) {
        double v = a[i * cols + j];
        if (v != v) {
            s.nan++;
            continue;
        }
        s.n++;
        sum += v;
    }
    s.mean = s.n ? sum / (double)s.n : NAN;
    for (int64_t i = b; i < e; i++) {
        double v = a[i * cols + j];
        if (v == v) ss += (v - s.mean) * (v - s.mean);
    }
    s.sd = s.n ? sqrt(ss / (double)s.n) : NAN;
    return s;
}

static int64_t sessions_touching(const m2_dataset *ds, int64_t b, int64_t e)
{
    int64_t n = 0;
    for (int64_t k = 0; k < ds->n_sessions; k++) n += ds->sessions[k] < e && ds->sessions[k + 1] > b;
    return n;
}

static void print_info(const char *path, const m2_dataset *ds, const char *created)
{
    printf("file        %s\ninstrument  %s\nsource      %s\ncreated     %s\ntick size   %g\n", path, ds->instrument,
           ds->source, created, ds->tick_size);
    int64_t shortest = INT64_MAX, longest = 0;
    for (int64_t k = 0; k < ds->n_sessions; k++) {
        int64_t len = ds->sessions[k + 1] - ds->sessions[k];
        shortest = len < shortest ? len : shortest;
        longest = len > longest ? len : longest;
    }
    printf("rows        %lld in %lld sessions (%lld to %lld rows each)\n", (long long)ds->n_rows,
           (long long)ds->n_sessions, (long long)shortest, (long long)longest);
    printf("features    %d, z-scored with train statistics, clipped to +-%g\n", ds->n_features, (double)ds->clip);
    printf("targets     %d: forward mid log-return in bp at horizons", ds->n_targets);
    for (int k = 0; k < ds->n_targets; k++) printf("%s%d", k ? "," : " ", (int)ds->horizons[k]);
    printf(" rows\n\n  %-6s %12s  %-26s %8s\n", "split", "rows", "range", "sessions");
    for (int s = 0; s < 3; s++) {
        char range[64];
        snprintf(range, sizeof range, "[%lld, %lld)", (long long)ds->split[s][0], (long long)ds->split[s][1]);
        printf("  %-6s %12lld  %-26s %8lld\n", m2_split_name(s), (long long)(ds->split[s][1] - ds->split[s][0]), range,
               (long long)sessions_touching(ds, ds->split[s][0], ds->split[s][1]));
    }
    printf("\nfeatures: stored (train) mean/std in raw units; observed mean/std of the z-scored values per split\n");
    printf("  %-20s %12s %12s   %-15s %-15s %-15s\n", "name", "mean", "std", "train", "val", "test");
    for (int j = 0; j < ds->n_features; j++) {
        printf("  %-20s %12.5g %12.5g  ", ds->feature_names[j], ds->mean[j], ds->std[j]);
        for (int s = 0; s < 3; s++) {
            col_stats c = column_stats(ds->X, ds->n_features, j, ds->split[s][0], ds->split[s][1]);
            printf(" %7.3f/%-7.3f", c.mean, c.sd);
        }
        printf("\n");
    }
    printf("\ntargets (bp): mean/std of finite values, NaN count (horizon crosses a session end)\n");
    printf("  %-8s %-26s %-26s %-26s\n", "horizon", " train", " val", " test");
    for (int k = 0; k < ds->n_targets; k++) {
        printf("  %-8d", (int)ds->horizons[k]);
        for (int s = 0; s < 3; s++) {
            col_stats c = column_stats(ds->y, ds->n_targets, k, ds->split[s][0], ds->split[s][1]);
            printf(" %8.3f/%-8.3f NaN %-5lld", c.mean, c.sd, (long long)c.nan);
        }
        printf("\n");
    }
}

static int cmd_info(int argc, char **argv)
{
    static const struct option opts[] = {{"help", no_argument, 0, OPT_HELP}, {0, 0, 0, 0}};
    int c;
    while ((c = m2_cli_next(argc, argv, opts, "mamba2_ticks info --help")) != -1) {
        if (c == OPT_HELP) {
            fputs(usage_info, stdout);
            return M2_OK;
        }
        return m2_report(prog, M2_EUSAGE);
    }
    if (argc - optind != 1)
        return m2_report(prog, m2_fail(M2_EUSAGE, "info: expected exactly one FILE (see mamba2_ticks info --help)"));
    const char *path = argv[optind];
    m2_dataset ds;
    if (m2_dataset_read(path, &ds, 0)) return m2_report(prog, M2_EFAIL);
    char created[64] = "?";
    hid_t f;
    if (m2_h5_open_read(path, "mamba2.ticks", 1, &f, NULL) == M2_OK) {
        m2_h5_attr_get_str(f, "created_utc", created, sizeof created);
        H5Fclose(f);
    }
    print_info(path, &ds, created);
    m2_dataset_free(&ds);
    return M2_OK;
}

int main(int argc, char **argv)
{
    m2_h5_quiet();
    if (argc < 2) {
        print_usage(stderr);
        return M2_EUSAGE;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0) {
        print_usage(stdout);
        return M2_OK;
    }
    if (strcmp(cmd, "--version") == 0) {
        m2_print_version("mamba2_ticks");
        return M2_OK;
    }
    /* Each command parses its own options, with argv[0] = the command. */
    if (strcmp(cmd, "synth") == 0) return cmd_synth(argc - 1, argv + 1);
    if (strcmp(cmd, "import") == 0) return cmd_import(argc - 1, argv + 1);
    if (strcmp(cmd, "info") == 0) return cmd_info(argc - 1, argv + 1);
    return m2_report(prog, m2_fail(M2_EUSAGE, "command (%s): unknown; expected synth, import or info", cmd));
}
