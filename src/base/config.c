#include "base/config.h"

#include "base/cli.h"
#include "base/error.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum { K_INT, K_I64, K_U64, K_DBL, K_STR } key_type;

typedef struct {
    const char *section, *key;
    key_type type;
    size_t offset, size; /* size: capacity for strings */
    double lo, hi;       /* allowed range for numbers (inclusive) */
    const char *def;     /* default, as text */
    const char *choices; /* for strings: "a|b|c", or NULL for free text */
} key_spec;

#define F(field) offsetof(m2_config, field), sizeof(((m2_config *)0)->field)
static const key_spec KEYS[] = {
    {"data", "path", K_STR, F(data.path), 0, 0, "data/ticks.h5", NULL},
    {"data", "sampling", K_STR, F(data.sampling), 0, 0, "proportional", "proportional|uniform"},
    {"model", "d_model", K_INT, F(model.d_model), 1, 65536, "128", NULL},
    {"model", "n_layers", K_INT, F(model.n_layers), 1, 1024, "4", NULL},
    {"model", "expand", K_INT, F(model.expand), 1, 16, "2", NULL},
    {"model", "headdim", K_INT, F(model.headdim), 1, 1024, "32", NULL},
    {"model", "d_state", K_INT, F(model.d_state), 1, 1024, "64", NULL},
    {"model", "ngroups", K_INT, F(model.ngroups), 1, 1024, "1", NULL},
    {"model", "d_conv", K_INT, F(model.d_conv), 1, 16, "4", NULL},
    {"model", "chunk_size", K_INT, F(model.chunk_size), 1, 4096, "64", NULL},
    {"model", "device", K_STR, F(model.device), 0, 0, "auto", "auto|cpu|cuda"},
    {"model", "precision", K_STR, F(model.precision), 0, 0, "bf16", "bf16|tf32|fp32"},
    {"model", "ssd_states", K_STR, F(model.ssd_states), 0, 0, "recompute", "recompute|keep"},
    {"train", "steps", K_I64, F(train.steps), 0, 1e15, "1000", NULL},
    {"train", "stop_at", K_I64, F(train.stop_at), 0, 1e15, "0", NULL},
    {"train", "micro_batch", K_INT, F(train.micro_batch), 1, 1 << 20, "8", NULL},
    {"train", "global_batch", K_INT, F(train.global_batch), 1, 1 << 24, "8", NULL},
    {"train", "seq_len", K_INT, F(train.seq_len), 1, 1 << 24, "512", NULL},
    {"train", "burn_in", K_INT, F(train.burn_in), 0, 1 << 24, "64", NULL},
    {"train", "lr", K_DBL, F(train.lr), 1e-12, 10, "1e-3", NULL},
    {"train", "lr_min", K_DBL, F(train.lr_min), 0, 10, "1e-4", NULL},
    {"train", "warmup", K_I64, F(train.warmup), 0, 1e15, "100", NULL},
    {"train", "weight_decay", K_DBL, F(train.weight_decay), 0, 10, "0.1", NULL},
    {"train", "grad_clip", K_DBL, F(train.grad_clip), 0, 1e30, "1.0", NULL},
    {"train", "seed", K_U64, F(train.seed), 0, 18446744073709551615.0, "1234", NULL},
    {"train", "eval_every", K_I64, F(train.eval_every), 0, 1e15, "100", NULL},
    {"train", "eval_batches", K_INT, F(train.eval_batches), 0, 1 << 20, "4", NULL},
    {"train", "val_max_rows", K_I64, F(train.val_max_rows), 0, 1e15, "1000000", NULL},
    {"train", "select_by", K_STR, F(train.select_by), 0, 0, "val_loss", NULL},
    {"train", "patience", K_INT, F(train.patience), 0, 1 << 30, "0", NULL},
    {"train", "log_every", K_INT, F(train.log_every), 1, 1 << 30, "10", NULL},
    {"train", "max_bad_steps", K_INT, F(train.max_bad_steps), 1, 1 << 30, "5", NULL},
    {"train", "nan_from_step", K_I64, F(train.nan_from_step), -1, 1e15, "-1", NULL},
    {"train", "threads", K_INT, F(train.threads), 0, 4096, "0", NULL},
    {"train", "run_dir", K_STR, F(train.run_dir), 0, 0, "runs/default", NULL},
    {"checkpoint", "every", K_I64, F(checkpoint.every), 0, 1e15, "500", NULL},
    {"checkpoint", "keep", K_INT, F(checkpoint.keep), 1, 1 << 20, "3", NULL},
    {"dist", "backend", K_STR, F(dist.backend), 0, 0, "auto", "auto|mpi|nccl|none"},
    {"dist", "timeout_s", K_DBL, F(dist.timeout_s), 1, 1e7, "600", NULL},
    {"dist", "fail_rank", K_INT, F(dist.fail_rank), -1, 1 << 20, "-1", NULL},
    {"dist", "fail_step", K_I64, F(dist.fail_step), -1, 1e15, "-1", NULL},
};
#undef F
#define N_KEYS (sizeof KEYS / sizeof KEYS[0])

