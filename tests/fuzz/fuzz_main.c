/* fuzz_readers: runs a reader over its crash corpus, then over mutated seeds (fuzz.h; docs/TESTING.md "Fuzzing").
 *
 *   fuzz_readers TARGET [--cases N] [--seed S] [--first K] [--corpus DIR] [--crashes DIR] [--timeout SECONDS]
 *                [--isolate] [--save] [--exact-leaks]
 *
 * Case i of seed S is the same input on every machine, so a finding is reproduced with --seed S --first i
 * --cases 1. A finding (sanitizer report, crash, hang past the timeout, a failure without one line of message,
 * an HDF5 object or file descriptor left open) is copied to the crash folder as TARGET-sS-iI.EXT, to be added
 * to tests/fuzz/corpus/TARGET/ once fixed. --isolate runs the cases in a child process and starts a new one after
 * a crash, so a long run goes on past it (the reader-call counts in the summary are then the corpus's only).
 * --save copies every case of the range to the crash folder (to make a corpus file of one). --exact-leaks turns
 * off HDF5's free lists, so that a leak report names the allocation that was lost (several times slower).
 * Exit 1 when a finding outside libhdf5 was made, 0 otherwise (a fault whose innermost frame is in libhdf5 is
 * counted, printed and kept, but is HDF5's to fix), 2 for bad usage. */
#define _GNU_SOURCE /* nftw */
#include <dirent.h>
#include <errno.h>
#include <execinfo.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/cli.h"
#include "base/error.h"
#include "fuzz.h"
#include "io/h5util.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#include <sanitizer/lsan_interface.h>
#endif

enum { MAX_SEEDS = 16 };

typedef struct {
    const fuzz_target *t;
    int64_t cases, first, timeout_s;
    uint64_t seed;
    const char *corpus, *crashes;
    int isolate, save, exact_leaks;
} options;

/* What a crash handler needs: async-signal-safe copies of the case file's path and the finding's name. */
static char g_case[4200], g_keep[4400];

static void keep_case(void)
{
    int in = open(g_case, O_RDONLY), out = in < 0 ? -1 : open(g_keep, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    char buf[65536];
    for (ssize_t n; out >= 0 && (n = read(in, buf, sizeof buf)) > 0;)
        if (write(out, buf, (size_t)n) != n) break;
    if (in >= 0) close(in);
    if (out >= 0) close(out);
    static const char say[] = "fuzz: the case is kept as ";
    if (write(2, say, sizeof say - 1) < 0 || write(2, g_keep, strlen(g_keep)) < 0 || write(2, "\n", 1) < 0) return;
}

static void on_timeout(int sig)
{
    static const char say[] = "fuzz: the case ran past --timeout (a hang)\n";
    if (write(2, say, sizeof say - 1) < 0) _exit(3);
    keep_case();
    _exit(3);
}

#if !defined(__SANITIZE_ADDRESS__)
static void on_crash(int sig)
{
    /* the stack as frame lines that in_libhdf5 reads (from the frame below this handler and libc's trampoline) */
    void *frames[32];
    int n = backtrace(frames, 32);
    for (int k = 1; k < n; k++) {
        char head[32];
        int len = snprintf(head, sizeof head, "    #%d in ", k - 1);
        if (write(2, head, (size_t)len) < 0) break;
        backtrace_symbols_fd(&frames[k], 1, 2);
    }
    keep_case();
    signal(sig, SIG_DFL);
    raise(sig);
}
#endif

static void install_handlers(void)
{
    signal(SIGALRM, on_timeout);
#if defined(__SANITIZE_ADDRESS__)
    __sanitizer_set_death_callback(keep_case); /* ASan, UBSan and LeakSanitizer reports end in a death */
#else
    for (int s = 0; s < 4; s++) signal((int[]){SIGSEGV, SIGBUS, SIGABRT, SIGFPE}[s], on_crash);
#endif
}

/* Descriptors and HDF5 objects a reader left open (they would pile up over a long run). */
static int leaked(int fd_base)
{
    int fd = open("/dev/null", O_RDONLY);
    if (fd >= 0) close(fd);
    ssize_t h5 = H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL);
    if (fd > fd_base || h5 > 0) {
        fprintf(stderr, "fuzz: the reader left %s open\n", h5 > 0 ? "HDF5 objects" : "a file descriptor");
        if (h5 > 0) { /* close them, so the next case starts clean */
            hid_t ids[64];
            ssize_t n = H5Fget_obj_ids(H5F_OBJ_ALL, H5F_OBJ_ALL, 64, ids);
            for (ssize_t i = 0; i < n; i++)
                if (H5Oclose(ids[i]) < 0) H5Fclose(ids[i]);
        }
        return 1;
    }
    return 0;
}

