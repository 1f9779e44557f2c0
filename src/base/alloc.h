/* Allocation for counts that come from outside (a file's declared shape, an input's row count): the product n x size
 * is overflow-checked before malloc, and a failure leaves one message saying what and how much. */
#ifndef MAMBA2_ALLOC_H
#define MAMBA2_ALLOC_H

#include <stddef.h>
#include <stdint.h>

/* n elements of `size` bytes (n may be 0: a valid 1-byte block). NULL with the message "WHAT: N x SIZE bytes
 * overflow" or "WHAT: out of memory for N x SIZE bytes" (code M2_EFAIL). */
void *m2_alloc_array(int64_t n, size_t size, const char *what);

/* *out = a x b for non-negative counts; 0, or -1 when the product does not fit an int64. */
int m2_mul_count(int64_t a, int64_t b, int64_t *out);

#endif