static const key_spec *find_key(const char *section, const char *key)
{
    for (size_t i = 0; i < N_KEYS; i++)
        if (strcmp(KEYS[i].section, section) == 0 && strcmp(KEYS[i].key, key) == 0) return &KEYS[i];
    return NULL;
}

static int section_exists(const char *section)
{
    for (size_t i = 0; i < N_KEYS; i++)
        if (strcmp(KEYS[i].section, section) == 0) return 1;
    return 0;
}

static int choice_allowed(const char *choices, const char *value)
{
    size_t n = strlen(value);
    for (const char *p = choices; *p;) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (len == n && strncmp(p, value, n) == 0) return 1;
        if (!bar) break;
        p = bar + 1;
    }
    return 0;
}

/* Stores `value` into the field of `spec`; `where` prefixes any error ("file:line" or "--set x=y"). */
static int assign(m2_config *cfg, const key_spec *spec, const char *value, const char *where)
{
    char *field = (char *)cfg + spec->offset;
    if (spec->type == K_STR) {
        if (strlen(value) >= spec->size)
            return m2_fail(M2_EUSAGE, "%s: %s.%s: value longer than %zu characters", where, spec->section, spec->key,
                           spec->size - 1);
        if (spec->choices && !choice_allowed(spec->choices, value))
            return m2_fail(M2_EUSAGE, "%s: %s.%s: '%s' is not one of %s", where, spec->section, spec->key, value,
                           spec->choices);
        memcpy(field, value, strlen(value) + 1);
        return M2_OK;
    }
    /* Numbers are parsed strictly by base/cli.h (whole text, no wrap, in range): the same rules as options. */
    char what[1200];
    snprintf(what, sizeof what, "%s: %s.%s", where, spec->section, spec->key);
    int64_t as_int = 0;
    uint64_t as_u64 = 0;
    double number = 0;
    int rc;
    if (spec->type == K_DBL)
        rc = m2_parse_f64(what, value, spec->lo, spec->hi, 0, &number);
    else if (spec->type == K_U64)
        rc = m2_parse_u64(what, value, (uint64_t)spec->lo, UINT64_MAX, &as_u64);
    else
        rc = m2_parse_i64(what, value, (int64_t)spec->lo, (int64_t)spec->hi, &as_int);
    if (rc) return rc;
    switch (spec->type) {
    case K_INT: *(int *)field = (int)as_int; break;
    case K_I64: *(int64_t *)field = (int64_t)as_int; break;
    case K_U64: *(uint64_t *)field = (uint64_t)as_u64; break;
    case K_DBL: *(double *)field = number; break;
    default: break;
    }
    return M2_OK;
}

void m2_config_defaults(m2_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    for (size_t i = 0; i < N_KEYS; i++) assign(cfg, &KEYS[i], KEYS[i].def, "default");
}

int m2_config_assign(m2_config *cfg, const char *section, const char *key, const char *value, const char *where,
                     const char *section_where)
{
    const key_spec *spec = find_key(section, key);
    if (spec) return assign(cfg, spec, value, where);
    if (section_exists(section)) return m2_fail(M2_EUSAGE, "%s: unknown key '%s' in section [%s]", where, key, section);
    if (section[0]) return m2_fail(M2_EUSAGE, "%s: unknown section [%s]", section_where, section);
    return m2_fail(M2_EUSAGE, "%s: key '%s' outside any [section]", where, key);
}

/* One line of the canonical text: "[section]", "key = value" or blank. Trailing CR/LF already removed. */
static int canonical_line(m2_config *cfg, char *line, char *section, size_t section_cap, const char *origin, int n)
{
    char where[1100];
    snprintf(where, sizeof where, "%s:%d", origin, n);
    if (line[0] == '\0') return M2_OK;
    size_t len = strlen(line);
    if (line[0] == '[') {
        if (line[len - 1] != ']' || len - 2 >= section_cap)
            return m2_fail(M2_EUSAGE, "%s: syntax error (expected [section] or key = value)", where);
        memcpy(section, line + 1, len - 2);
        section[len - 2] = '\0';
        return M2_OK;
    }
    char *eq = strstr(line, " = ");
    if (!eq) return m2_fail(M2_EUSAGE, "%s: syntax error (expected [section] or key = value)", where);
    *eq = '\0';
    return m2_config_assign(cfg, section, line, eq + 3, where, where);
}

int m2_config_from_text(m2_config *cfg, const char *text, const char *origin)
{
    char section[64] = "";
    int n = 0;
    for (const char *p = text; *p;) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        char *line = malloc(len + 1);
        if (!line) return m2_fail(M2_EFAIL, "%s: out of memory for a line of %zu bytes", origin, len);
        memcpy(line, p, len);
        line[len] = '\0';
        if (len && line[len - 1] == '\r') line[len - 1] = '\0';
        int rc = canonical_line(cfg, line, section, sizeof section, origin, ++n);
        free(line);
        if (rc) return rc;
        p += len + (nl != NULL);
    }
    return M2_OK;
}

