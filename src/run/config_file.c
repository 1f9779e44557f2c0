/* Loading INI config files (a user's configs, e.g. configs/tiny.ini) with inih, over the key table of base/config.h. The stored
 * config of a checkpoint is read by base/config.h's m2_config_from_text instead, so that reading a checkpoint
 * (the streaming library) needs no inih. */
#include "run/config_file.h"

#include "base/error.h"

#include <errno.h>
#include <ini.h>
#include <stdio.h>
#include <string.h>

/* inih reads line by line and calls the handler for each key before reading the next line, so a reader
 * that counts lines knows the line of every key it is handed. */
typedef struct {
    m2_config *cfg;
    const char *origin;
    const char *text; /* string source */
    FILE *file;       /* file source */
    int line;
    int section_line; /* line of the last [section] header, to name it when the section is unknown */
    int status;
} parse_state;

static char *read_line(char *buf, int size, void *stream)
{
    parse_state *st = stream;
    int cut = 0; /* the line did not fit inih's buffer */
    if (st->file) {
        if (!fgets(buf, size, st->file)) return NULL;
        cut = !strchr(buf, '\n') && !feof(st->file);
    } else {
        if (!*st->text) return NULL;
        const char *nl = strchr(st->text, '\n');
        size_t len = nl ? (size_t)(nl - st->text + 1) : strlen(st->text);
        if (len >= (size_t)size) {
            len = (size_t)size - 1;
            cut = 1;
        }
        memcpy(buf, st->text, len);
        buf[len] = '\0';
        st->text += len;
    }
    st->line++;
    /* inih reads a line into a buffer of INI_MAX_LINE bytes fixed when the library was built (200 in Debian's
     * libinih) and would take the rest of a longer one as a line of its own: refuse it, naming the way around. */
    if (cut) {
        st->status = m2_fail(M2_EUSAGE,
                             "%s:%d: line longer than %d bytes, the most the INI reader takes (give that key "
                             "with --set SECTION.KEY=VALUE instead)",
                             st->origin, st->line, size - 1);
        return NULL;
    }
    /* inih notes a syntax error but carries on, handing later keys to the wrong section; stop at the first. */
    const char *p = buf;
    if (st->line == 1 && (unsigned char)p[0] == 0xEF && (unsigned char)p[1] == 0xBB && (unsigned char)p[2] == 0xBF)
        p += 3; /* a UTF-8 byte-order mark (editors on Windows write one); inih skips it too */
    while (*p == ' ' || *p == '\t') p++;
    if (*p == '[') st->section_line = st->line;
    int blank = *p == '\0' || *p == '\n' || *p == '\r' || *p == ';' || *p == '#';
    if (!blank && ((*p == '[' && !strchr(p, ']')) || (*p != '[' && !strchr(p, '=') && !strchr(p, ':')))) {
        st->status = m2_fail(M2_EUSAGE, "%s:%d: syntax error (expected [section] or key = value)", st->origin,
                             st->line);
        return NULL;
    }
    return buf;
}

static int on_key(void *user, const char *section, const char *key, const char *value)
{
    parse_state *st = user;
    if (st->status != M2_OK) return 0;
    char where[1100], section_where[1100];
    snprintf(where, sizeof where, "%s:%d", st->origin, st->line);
    snprintf(section_where, sizeof section_where, "%s:%d", st->origin, st->section_line);
    st->status = m2_config_assign(st->cfg, section, key, value, where, section_where);
    return st->status == M2_OK;
}

static int run_parser(parse_state *st)
{
    int rc = ini_parse_stream(read_line, st, on_key, st);
    if (st->status != M2_OK) return st->status;
    if (rc > 0) return m2_fail(M2_EUSAGE, "%s:%d: syntax error (expected [section] or key = value)", st->origin, rc);
    if (rc < 0) return m2_fail(M2_EUSAGE, "%s: cannot parse", st->origin);
    return M2_OK;
}

int m2_config_load_file(m2_config *cfg, const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) return m2_fail(M2_EUSAGE, "config (%s): cannot open: %s", path, strerror(errno));
    parse_state st = {.cfg = cfg, .origin = path, .file = f};
    int rc = run_parser(&st);
    fclose(f);
    return rc;
}

int m2_config_load_string(m2_config *cfg, const char *text, const char *origin)
{
    parse_state st = {.cfg = cfg, .origin = origin, .text = text};
    return run_parser(&st);
}
