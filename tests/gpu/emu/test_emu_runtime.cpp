/* The emulated runtime catches what a GPU would refuse (tests/gpu/emu/emu.cpp): a launch over the block limits
 * (more than 1024 threads, block.z above 64), an empty or oversized grid, more than 48 KiB of dynamic shared memory
 * without the opt-in. Such a launch runs nothing and cudaGetLastError reports cudaErrorInvalidConfiguration once
 * (then cudaSuccess again), as on the hardware; a valid launch runs every thread and leaves no error.
 *
 * Streams (emu_streams.h): a writer on stream a, a reader on stream b. With b waiting for an event recorded on a
 * after the write, the reader sees the written values in both modes. Without the wait, the synchronous mode still
 * passes (every operation runs when issued: the race is invisible), while the interleaved mode runs b's queue
 * alone when b is synchronised and the reader sees the old values: the missing wait fails, as it could on a GPU. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
extern "C" {
#include <cmocka.h>
}

#include "cuda_runtime.h"
#include "emu_streams.h"

static int g_ran;

static void count_kernel() { g_ran++; }

static void launch(dim3 grid, dim3 block, size_t shmem)
{
    g_ran = 0;
    m2emu::launch(grid, block, shmem)("count_kernel", [](auto &&...a) { count_kernel(a...); })();
}

static void test_valid_launch(void **state)
{
    (void)state;
    launch(dim3(3), dim3(64), 48 * 1024);
    assert_int_equal(g_ran, 3 * 64);
    assert_int_equal(cudaGetLastError(), cudaSuccess);
}

static void test_refused_launches(void **state)
{
    (void)state;
    const struct {
        dim3 grid, block;
        size_t shmem;
    } bad[] = {
        {dim3(1), dim3(1025), 0},      {dim3(1), dim3(1, 1, 65), 0},       {dim3(0), dim3(32), 0},
        {dim3(1, 65536), dim3(32), 0}, {dim3(1), dim3(32), 48 * 1024 + 1},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        launch(bad[i].grid, bad[i].block, bad[i].shmem);
        assert_int_equal(g_ran, 0);
        assert_int_equal(cudaGetLastError(), cudaErrorInvalidConfiguration);
        assert_int_equal(cudaGetLastError(), cudaSuccess); /* read once, then cleared */
    }
}

enum { N = 256 };

static void fill_kernel(float *x, int n, float v)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = v;
}

static void copy_kernel(float *y, const float *x, int n)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i];
}

/* y[0] after: x = 0; on a: x = 1, record; on b: (wait), y = x; sync b */
static float reader_sees(bool interleave, bool wait)
{
    m2emu_set_interleave(interleave);
    cudaStream_t a, b;
    cudaEvent_t e;
    float *x, *y, host = -1.0f;
    assert_int_equal(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking), cudaSuccess);
    assert_int_equal(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking), cudaSuccess);
    assert_int_equal(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), cudaSuccess);
    assert_int_equal(cudaMalloc(&x, N * sizeof(float)), cudaSuccess);
    assert_int_equal(cudaMalloc(&y, N * sizeof(float)), cudaSuccess);
    cudaMemsetAsync(x, 0, N * sizeof(float), a);
    cudaMemsetAsync(y, 0xff, N * sizeof(float), b);
    cudaStreamSynchronize(a);
    cudaStreamSynchronize(b);
    m2emu::launch(dim3(1), dim3(N), 0, a)("fill_kernel", [](auto &&...m) { fill_kernel(m...); })(x, (int)N, 1.0f);
    cudaEventRecord(e, a);
    if (wait) cudaStreamWaitEvent(b, e, 0);
    m2emu::launch(dim3(1), dim3(N), 0, b)("copy_kernel", [](auto &&...m) { copy_kernel(m...); })(y, x, (int)N);
    cudaStreamSynchronize(b);
    cudaMemcpyAsync(&host, y, sizeof host, cudaMemcpyDeviceToHost, b);
    cudaStreamSynchronize(a);
    cudaFree(x);
    cudaFree(y);
    cudaEventDestroy(e);
    cudaStreamDestroy(a);
    cudaStreamDestroy(b);
    m2emu_set_interleave(0);
    return host;
}

static void test_event_wait_orders_streams(void **state)
{
    (void)state;
    assert_true(reader_sees(false, true) == 1.0f);
    assert_true(reader_sees(true, true) == 1.0f);
}

static void test_missing_wait_caught_when_interleaved(void **state)
{
    (void)state;
    assert_true(reader_sees(false, false) == 1.0f); /* synchronous: invisible */
    assert_true(reader_sees(true, false) == 0.0f);  /* interleaved: the reader ran before the writer */
}

/* A polled stream makes progress: cudaStreamQuery answers cudaErrorNotReady while work is queued, and the
 * queue empties within as many polls as it has operations. */
static void test_query_progresses(void **state)
{
    (void)state;
    m2emu_set_interleave(1);
    cudaStream_t s;
    float *x;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    cudaMalloc(&x, N * sizeof(float));
    for (int i = 0; i < 3; i++) cudaMemsetAsync(x, 0, N * sizeof(float), s);
    int polls = 0;
    while (cudaStreamQuery(s) == cudaErrorNotReady) polls++;
    assert_int_equal(polls, 3);
    cudaFree(x);
    cudaStreamDestroy(s);
    m2emu_set_interleave(0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid_launch),
        cmocka_unit_test(test_refused_launches),
        cmocka_unit_test(test_event_wait_orders_streams),
        cmocka_unit_test(test_missing_wait_caught_when_interleaved),
        cmocka_unit_test(test_query_progresses),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