/* One input through the reader, with the checks around it. */
static int run_one(const options *o, const char *path, int fd_base)
{
    alarm((unsigned)o->timeout_s);
    int bad = o->t->run(path);
    alarm(0);
#if defined(__SANITIZE_ADDRESS__)
    /* each case's leaks, named by the case; in an --isolate child only at its exit (in a forked child the check
     * also reports the parent's HDF5 free-list blocks) */
    if (!o->isolate) bad |= __lsan_do_recoverable_leak_check();
#endif
    return bad | leaked(fd_base);
}

static int by_name(const struct dirent **a, const struct dirent **b) { return strcmp((*a)->d_name, (*b)->d_name); }

/* Every file of the corpus folder (a missing folder is an empty corpus). */
static int run_corpus(const options *o, int fd_base, int *files)
{
    struct dirent **e;
    int n = scandir(o->corpus, &e, NULL, by_name), findings = 0;
    for (int i = 0; i < n; i++) {
        char path[4200];
        snprintf(path, sizeof path, "%s/%s", o->corpus, e[i]->d_name);
        struct stat st;
        if (e[i]->d_name[0] != '.' && stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
            snprintf(g_case, sizeof g_case, "%s", path);
            snprintf(g_keep, sizeof g_keep, "%s/corpus-%s", o->crashes, e[i]->d_name);
            if (run_one(o, path, fd_base)) {
                fprintf(stderr, "fuzz: corpus file %s: a finding\n", path);
                findings++;
            }
            (*files)++;
        }
        free(e[i]);
    }
    if (n >= 0) free(e);
    return findings;
}

/* Where a report's innermost frame outside libc and the sanitizer runtime lies: 1 inside libhdf5 (a fault of the
 * HDF5 library itself, which this project cannot fix; docs/TESTING.md "Fuzzing"), 0 elsewhere or unknown. */
static int in_libhdf5(const char *report_path)
{
    FILE *f = fopen(report_path, "r");
    char line[2048];
    int hdf5 = 0;
    while (f && fgets(line, sizeof line, f)) {
        const char *p = line + strspn(line, " ");
        if (p[0] != '#' || !strstr(p, " in ")) continue;
        if (strstr(p, "libc.so") || strstr(p, "libasan") || strstr(p, "libubsan") || strstr(p, "sanitizer_common") ||
            strstr(p, "asan_") || strstr(p, "__interceptor") || strstr(p, "/sysdeps/"))
            continue;
        hdf5 = strstr(p, "libhdf5") != NULL;
        break;
    }
    if (f) fclose(f);
    return hdf5;
}

static void copy_file(const char *from, const char *to)
{
    fuzz_buf b = {0};
    if (fuzz_buf_read_file(&b, from) == M2_OK) fuzz_buf_write_file(&b, to);
    fuzz_buf_free(&b);
}

/* Shared with the --isolate child: the case it is on and the findings it recorded itself. */
typedef struct {
    volatile int64_t current;
    volatile int findings;
} progress;

static void set_keep_name(const options *o, int64_t i)
{
    snprintf(g_keep, sizeof g_keep, "%s/%s-s%llu-i%lld%s", o->crashes, o->t->name, (unsigned long long)o->seed,
             (long long)i, o->t->ext);
}

