/* The process group (docs/ARCHITECTURE.md "The data-parallel step"): who this rank is, where it runs, and
 * the host-buffer collectives the trainer needs. Works under `mpirun -np R`, under `srun --mpi=pmix`, and as one
 * process started without a launcher (MPI's singleton init). Device buffers go through NCCL (CUDA issue), never MPI:
 * Debian's Open MPI is not CUDA-aware.
 *
 * Every collective here is deterministic: reductions of host scalars are done in rank order on every rank (an
 * all-gather, then a local sum), so all ranks get bitwise-identical results run after run, whatever algorithm the
 * MPI library picks. Every wait is bounded by pg->timeout_s (the [dist] timeout_s watchdog): a rank that stops
 * responding turns into an error on the others instead of a hang. Errors follow base/error.h: the function returns
 * M2_EFAIL and leaves "<collective> (rank r): <why>"; the caller usually ends the job with m2_dist_abort. */
#ifndef MAMBA2_DIST_H
#define MAMBA2_DIST_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define M2_DIST_HOST_MAX 64

typedef struct {
    int rank, world;            /* in comm */
    int local_rank, local_size; /* among the ranks sharing this node's memory (MPI_COMM_TYPE_SHARED) */
    int device;                 /* the GPU this rank owns = local_rank; the trainer sets -1 on the CPU path */
    char host[M2_DIST_HOST_MAX];
    char prog[64];    /* program name for error lines (basename of argv[0]) */
    double timeout_s; /* watchdog for every collective wait; <= 0: wait forever */
    MPI_Comm comm;    /* private duplicate: our collectives never match a caller's */
    int owns_mpi;     /* this group called MPI_Init, so m2_dist_finalize calls MPI_Finalize */
} m2_dist;

/* Initialises MPI if nobody has (MPI_THREAD_FUNNELED: OpenMP regions never call MPI) and fills pg for
 * MPI_COMM_WORLD. timeout_s starts at 600 s (the config default); the trainer sets cfg.dist.timeout_s. */
int m2_dist_init(int *argc, char ***argv, m2_dist *pg);

/* A group over an existing communicator (MPI already initialised), e.g. MPI_COMM_SELF for a one-rank reference
 * inside a multi-rank test. prog names the program in error lines. */
int m2_dist_from_comm(m2_dist *pg, MPI_Comm comm, const char *prog);

/* Frees the group's communicators; calls MPI_Finalize when m2_dist_init initialised MPI. */
void m2_dist_finalize(m2_dist *pg);

/* Collective. Rank 0 writes one table (rank -> host, local rank, device) to out; other ranks write nothing. */
int m2_dist_print_table(const m2_dist *pg, FILE *out);

/* Prints "PROG: error: <message> (rank r)" on stderr (without the suffix when the message already names this rank,
 * as this library's messages do) and aborts every rank of the job (MPI_Abort with code), so
 * no rank is left waiting in a collective. Works before MPI is initialised and after it is finalised (then exits). */
_Noreturn void m2_dist_abort(const m2_dist *pg, int code, const char *message);

/* Host collectives (all ranks call them in the same order). */
int m2_dist_barrier(const m2_dist *pg);
int m2_dist_allreduce_sum_f64(const m2_dist *pg, double *x, int n);  /* in place, summed in rank order */
int m2_dist_allreduce_sum_i64(const m2_dist *pg, int64_t *x, int n); /* in place */
int m2_dist_allreduce_max_i64(const m2_dist *pg, int64_t *x, int n); /* in place (e.g. "any rank got SIGTERM") */
int m2_dist_bcast(const m2_dist *pg, void *buf, size_t bytes, int root);
/* Rank r's `bytes` bytes land at recv + r * bytes on rank 0 (recv is ignored elsewhere and may be NULL). */
int m2_dist_gather(const m2_dist *pg, const void *send, size_t bytes, void *recv);

/* Waits for n requests, polling so that the watchdog can fire; `what` names the collective in the error.
 * Used by zero.c for its non-blocking collectives. */
int m2_dist_wait(const m2_dist *pg, int n, MPI_Request *reqs, const char *what);

/* Turns an MPI return code into the error convention: M2_OK, or M2_EFAIL with "what (rank r): <MPI's text>". */
int m2_dist_check(const m2_dist *pg, int mpi_rc, const char *what);

#endif
