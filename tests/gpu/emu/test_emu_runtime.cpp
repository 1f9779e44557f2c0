/* The emulated runtime catches what a GPU would refuse (tests/gpu/emu/emu.cpp): a launch over the block limits
 * (more than 1024 threads, block.z above 64), an empty or oversized grid, more than 48 KiB of dynamic shared memory
 * without the opt-in. Such a launch runs nothing and cudaGetLastError reports cudaErrorInvalidConfiguration once
 * (then cudaSuccess again), as on the hardware; a valid launch runs every thread and leaves no error. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
extern "C" {
#include <cmocka.h>
}

#include "cuda_runtime.h"

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
        {dim3(1), dim3(1025), 0},        {dim3(1), dim3(1, 1, 65), 0}, {dim3(0), dim3(32), 0},
        {dim3(1, 65536), dim3(32), 0},   {dim3(1), dim3(32), 48 * 1024 + 1},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        launch(bad[i].grid, bad[i].block, bad[i].shmem);
        assert_int_equal(g_ran, 0);
        assert_int_equal(cudaGetLastError(), cudaErrorInvalidConfiguration);
        assert_int_equal(cudaGetLastError(), cudaSuccess); /* read once, then cleared */
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid_launch),
        cmocka_unit_test(test_refused_launches),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
