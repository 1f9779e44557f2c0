/* An independent oracle for the streaming tests: docs/MODEL.md §2 computed tick by tick in fp64, written as
 * plainly as possible from the formulas (window form of the conv with a shifted history, S stored [P][N] as in
 * the text), sharing no code with the engine. */
#ifndef MAMBA2_TEST_REF_STREAM_H
#define MAMBA2_TEST_REF_STREAM_H

#include "base/layout.h"

/* pred [T,O] for one session X [T,F] starting from zero state. */
void ref_session(const m2_layout *lay, const float *params, const float *X, int T, double *pred);

#endif
