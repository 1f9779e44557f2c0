/* A job that fails on purpose (driven by test_dist_fault.sh): rank 1 fails in one of several ways while the other
 * ranks wait in a collective; the job must end promptly and non-zero, with the failing rank's message.
 *   abort    rank 1 calls m2_dist_abort (the trainer's path for any fatal error)
 *   exit     rank 1 exits with status 3 without MPI_Finalize (a crash that still runs exit handlers)
 *   kill     rank 1 is killed by SIGKILL
 *   hang     rank 1 stops answering; the others' watchdog ([dist] timeout_s = 2 here) turns the wait into an error,
 *            which they report through m2_dist_abort */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/error.h"
#include "dist/dist.h"

int main(int argc, char **argv)
{
    m2_dist pg;
    if (m2_dist_init(&argc, &argv, &pg)) return m2_report("dist_fault", M2_EFAIL);
    const char *mode = argc > 1 ? argv[1] : "abort";
    pg.timeout_s = 2;
    if (m2_dist_barrier(&pg)) m2_dist_abort(&pg, M2_EFAIL, m2_last_error());
    if (pg.rank == 1) {
        if (strcmp(mode, "abort") == 0) m2_dist_abort(&pg, M2_EFAIL, "injected failure at step 3");
        if (strcmp(mode, "exit") == 0) exit(3);
        if (strcmp(mode, "kill") == 0) raise(SIGKILL);
        if (strcmp(mode, "hang") == 0) sleep(60);
    }
    if (m2_dist_barrier(&pg)) m2_dist_abort(&pg, M2_EFAIL, m2_last_error());
    m2_dist_finalize(&pg);
    return 0;
}