/* Cases [from, end) in this process. */
static void run_range(const options *o, const fuzz_buf *seeds, int n_seeds, int fd_base, int64_t from, int64_t end,
                      progress *p)
{
    fuzz_buf in = {0};
    for (int64_t i = from; i < end; i++) {
        p->current = i;
        fuzz_mutate(o->t, seeds, n_seeds, o->seed, i, &in);
        if (fuzz_buf_write_file(&in, g_case)) {
            fprintf(stderr, "fuzz: %s\n", m2_last_error());
            exit(1);
        }
        set_keep_name(o, i);
        if (o->save) keep_case(); /* --save: every case of the range, to turn into corpus files */
        if (run_one(o, g_case, fd_base)) {
            fprintf(stderr, "fuzz: case %lld (--seed %llu --first %lld --cases 1): a finding\n", (long long)i,
                    (unsigned long long)o->seed, (long long)i);
            keep_case();
            p->findings++;
        }
        if ((i + 1 - o->first) % 10000 == 0) { /* progress of a long run */
            printf("fuzz %s: %lld cases done\n", o->t->name, (long long)(i + 1 - o->first));
            fflush(stdout);
        }
    }
    p->current = end;
    fuzz_buf_free(&in);
}

/* --isolate: the cases in a child process; when it dies on a case (a crash, a sanitizer report, a hang) the case
 * is kept with the child's report and a new child goes on from the next one. The last child's exit runs
 * LeakSanitizer over the cases it ran. */
static int run_supervised(const options *o, const fuzz_buf *seeds, int n_seeds, const char *work, int fd_base,
                          int *hdf5_faults)
{
    progress *p = mmap(NULL, sizeof *p, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return 1;
    char report[4300];
    snprintf(report, sizeof report, "%s/report.txt", work);
    int findings = 0;
    const int64_t end = o->first + o->cases;
    for (int64_t from = o->first; from <= end;) {
        p->current = from;
        p->findings = 0;
        fflush(NULL);
        pid_t pid = fork();
        if (pid == 0) {
            int fd = open(report, O_WRONLY | O_CREAT | O_TRUNC, 0644);
            if (fd >= 0 && fd != 2) dup2(fd, 2), close(fd);
            run_range(o, seeds, n_seeds, fd_base, from, end, p);
            exit(0);
        }
        int status = 0;
        if (pid < 0 || waitpid(pid, &status, 0) != pid) return findings + 1;
        findings += p->findings;
        if (WIFEXITED(status) && WEXITSTATUS(status) == 0) break;
        int64_t i = p->current;
        int hdf5 = in_libhdf5(report);
        char kept[4500];
        if (i < end) {
            set_keep_name(o, i);
            copy_file(g_case, g_keep);
        } else {
            snprintf(g_keep, sizeof g_keep, "%s/%s-s%llu-exit-after-%lld", o->crashes, o->t->name,
                     (unsigned long long)o->seed, (long long)end);
        }
        snprintf(kept, sizeof kept, "%s.txt", g_keep);
        copy_file(report, kept);
        char where[64] = "after the last case";
        if (i < end) snprintf(where, sizeof where, "case %lld", (long long)i);
        fprintf(stderr, "fuzz: %s: the child died (%s %d)%s; kept as %s (--seed %llu --first %lld --cases 1)\n", where,
                WIFSIGNALED(status) ? "signal" : "exit", WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status),
                hdf5 ? " inside libhdf5" : "", kept, (unsigned long long)o->seed, (long long)i);
        findings++;
        *hdf5_faults += hdf5;
        from = i + 1;
    }
    munmap(p, sizeof *p);
    return findings;
}

static int run_cases(const options *o, const fuzz_buf *seeds, int n_seeds, const char *work, int fd_base,
                     int *hdf5_faults)
{
    snprintf(g_case, sizeof g_case, "%s/case%s", work, o->t->ext);
    int findings;
    if (o->isolate) {
        findings = run_supervised(o, seeds, n_seeds, work, fd_base, hdf5_faults);
    } else {
        progress p = {0, 0};
        run_range(o, seeds, n_seeds, fd_base, o->first, o->first + o->cases, &p);
        findings = p.findings;
    }
    unlink(g_case);
    return findings;
}

