/* Test fixture for the mamba2_eval command-line test: writes into DIR
 *   data.h5     a small tick dataset (4 features, horizons 2 and 5, 4 sessions, train/val/test 400/100/100 rows)
 *               whose first target is linear in the features (so the ridge baseline has something to find)
 *   data_f5.h5  the same with 5 features (a dataset that does not fit the checkpoint)
 *   ckpt_7.h5   a checkpoint of a small seeded model for data.h5 ([data] path = DIR/data.h5, step 7)
 * without the trainer or the generator, so the test depends only on the formats. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/config.h"
#include "base/error.h"
#include "base/layout.h"
#include "base/rng.h"
#include "io/checkpoint.h"
#include "io/dataset.h"

enum { NROWS = 600, NSES = 4, O = 2 };
static const int64_t SESSIONS[NSES + 1] = {0, 180, 330, 470, 600};
static const int32_t HORIZONS[O] = {2, 5};

static double gauss(m2_rng *r)
{
    double u = m2_rng_next_u01(r), v = m2_rng_next_u01(r);
    return sqrt(-2.0 * log(1.0 - u)) * cos(2.0 * M_PI * v);
}

static int session_end(int64_t i)
{
    for (int s = 1; s <= NSES; s++)
        if (i < SESSIONS[s]) return (int)SESSIONS[s];
    return NROWS;
}

static int write_dataset(const char *path, int F)
{
    m2_dataset ds;
    memset(&ds, 0, sizeof ds);
    ds.n_rows = NROWS;
    ds.n_features = F;
    ds.n_targets = O;
    ds.X = malloc(sizeof(float) * NROWS * (size_t)F);
    ds.y = malloc(sizeof(float) * NROWS * O);
    ds.n_sessions = NSES;
    ds.sessions = (int64_t *)SESSIONS;
    int64_t split[3][2] = {{0, 400}, {400, 500}, {500, 600}};
    memcpy(ds.split, split, sizeof split);
    for (int j = 0; j < F; j++) {
        snprintf(ds.feature_names[j], sizeof ds.feature_names[j], "f%d", j);
        ds.mean[j] = 0;
        ds.std[j] = 1;
    }
    ds.clip = 5;
    memcpy(ds.horizons, HORIZONS, sizeof HORIZONS);
    snprintf(ds.instrument, sizeof ds.instrument, "TEST");
    snprintf(ds.source, sizeof ds.source, "eval_fixture");
    ds.tick_size = 0.01;
    m2_rng r = {m2_rng_key(9, M2_RNG_TEST, (uint64_t)F, 0), 0};
    for (int64_t i = 0; i < NROWS; i++) {
        float *x = ds.X + i * F;
        for (int j = 0; j < F; j++) x[j] = (float)gauss(&r);
        for (int o = 0; o < O; o++) /* NaN where the horizon crosses the session end */
            ds.y[i * O + o] = i + HORIZONS[o] >= session_end(i)
                                  ? NAN
                                  : (float)(o == 0 ? 2 * x[0] - x[1] + 0.5 * gauss(&r) : gauss(&r));
    }
    int rc = m2_dataset_write(path, &ds);
    free(ds.X);
    free(ds.y);
    return rc;
}

static int write_checkpoint(const char *dir, const char *data_path)
{
    m2_checkpoint ck;
    memset(&ck, 0, sizeof ck);
    m2_config_defaults(&ck.cfg);
    ck.cfg.model.d_model = 16;
    ck.cfg.model.n_layers = 2;
    ck.cfg.model.headdim = 8;
    ck.cfg.model.d_state = 8;
    ck.cfg.model.chunk_size = 8;
    ck.cfg.train.seq_len = 32;
    ck.cfg.train.burn_in = 8;
    snprintf(ck.cfg.data.path, sizeof ck.cfg.data.path, "%s", data_path);
    m2_dims d;
    int rc = m2_dims_init(&d, &ck.cfg, 4, O);
    if (rc == M2_OK) rc = m2_layout_init(&ck.lay, &d);
    if (rc != M2_OK) return rc;
    ck.params = malloc(sizeof(float) * ck.lay.n_params);
    m2_params_init(&ck.lay, ck.params, 1234);
    ck.step = 7;
    ck.world_size_at_save = 1;
    ck.n_features = 4;
    for (int j = 0; j < 4; j++) {
        snprintf(ck.feature_names[j], sizeof ck.feature_names[j], "f%d", j);
        ck.std[j] = 1;
    }
    rc = m2_checkpoint_save(dir, &ck, NULL, 0);
    free(ck.params);
    m2_layout_free(&ck.lay);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: eval_fixture DIR\n");
        return 2;
    }
    char data[1000], f5[1000]; /* data fits the config's [data] path (1024) */
    snprintf(data, sizeof data, "%s/data.h5", argv[1]);
    snprintf(f5, sizeof f5, "%s/data_f5.h5", argv[1]);
    int rc = write_dataset(data, 4);
    if (rc == M2_OK) rc = write_dataset(f5, 5);
    if (rc == M2_OK) rc = write_checkpoint(argv[1], data);
    return rc == M2_OK ? 0 : m2_report("eval_fixture", rc);
}
