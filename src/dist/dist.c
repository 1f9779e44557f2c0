#include "dist/dist.h"

#include "base/error.h"

#include <limits.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void set_prog(m2_dist *pg, const char *prog)
{
    const char *base = prog ? strrchr(prog, '/') : NULL;
    snprintf(pg->prog, sizeof pg->prog, "%s", base ? base + 1 : (prog ? prog : "mamba2"));
}

int m2_dist_check(const m2_dist *pg, int mpi_rc, const char *what)
{
    if (mpi_rc == MPI_SUCCESS) return M2_OK;
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(mpi_rc, text, &len) != MPI_SUCCESS) snprintf(text, sizeof text, "MPI error %d", mpi_rc);
    return m2_fail(M2_EFAIL, "%s (rank %d): %s", what, pg->rank, text);
}

int m2_dist_from_comm(m2_dist *pg, MPI_Comm comm, const char *prog)
{
    memset(pg, 0, sizeof *pg);
    set_prog(pg, prog);
    pg->timeout_s = 600.0;
    pg->comm = MPI_COMM_NULL;
    /* A private duplicate: our non-blocking collectives can never match someone else's on the same comm, and the
     * error handler below does not leak into the caller's communicator. */
    int rc = MPI_Comm_dup(comm, &pg->comm);
    if (rc != MPI_SUCCESS) return m2_dist_check(pg, rc, "MPI_Comm_dup");
    MPI_Comm_set_errhandler(pg->comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(pg->comm, &pg->rank);
    MPI_Comm_size(pg->comm, &pg->world);

    MPI_Comm node;
    rc = MPI_Comm_split_type(pg->comm, MPI_COMM_TYPE_SHARED, pg->rank, MPI_INFO_NULL, &node);
    if (rc != MPI_SUCCESS) return m2_dist_check(pg, rc, "MPI_Comm_split_type");
    MPI_Comm_rank(node, &pg->local_rank);
    MPI_Comm_size(node, &pg->local_size);
    MPI_Comm_free(&node);
    pg->device = pg->local_rank;

    char name[MPI_MAX_PROCESSOR_NAME];
    int len = 0;
    MPI_Get_processor_name(name, &len);
    snprintf(pg->host, sizeof pg->host, "%.*s", (int)sizeof pg->host - 1, name); /* long FQDNs: keep the start */
    return M2_OK;
}

int m2_dist_init(int *argc, char ***argv, m2_dist *pg)
{
    int initialised = 0, provided = 0;
    MPI_Initialized(&initialised);
    if (!initialised) {
        /* With no launcher this is MPI's singleton init: a world of one rank. */
        if (MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
            return m2_fail(M2_EFAIL, "MPI_Init_thread (rank ?): MPI could not start");
    }
    const char *prog = (argv && *argv && (*argv)[0]) ? (*argv)[0] : "mamba2";
    int rc = m2_dist_from_comm(pg, MPI_COMM_WORLD, prog);
    pg->owns_mpi = !initialised;
    return rc;
}

void m2_dist_finalize(m2_dist *pg)
{
    int finalised = 0;
    MPI_Finalized(&finalised);
    if (finalised) return;
    if (pg->comm != MPI_COMM_NULL) MPI_Comm_free(&pg->comm);
    if (pg->owns_mpi) MPI_Finalize();
    pg->owns_mpi = 0;
}

/* Messages from this library (and the trainer) already name the rank, "what (rank r): why" or "(rank r, step s)";
 * m2_dist_abort appends the rank only to messages that do not. */
static int names_rank(const char *message, int rank)
{
    char tag[32];
    int len = snprintf(tag, sizeof tag, "(rank %d", rank);
    for (const char *at = strstr(message, tag); at; at = strstr(at + 1, tag))
        if (at[len] < '0' || at[len] > '9') return 1; /* "(rank 1" must not match "(rank 12" */
    return 0;
}

_Noreturn void m2_dist_abort(const m2_dist *pg, int code, const char *message)
{
    int initialised = 0, finalised = 0, rank = pg ? pg->rank : 0;
    MPI_Initialized(&initialised);
    MPI_Finalized(&finalised);
    if (initialised && !finalised && !pg) MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (!message || !message[0]) message = "unknown failure";
    if (names_rank(message, rank))
        fprintf(stderr, "%s: error: %s\n", pg ? pg->prog : "mamba2", message);
    else
        fprintf(stderr, "%s: error: %s (rank %d)\n", pg ? pg->prog : "mamba2", message, rank);
    fflush(stderr);
    fflush(stdout);
    if (code == 0) code = M2_EFAIL; /* an abort is never a success */
    /* MPI_COMM_WORLD, not pg->comm: the whole job goes, even when pg is a sub-group. */
    if (initialised && !finalised) MPI_Abort(MPI_COMM_WORLD, code);
    exit(code);
}

int m2_dist_wait(const m2_dist *pg, int n, MPI_Request *reqs, const char *what)
{
    if (n <= 0) return M2_OK;
    if (pg->timeout_s <= 0) return m2_dist_check(pg, MPI_Waitall(n, reqs, MPI_STATUSES_IGNORE), what);
    /* Poll: MPI's non-blocking collectives progress inside MPI_Testall. Yield between polls (free when no other
     * process wants the core, and an over-subscribed peer gets to run); once a wait is clearly long (a peer writing
     * a checkpoint), nap so that a waiting rank stops burning its core. */
    const double t0 = MPI_Wtime();
    const struct timespec nap = {0, 200000};
    for (;;) {
        int done = 0;
        int rc = MPI_Testall(n, reqs, &done, MPI_STATUSES_IGNORE);
        if (rc != MPI_SUCCESS) return m2_dist_check(pg, rc, what);
        if (done) return M2_OK;
        double waited = MPI_Wtime() - t0;
        if (waited > pg->timeout_s)
            return m2_fail(M2_EFAIL, "%s (rank %d): no answer from the other ranks after %.0f s ([dist] timeout_s)",
                           what, pg->rank, waited);
        if (waited < 0.1)
            sched_yield();
        else
            nanosleep(&nap, NULL);
    }
}

int m2_dist_barrier(const m2_dist *pg)
{
    MPI_Request req;
    int rc = MPI_Ibarrier(pg->comm, &req);
    if (rc != MPI_SUCCESS) return m2_dist_check(pg, rc, "MPI_Ibarrier");
    return m2_dist_wait(pg, 1, &req, "barrier");
}

int m2_dist_allreduce_sum_f64(const m2_dist *pg, double *x, int n)
{
    if (n <= 0) return M2_OK;
    /* Gather every rank's values, then sum in rank order: a fixed order on every rank, so all ranks agree bitwise
     * (the loss, the grad norm and the skip decision must be identical everywhere). n is a handful of scalars. */
    double *all = malloc((size_t)n * (size_t)pg->world * sizeof *all);
    if (!all) return m2_fail(M2_EFAIL, "allreduce (rank %d): out of memory", pg->rank);
    MPI_Request req;
    int rc = MPI_Iallgather(x, n, MPI_DOUBLE, all, n, MPI_DOUBLE, pg->comm, &req);
    int err = rc != MPI_SUCCESS ? m2_dist_check(pg, rc, "MPI_Iallgather") : m2_dist_wait(pg, 1, &req, "allreduce");
    if (!err) {
        for (int i = 0; i < n; i++) {
            double s = 0.0;
            for (int r = 0; r < pg->world; r++) s += all[(size_t)r * (size_t)n + (size_t)i];
            x[i] = s;
        }
    }
    free(all);
    return err;
}

static int allreduce_i64(const m2_dist *pg, int64_t *x, int n, MPI_Op op)
{
    if (n <= 0) return M2_OK;
    /* Integer sums and maxima are exact, so any reduction order gives the same answer. */
    MPI_Request req;
    int rc = MPI_Iallreduce(MPI_IN_PLACE, x, n, MPI_INT64_T, op, pg->comm, &req);
    if (rc != MPI_SUCCESS) return m2_dist_check(pg, rc, "MPI_Iallreduce");
    return m2_dist_wait(pg, 1, &req, "allreduce");
}

int m2_dist_allreduce_sum_i64(const m2_dist *pg, int64_t *x, int n) { return allreduce_i64(pg, x, n, MPI_SUM); }
int m2_dist_allreduce_max_i64(const m2_dist *pg, int64_t *x, int n) { return allreduce_i64(pg, x, n, MPI_MAX); }

int m2_dist_bcast(const m2_dist *pg, void *buf, size_t bytes, int root)
{
    /* MPI counts are int: large buffers go in pieces of 1 GiB. */
    const size_t piece = (size_t)1 << 30;
    for (size_t off = 0; off < bytes; off += piece) {
        int count = (int)(bytes - off < piece ? bytes - off : piece);
        MPI_Request req;
        int rc = MPI_Ibcast((char *)buf + off, count, MPI_BYTE, root, pg->comm, &req);
        if (rc != MPI_SUCCESS) return m2_dist_check(pg, rc, "MPI_Ibcast");
        if ((rc = m2_dist_wait(pg, 1, &req, "broadcast"))) return rc;
    }
    return M2_OK;
}

int m2_dist_gather(const m2_dist *pg, const void *send, size_t bytes, void *recv)
{
    if (bytes > INT_MAX)
        return m2_fail(M2_EUSAGE, "gather (rank %d): %zu bytes per rank is over MPI's limit", pg->rank, bytes);
    MPI_Request req;
    int rc = MPI_Igather(send, (int)bytes, MPI_BYTE, pg->rank == 0 ? recv : NULL, (int)bytes, MPI_BYTE, 0, pg->comm,
                         &req);
    if (rc != MPI_SUCCESS) return m2_dist_check(pg, rc, "MPI_Igather");
    return m2_dist_wait(pg, 1, &req, "gather");
}

typedef struct {
    char host[M2_DIST_HOST_MAX];
    int local_rank, device;
} rank_row;

int m2_dist_print_table(const m2_dist *pg, FILE *out)
{
    rank_row mine;
    memset(&mine, 0, sizeof mine);
    snprintf(mine.host, sizeof mine.host, "%s", pg->host);
    mine.local_rank = pg->local_rank;
    mine.device = pg->device;
    rank_row *rows = NULL;
    if (pg->rank == 0 && !(rows = calloc((size_t)pg->world, sizeof *rows)))
        return m2_fail(M2_EFAIL, "rank table (rank 0): out of memory");
    int err = m2_dist_gather(pg, &mine, sizeof mine, rows);
    if (!err && pg->rank == 0) {
        fprintf(out, "%-6s %-24s %-10s %s\n", "rank", "host", "local", "device");
        for (int r = 0; r < pg->world; r++) {
            char dev[16];
            if (rows[r].device >= 0)
                snprintf(dev, sizeof dev, "cuda:%d", rows[r].device);
            else
                snprintf(dev, sizeof dev, "cpu");
            fprintf(out, "%-6d %-24s %-10d %s\n", r, rows[r].host, rows[r].local_rank, dev);
        }
        fflush(out);
    }
    free(rows);
    return err;
}
