/* The seeded mutation fuzzer of the readers (docs/TESTING.md "Fuzzing"): seed inputs made by the project's own
 * writers, mutated deterministically (byte flips, interesting values, insertions, deletions, truncation, splicing),
 * each case written to a file and run through a reader in-process. A reader must return M2_OK or fail with one
 * non-empty line; a sanitizer report, a crash or a hang is a finding, saved to the crash folder. */
#ifndef MAMBA2_FUZZ_H
#define MAMBA2_FUZZ_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    unsigned char *data;
    size_t len, cap;
} fuzz_buf;

/* Appends n bytes (aborts when out of memory: the fuzzer's own failure, not a finding). */
void fuzz_buf_put(fuzz_buf *b, const void *p, size_t n);
void fuzz_buf_free(fuzz_buf *b);
/* The whole file into b (replacing its contents); M2_OK or M2_EFAIL. */
int fuzz_buf_read_file(fuzz_buf *b, const char *path);
int fuzz_buf_write_file(const fuzz_buf *b, const char *path);

/* Seeds go into seeds[0..*n) (at most cap); `work` is a scratch folder. Returns M2_OK or M2_EFAIL. */
typedef int (*fuzz_seed_fn)(fuzz_buf *seeds, int cap, int *n, const char *work);
/* Runs the reader on the file at `path`: its return code (M2_OK or the failure's). */
typedef int (*fuzz_run_fn)(const char *path);

typedef struct {
    const char *name; /* csv, ini, dataset, checkpoint: also tests/fuzz/corpus/<name>/ */
    const char *ext;  /* the case file's extension (.csv, .ini, .h5) */
    int binary;       /* HDF5: mutations favour metadata-sized values; text: a token dictionary */
    fuzz_seed_fn seeds;
    fuzz_run_fn run;
} fuzz_target;

/* Reader calls so far that accepted their input and that refused it with one line (a run's summary). */
extern int64_t fuzz_accepted, fuzz_refused;

const fuzz_target *fuzz_find_target(const char *name);
const char *fuzz_target_names(void); /* "csv, ini, dataset, checkpoint" */

/* Case `index` of the run seeded with `seed`: one to eight mutations of a seed chosen (and spliced) by the
 * counter-based generator, so any case can be re-created from (seed, index) alone. */
void fuzz_mutate(const fuzz_target *t, const fuzz_buf *seeds, int n_seeds, uint64_t seed, int64_t index, fuzz_buf *out);

#endif
