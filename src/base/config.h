/* The run configuration: INI sections and keys (docs/CLI.md), overridable with --set section.key=value,
 * printable and serialisable (the resolved config goes into checkpoints as canonical text). Every key, its type,
 * default and allowed range is one row of the table in config.c; INI files are read by run/config_file.h. */
#ifndef MAMBA2_CONFIG_H
#define MAMBA2_CONFIG_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    struct {
        char path[1024];   /* tick dataset (docs/FORMATS.md) */
        char sampling[16]; /* proportional | uniform: training windows across a universe's instruments */
    } data;
    struct {
        int d_model, n_layers, expand, headdim, d_state, ngroups, d_conv, chunk_size;
        char device[16];     /* auto | cpu | cuda */
        char precision[8];   /* bf16 | tf32 | fp32: a GPU's matrix-product operands (the CPU computes in fp32) */
        char ssd_states[12]; /* recompute | keep: a GPU's SSD chunk states in the backward (the CPU keeps them) */
    } model;
    struct {
        int64_t steps;
        int64_t stop_at; /* stop (with a checkpoint) once this many steps are done; 0: at steps */
        int micro_batch, global_batch, seq_len, burn_in;
        double lr, lr_min, weight_decay, grad_clip;
        int64_t warmup;
        uint64_t seed;
        int64_t eval_every;
        int eval_batches;      /* no effect since validation runs over the val split (kept: old configs load) */
        int64_t val_max_rows;  /* validation rows: the val split's first val_max_rows rows; 0: all */
        char select_by[16];    /* val_loss | ic@H: what picks ckpt_best.h5 (run/select.h) */
        int patience;          /* evaluations without improvement before stopping early; 0: never */
        int log_every;         /* status line every N steps */
        int max_bad_steps;     /* non-finite loss/grad steps in a row before stopping */
        int64_t nan_from_step; /* test hook: from this step on rank 0's loss is NaN (-1: never) */
        int threads;           /* OpenMP/BLAS threads per rank; 0 = all cores / ranks on the node */
        char run_dir[1024];
    } train;
    struct {
        int64_t every;
        int keep;
    } checkpoint;
    struct {
        char backend[16]; /* auto | mpi | nccl | none */
        double timeout_s; /* collectives watchdog */
        int fail_rank;    /* test hook: this rank fails at fail_step (-1: never) */
        int64_t fail_step;
    } dist;
} m2_config;

/* Fills every key with its default. */
void m2_config_defaults(m2_config *cfg);

/* Stores one value: `where` names it in errors ("file:line", "--set ..."), `section_where` names the section's
 * line when the section is unknown. M2_EUSAGE for an unknown section or key, an unparsable or out-of-range value.
 * The INI loader (run/config_file.h) calls it for every key of a file. */
int m2_config_assign(m2_config *cfg, const char *section, const char *key, const char *value, const char *where,
                     const char *section_where);

/* Reads the canonical text that m2_config_to_string writes ("[section]" and "key = value" lines, blank lines),
 * as stored in checkpoints: lines of any length, no inih. `origin` names the text in errors ("origin:line"). */
int m2_config_from_text(m2_config *cfg, const char *text, const char *origin);

/* Applies one "section.key=value" override; errors name the --set argument. */
int m2_config_set(m2_config *cfg, const char *assignment);

/* Cross-key checks (ranges that depend on each other: Di % headdim, H % ngroups, burn_in < seq_len, ...). */
int m2_config_validate(const m2_config *cfg, const char *origin);

/* train.select_by: 0 for "val_loss", H for "ic@H" (H > 0), -1 when it is neither. */
int m2_select_by_horizon(const char *select_by);

/* The resolved config as INI text (every key, in table order). Returns a malloc'd string. */
char *m2_config_to_string(const m2_config *cfg);

#endif
