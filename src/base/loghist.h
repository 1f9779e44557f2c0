/* A histogram of positive values (latencies in ns) in bounded memory: 256 linear buckets per power of two, so a
 * quantile read from it is within 0.4% of the exact nearest-rank value (the bucket's middle, clamped to the
 * smallest and largest value seen; those two themselves exact); count, mean and max are exact. Values below 1 share the first bucket, those
 * of 2^40 and more the last. Used where one value per step of an unbounded run would otherwise be kept
 * (mamba2_stream). */
#ifndef MAMBA2_LOGHIST_H
#define MAMBA2_LOGHIST_H

#include <stdint.h>

#define M2_LOGHIST_SUB  256
#define M2_LOGHIST_EXPS 41 /* 2^0 .. 2^40 */

typedef struct {
    int64_t n;
    double sum, min, max;
    int64_t count[M2_LOGHIST_EXPS * M2_LOGHIST_SUB];
} m2_loghist;

void m2_loghist_init(m2_loghist *h);
void m2_loghist_add(m2_loghist *h, double v);

/* The nearest-rank q-quantile (the ceil(q n)-th smallest value), approximately; 0 when empty. */
double m2_loghist_quantile(const m2_loghist *h, double q);

#endif