static int parse(int argc, char **argv, options *o)
{
    static const struct option opts[] = {{"cases", required_argument, 0, 'n'},   {"seed", required_argument, 0, 's'},
                                         {"first", required_argument, 0, 'f'},   {"corpus", required_argument, 0, 'c'},
                                         {"crashes", required_argument, 0, 'k'}, {"timeout", required_argument, 0, 't'},
                                         {"isolate", no_argument, 0, 'i'},       {"save", no_argument, 0, 'S'},
                                         {"exact-leaks", no_argument, 0, 'L'},   {0, 0, 0, 0}};
    *o = (options){.cases = 1000, .seed = 1, .timeout_s = 60, .crashes = "."};
    int c, rc = M2_OK;
    while (rc == M2_OK && (c = m2_cli_next(argc, argv, opts, "see tests/fuzz/fuzz_main.c")) != -1) switch (c) {
        case 'n': rc = m2_parse_i64("--cases", optarg, 0, INT64_C(1) << 40, &o->cases); break;
        case 's': rc = m2_parse_u64("--seed", optarg, 0, UINT64_MAX, &o->seed); break;
        case 'f': rc = m2_parse_i64("--first", optarg, 0, INT64_C(1) << 40, &o->first); break;
        case 'c': o->corpus = optarg; break;
        case 'k': o->crashes = optarg; break;
        case 't': rc = m2_parse_i64("--timeout", optarg, 1, 3600, &o->timeout_s); break;
        case 'i': o->isolate = 1; break;
        case 'S': o->save = 1; break;
        case 'L': o->exact_leaks = 1; break;
        default: rc = M2_EUSAGE; break;
        }
    if (rc) return rc;
    if (optind != argc - 1)
        return m2_fail(M2_EUSAGE, "usage: fuzz_readers TARGET [options] (TARGET: %s)", fuzz_target_names());
    if (!(o->t = fuzz_find_target(argv[optind])))
        return m2_fail(M2_EUSAGE, "target (%s): not one of %s", argv[optind], fuzz_target_names());
    return M2_OK;
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

int main(int argc, char **argv)
{
    options o;
    if (parse(argc, argv, &o)) {
        fprintf(stderr, "fuzz_readers: error: %s\n", m2_last_error());
        return 2;
    }
    /* the scratch folder under $TMPDIR (default /tmp) */
    const char *tmpdir = getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    char work[2048];
    if (snprintf(work, sizeof work, "%s/m2fuzz_XXXXXX", tmpdir) >= (int)sizeof work) {
        fprintf(stderr, "fuzz_readers: error: scratch folder (TMPDIR %.200s): path too long\n", tmpdir);
        return 2;
    }
    if (!mkdtemp(work) || (mkdir(o.crashes, 0755) != 0 && errno != EEXIST)) {
        fprintf(stderr, "fuzz_readers: error: scratch or crash folder (%s): %s\n", o.crashes, strerror(errno));
        return 1;
    }
    m2_h5_quiet();
    /* --exact-leaks: HDF5 frees to malloc at once instead of recycling blocks through its free lists, so a leak
     * report names the call that allocated the lost block (several times slower). */
    if (o.exact_leaks) H5set_free_list_limits(0, 0, 0, 0, 0, 0);
    install_handlers();
    fuzz_buf seeds[MAX_SEEDS];
    int n_seeds = 0;
    if (o.t->seeds(seeds, MAX_SEEDS, &n_seeds, work) || n_seeds == 0) {
        fprintf(stderr, "fuzz_readers: error: seeds (%s): %s\n", o.t->name, n_seeds ? m2_last_error() : "none");
        return 1;
    }
    int fd_base = open("/dev/null", O_RDONLY);
    close(fd_base);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int files = 0, findings = o.corpus ? run_corpus(&o, fd_base, &files) : 0;
    int hdf5_faults = 0;
    findings += run_cases(&o, seeds, n_seeds, work, fd_base, &hdf5_faults);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("fuzz %s: %d corpus files and %lld cases (seed %llu, from %lld) of %d seeds in %.1f s (reader calls: %lld "
           "accepted, %lld refused with one line): %d finding%s (%d inside libhdf5)\n",
           o.t->name, files, (long long)o.cases, (unsigned long long)o.seed, (long long)o.first, n_seeds,
           (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec), (long long)fuzz_accepted,
           (long long)fuzz_refused, findings, findings == 1 ? "" : "s", hdf5_faults);
    for (int i = 0; i < n_seeds; i++) fuzz_buf_free(&seeds[i]);
    if (nftw(work, remove_entry, 16, FTW_DEPTH | FTW_PHYS) != 0)
        fprintf(stderr, "fuzz_readers: could not remove %s\n", work);
    /* A fault inside libhdf5 is reported and kept, but it is HDF5 1.10.8's to fix: only the others fail the run. */
    return findings > hdf5_faults ? 1 : 0;
}
