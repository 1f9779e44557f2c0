/* `--version` for every program: the version, the git description of the build and the backends built in.
 * Inline so that it sees the defines of the program that includes it (MAMBA2_HAVE_CUDA is set for programs that
 * link the CUDA library, not for the core library). */
#ifndef MAMBA2_VERSION_H
#define MAMBA2_VERSION_H

#include <stdio.h>

#include "mamba2_git_describe.h" /* generated at build time (cmake/git_describe.cmake) */

static inline void m2_print_version(const char *prog)
{
    printf("%s %s (%s)\nbackends: cpu mpi%s\n", prog, MAMBA2_VERSION, MAMBA2_GIT_DESCRIBE,
#ifdef MAMBA2_HAVE_CUDA
           " cuda nccl"
#else
           ""
#endif
    );
}

#endif
