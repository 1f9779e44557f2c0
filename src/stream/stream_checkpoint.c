/* m2_stream_open (stream/mamba2_stream.h): the streaming engine opened from a checkpoint. It lives in the io
 * library because it reads HDF5 through m2_checkpoint_load; the engine itself (core) knows nothing of files. */
#include "base/error.h"
#include "stream/engine.h"
#include "io/checkpoint.h"

int m2_stream_open(const char *checkpoint, const m2_stream_options *opt, m2_stream **out)
{
    *out = NULL;
    m2_checkpoint ck;
    int rc = m2_checkpoint_load(checkpoint, &ck, 0);
    if (rc) return rc;
    if (ck.n_features != ck.lay.d.F) {
        rc = m2_fail(M2_EFAIL, "checkpoint (%s): %d feature statistics for a model of %d features", checkpoint,
                     ck.n_features, ck.lay.d.F);
    } else {
        rc = m2_stream_open_params(&ck.lay, ck.params, ck.mean, ck.std, opt, out);
        /* a universe's rows were z-scored per instrument (docs/FORMATS.md "Universe"): its root statistics are 0
         * and 1, so the instruments' own are what m2_stream_standardize_instrument must apply */
        if (!rc) m2s_set_feature_names(*out, (const char(*)[32])ck.feature_names);
        if (!rc && ck.n_instruments >= 1 && ck.inst_mean)
            rc = m2s_set_instruments(*out, ck.n_instruments, (const char(*)[64])ck.inst_name, ck.inst_mean, ck.inst_std,
                                     M2_MAX_FEATURES, ck.inst_tick);
        if (rc) {
            m2_stream_close(*out);
            *out = NULL;
        }
    }
    m2_checkpoint_free(&ck);
    return rc;
}
