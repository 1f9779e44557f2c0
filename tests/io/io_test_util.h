/* Helpers shared by the io tests: temporary paths and a small hand-made dataset. */
#ifndef MAMBA2_IO_TEST_UTIL_H
#define MAMBA2_IO_TEST_UTIL_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/dataset.h"

/* A fresh temporary folder per test program (removed by the caller with remove_tree). */
static inline const char *test_dir(void)
{
    static char dir[64];
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "/tmp/m2io_XXXXXX");
        if (!mkdtemp(dir)) abort();
    }
    return dir;
}

static inline const char *test_path(const char *name)
{
    static char buf[16][256];
    static int k;
    k = (k + 1) % 16;
    snprintf(buf[k], sizeof buf[k], "%s/%s", test_dir(), name);
    return buf[k];
}

static inline void remove_test_dir(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", test_dir());
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", test_dir());
}

static inline void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (!f) abort();
    fputs(text, f);
    fclose(f);
}

/* A dataset made from arrays alone: n rows, F features, O targets, sessions at the given offsets,
 * values that identify their position (so a mix-up shows), NaN targets where the horizon crosses a session end. */
static inline void make_dataset(m2_dataset *ds, int64_t n, int F, int O, const int64_t *sessions, int64_t n_sessions)
{
    memset(ds, 0, sizeof *ds);
    ds->n_rows = n;
    ds->n_features = F;
    ds->n_targets = O;
    ds->X = malloc((size_t)(n * F) * sizeof *ds->X);
    ds->y = malloc((size_t)(n * O) * sizeof *ds->y);
    ds->n_sessions = n_sessions;
    ds->sessions = malloc((size_t)(n_sessions + 1) * sizeof *ds->sessions);
    memcpy(ds->sessions, sessions, (size_t)(n_sessions + 1) * sizeof *sessions);
    for (int k = 0; k < O; k++) ds->horizons[k] = 1 + 2 * k;
    for (int64_t s = 0; s < n_sessions; s++)
        for (int64_t i = sessions[s]; i < sessions[s + 1]; i++) {
            for (int j = 0; j < F; j++) ds->X[i * F + j] = (float)i + 0.001f * (float)j;
            for (int k = 0; k < O; k++)
                ds->y[i * O + k] = i + ds->horizons[k] < sessions[s + 1] ? (float)(i * 10 + k) : NAN;
        }
    for (int j = 0; j < F; j++) {
        snprintf(ds->feature_names[j], sizeof ds->feature_names[j], "feature_%d", j);
        ds->mean[j] = 0.5 * j;
        ds->std[j] = 1.0 + j;
    }
    ds->clip = 5.0f;
    int64_t a = (int64_t)(0.8 * (double)n), b = (int64_t)(0.9 * (double)n);
    ds->split[0][0] = 0;
    ds->split[0][1] = a;
    ds->split[1][0] = a;
    ds->split[1][1] = b;
    ds->split[2][0] = b;
    ds->split[2][1] = n;
    snprintf(ds->instrument, sizeof ds->instrument, "TEST");
    snprintf(ds->source, sizeof ds->source, "unit test");
    ds->tick_size = 0.25;
}

#endif