int m2_config_set(m2_config *cfg, const char *assignment)
{
    char where[1200];
    snprintf(where, sizeof where, "--set %s", assignment);
    const char *eq = strchr(assignment, '=');
    const char *dot = strchr(assignment, '.');
    if (!eq || !dot || dot > eq) return m2_fail(M2_EUSAGE, "%s: expected SECTION.KEY=VALUE", where);
    char section[64], key[64];
    size_t slen = (size_t)(dot - assignment), klen = (size_t)(eq - dot - 1);
    if (slen == 0 || slen >= sizeof section || klen == 0 || klen >= sizeof key)
        return m2_fail(M2_EUSAGE, "%s: expected SECTION.KEY=VALUE", where);
    memcpy(section, assignment, slen);
    section[slen] = '\0';
    memcpy(key, dot + 1, klen);
    key[klen] = '\0';
    const key_spec *spec = find_key(section, key);
    if (!spec)
        return section_exists(section) ? m2_fail(M2_EUSAGE, "%s: unknown key '%s' in section [%s]", where, key, section)
                                       : m2_fail(M2_EUSAGE, "%s: unknown section [%s]", where, section);
    return assign(cfg, spec, eq + 1, where);
}

int m2_config_validate(const m2_config *c, const char *origin)
{
    int di = c->model.expand * c->model.d_model;
    if (di % c->model.headdim != 0)
        return m2_fail(M2_EUSAGE, "%s: model.headdim: expand*d_model = %d is not a multiple of headdim %d", origin, di,
                       c->model.headdim);
    int heads = di / c->model.headdim;
    if (heads % c->model.ngroups != 0)
        return m2_fail(M2_EUSAGE, "%s: model.ngroups: %d heads are not a multiple of ngroups %d", origin, heads,
                       c->model.ngroups);
    if (c->train.burn_in >= c->train.seq_len)
        return m2_fail(M2_EUSAGE, "%s: train.burn_in: %d must be less than train.seq_len %d", origin, c->train.burn_in,
                       c->train.seq_len);
    if (c->train.global_batch % c->train.micro_batch != 0)
        return m2_fail(M2_EUSAGE, "%s: train.global_batch: %d is not a multiple of train.micro_batch %d", origin,
                       c->train.global_batch, c->train.micro_batch);
    if (m2_select_by_horizon(c->train.select_by) < 0)
        return m2_fail(M2_EUSAGE, "%s: train.select_by: '%s' is not val_loss or ic@H (H a target horizon, e.g. ic@100)",
                       origin, c->train.select_by);
    if (c->train.lr_min > c->train.lr)
        return m2_fail(M2_EUSAGE, "%s: train.lr_min: %g is larger than train.lr %g", origin, c->train.lr_min,
                       c->train.lr);
    return M2_OK;
}

int m2_select_by_horizon(const char *select_by)
{
    if (strcmp(select_by, "val_loss") == 0) return 0;
    char *end = NULL;
    if (strncmp(select_by, "ic@", 3) != 0 || select_by[3] < '1' || select_by[3] > '9') return -1;
    long h = strtol(select_by + 3, &end, 10);
    return *end == '\0' && h > 0 && h <= INT32_MAX ? (int)h : -1;
}

char *m2_config_to_string(const m2_config *cfg)
{
    size_t cap = 8192, len = 0;
    char *out = malloc(cap);
    if (!out) return NULL;
    out[0] = '\0';
    const char *current = "";
    for (size_t i = 0; i < N_KEYS; i++) {
        const key_spec *s = &KEYS[i];
        const char *field = (const char *)cfg + s->offset;
        char value[1100];
        switch (s->type) {
        case K_INT: snprintf(value, sizeof value, "%d", *(const int *)field); break;
        case K_I64: snprintf(value, sizeof value, "%lld", (long long)*(const int64_t *)field); break;
        case K_U64: snprintf(value, sizeof value, "%llu", (unsigned long long)*(const uint64_t *)field); break;
        case K_DBL: snprintf(value, sizeof value, "%.17g", *(const double *)field); break;
        case K_STR: snprintf(value, sizeof value, "%s", field); break;
        }
        char line[1300];
        int n = strcmp(current, s->section) != 0
                    ? snprintf(line, sizeof line, "%s[%s]\n%s = %s\n", len ? "\n" : "", s->section, s->key, value)
                    : snprintf(line, sizeof line, "%s = %s\n", s->key, value);
        current = s->section;
        if (len + (size_t)n + 1 > cap) {
            cap = 2 * (len + (size_t)n + 1);
            char *grown = realloc(out, cap);
            if (!grown) {
                free(out);
                return NULL;
            }
            out = grown;
        }
        memcpy(out + len, line, (size_t)n + 1);
        len += (size_t)n;
    }
    return out;
}
