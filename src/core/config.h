/* The run configuration: INI sections and keys of CLI.md, parsed with inih, overridable with
 * --set section.key=value, printable and serialisable (the resolved config goes into checkpoints).
 * Every key, its type, default and allowed range is one row of the table in config.c. */
#ifndef MAMBA2_CONFIG_H
#define MAMBA2_CONFIG_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    struct {
        char path[1024];          /* tick dataset (FORMATS.md) */
    } data;
    struct {
        int d_model, n_layers, expand, headdim, d_state, ngroups, d_conv, chunk_size;
        char device[16];          /* auto | cpu | cuda */
        char precision[8];        /* bf16 | tf32 | fp32: a GPU's matrix-product operands (the CPU computes in fp32) */
    } model;
    struct {
        int64_t steps;
        int64_t stop_at;          /* stop (with a checkpoint) once this many steps are done; 0: at steps */
        int micro_batch, global_batch, seq_len, burn_in;
        double lr, lr_min, weight_decay, grad_clip;
        int64_t warmup;
        uint64_t seed;
        int64_t eval_every;
        int eval_batches;
        int log_every;            /* status line every N steps */
        int max_bad_steps;        /* non-finite loss/grad steps in a row before stopping */
        int64_t nan_from_step;    /* test hook: from this step on rank 0's loss is NaN (-1: never) */
        int threads;              /* OpenMP/BLAS threads per rank; 0 = all cores / ranks on the node */
        char run_dir[1024];
    } train;
    struct {
        int64_t every;
        int keep;
    } checkpoint;
    struct {
        char backend[16];         /* auto | mpi | nccl | none */
        double timeout_s;         /* collectives watchdog */
        int fail_rank;            /* test hook: this rank fails at fail_step (-1: never) */
        int64_t fail_step;
    } dist;
} m2_config;

/* Fills every key with its default. */
void m2_config_defaults(m2_config *cfg);

/* Parses an INI file over the current values. Unknown section/key, unparsable or out-of-range value:
 * returns M2_EUSAGE with "file:line: section.key: why". */
int m2_config_load_file(m2_config *cfg, const char *path);

/* Parses INI text (e.g. the config stored in a checkpoint); `origin` names it in errors. */
int m2_config_load_string(m2_config *cfg, const char *text, const char *origin);

/* Applies one "section.key=value" override; errors name the --set argument. */
int m2_config_set(m2_config *cfg, const char *assignment);

/* Cross-key checks (ranges that depend on each other: Di % headdim, H % ngroups, burn_in < seq_len, ...). */
int m2_config_validate(const m2_config *cfg, const char *origin);

/* The resolved config as INI text (every key, in table order). Returns a malloc'd string. */
char *m2_config_to_string(const m2_config *cfg);

#endif
