/* mamba2_train: trains a Mamba-2 model on a tick dataset (docs/CLI.md). Run under mpirun/srun for several ranks. */
#include "base/cli.h"
#include "core/blas_core.h"
#include "run/config_file.h"
#include "run/device_api.h"
#include "base/version.h"
#include "base/error.h"
#include "run/train.h"
#include "dist/dist.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PROG "mamba2_train"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: " PROG " --config FILE [--set SECTION.KEY=VALUE]... [--resume auto|FILE]\n"
            "\n"
            "  --config FILE        INI config (sections data, model, train, checkpoint, dist; see configs/)\n"
            "                       model.device auto|cpu|cuda (auto: a GPU per rank when every rank has one),\n"
            "                       dist.backend auto|mpi|nccl|none (auto: NCCL on GPUs, MPI on the CPU)\n"
            "  --set S.K=V          override one key (repeatable), e.g. --set train.steps=100\n"
            "  --resume auto|FILE   continue from the newest complete checkpoint in train.run_dir (auto; a fresh run\n"
            "                       when there is none) or from FILE (default: a fresh run)\n"
            "  --print-config       print the resolved config and exit\n"
            "  --help, --version\n"
            "\n"
            "Several ranks: mpirun -np R " PROG " ... (accumulation steps = global_batch / (micro_batch * R)).\n"
            "SIGTERM/SIGINT: finish the current step, write a checkpoint, exit 0.\n"
            "Exit status: 0 success, 2 bad usage or config, 1 any other failure.\n");
}

/* Parses the command line into cfg; returns -1 to exit 0 (help/version printed), else an M2_* code. */
static int parse_args(int argc, char **argv, m2_config *cfg, const char **resume, int *print_only, int rank)
{
    static const struct option opts[] = {{"config", required_argument, 0, 'c'},
                                         {"set", required_argument, 0, 's'},
                                         {"resume", required_argument, 0, 'r'},
                                         {"help", no_argument, 0, 'h'},
                                         {"version", no_argument, 0, 'V'},
                                         {"print-config", no_argument, 0, 'p'},
                                         {0, 0, 0, 0}};
    const char *config_path = NULL;
    int n_sets = 0;
    const char **sets = calloc((size_t)argc, sizeof *sets);
    int c;
    while ((c = m2_cli_next(argc, argv, opts, PROG " --help")) != -1) {
        switch (c) {
        case 'c': config_path = optarg; break;
        case 's': sets[n_sets++] = optarg; break;
        case 'r': *resume = optarg; break;
        case 'p': *print_only = 1; break;
        case 'h':
            if (rank == 0) usage(stdout);
            free(sets);
            return -1;
        case 'V':
            if (rank == 0) m2_print_version(PROG);
            free(sets);
            return -1;
        default: free(sets); return M2_EUSAGE; /* M2_CLI_BAD: the message is set */
        }
    }
    int rc = M2_OK;
    if (m2_cli_no_extra(argc, argv, 0))
        rc = M2_EUSAGE;
    else if (!config_path)
        rc = m2_fail(M2_EUSAGE, "command line: --config FILE is required (see --help)");
    if (!rc) rc = m2_config_load_file(cfg, config_path);
    for (int i = 0; !rc && i < n_sets; i++) rc = m2_config_set(cfg, sets[i]);
    if (!rc) rc = m2_config_validate(cfg, config_path);
    free(sets);
    return rc;
}

int main(int argc, char **argv)
{
    m2_blas_core_ensure(argv); /* before MPI_Init: it may run this program again (core/blas_core.h) */
    m2_dist pg;
    if (m2_dist_init(&argc, &argv, &pg) != M2_OK) return m2_report(PROG, M2_EFAIL);
    m2_config cfg;
    m2_config_defaults(&cfg);
    const char *resume = NULL;
    int print_only = 0;
    int rc = parse_args(argc, argv, &cfg, &resume, &print_only, pg.rank);
    if (rc == 0 && pg.rank == 0) { /* the resolved config, printed at start (and stored in every checkpoint) */
        char *text = m2_config_to_string(&cfg);
        printf("%s%s\n", print_only ? "" : "# resolved config\n", text ? text : "");
        free(text);
        fflush(stdout);
    }
    if (rc == 0 && !print_only) rc = m2_train_run(&cfg, resume, &pg, m2_program_device_api());
    if (rc > 0 && pg.rank == 0) m2_report(PROG, rc); /* every rank met the same error: report it once */
    m2_dist_finalize(&pg);
    return rc < 0 ? 0 : rc;
}
