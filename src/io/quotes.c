#include "io/quotes.h"

#include <math.h>
#include <stdlib.h>

#include "base/error.h"
#include "io/h5util.h"

int m2_quotes_half_spread_bp(const char *path, const int64_t *rows, int64_t n, float *half_bp, int *found)
{
    *found = 0;
    m2_h5_quiet();
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f < 0) return m2_h5_fail(M2_EFAIL, "quotes", path, "cannot open");
    int rc = M2_OK;
    double *bid = NULL, *ask = NULL;
    if (m2_h5_exists(f, "/raw/bid_px") && m2_h5_exists(f, "/raw/ask_px")) {
        int64_t nb = -1, na = -1;
        rc = m2_h5_read_alloc(f, "/raw/bid_px", M2_H5_F64, 1, &nb, (void **)&bid);
        if (!rc) rc = m2_h5_read_alloc(f, "/raw/ask_px", M2_H5_F64, 1, &na, (void **)&ask);
        if (!rc && (nb != na || (n > 0 && rows[n - 1] >= nb)))
            rc = m2_fail(M2_EFAIL, "quotes (%s): /raw has %lld rows, fewer than the rows evaluated", path,
                         (long long)nb);
        for (int64_t i = 0; i < n && !rc; i++) {
            double b = bid[rows[i]], a = ask[rows[i]], h = 1e4 * (a - b) / (a + b);
            half_bp[i] = isfinite(h) && h > 0 ? (float)h : 0.0f;
        }
        *found = !rc;
    }
    free(bid);
    free(ask);
    H5Fclose(f);
    return rc;
}
