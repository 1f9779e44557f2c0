#include "run/plot.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/error.h"

enum { MAX_POINTS = 2000 }; /* the PnL curve is thinned to this many points: the panel is ~500 pixels wide */

static void num(FILE *g, double v)
{
    if (isfinite(v))
        fprintf(g, " %.6g", v);
    else
        fputs(" NaN", g);
}

static void data_blocks(FILE *g, const m2_research *r, const float *cum, int64_t M)
{
    int O = r->O, o = O - 1;
    int64_t step = M > MAX_POINTS ? (M + MAX_POINTS - 1) / MAX_POINTS : 1;
    fputs("$pnl << EOD\n", g);
    for (int64_t i = 0; i < M; i += step) {
        fprintf(g, "%lld", (long long)i);
        num(g, cum[(size_t)o * M + i]);
        num(g, cum[((size_t)O + o) * M + i]);
        fputc('\n', g);
    }
    fputs("EOD\n$ic << EOD\n", g);
    for (int h = 0; h < O; h++) {
        fprintf(g, "%d %d", h, (int)r->horizons[h]);
        num(g, r->ic[h].a.ic);
        num(g, 1.96 * r->ic[h].a.se);
        num(g, r->ic[h].b.ic);
        num(g, 1.96 * r->ic[h].b.se);
        fputc('\n', g);
    }
    fputs("EOD\n$dec << EOD\n", g);
    for (int d = 0; d < M2_DECILES; d++) {
        fprintf(g, "%d", d + 1);
        num(g, r->deciles[0][o][d]);
        num(g, r->deciles[1][o][d]);
        fputc('\n', g);
    }
    fputs("EOD\n", g);
}

static void script(FILE *g, const char *out, const m2_research *r, const float *cum, int64_t M, const char *title)
{
    int H = r->horizons[r->O - 1];
    fprintf(g, "set terminal pngcairo size 1500,460 font 'sans,10' noenhanced\nset output '%s'\n", out);
    data_blocks(g, r, cum, M);
    fprintf(g, "set multiplot layout 1,3 title \"%s\"\nset grid\nset key top left\n", title);
    fprintf(g, "set title 'cumulative PnL, h=%d (bp, %s)'\nset xlabel 'evaluated tick'\n", H,
            r->costs ? "net of half spread" : "no costs: no quotes");
    fputs("plot $pnl u 1:2 w l lw 2 t 'mamba2', $pnl u 1:3 w l lw 2 t 'ridge'\n", g);
    fputs("set title 'IC by horizon (95% HAC interval)'\nset xlabel 'horizon (ticks)'\n", g);
    fprintf(g, "set xrange [-0.5:%d.5]\nset xzeroaxis\n", r->O - 1);
    fputs("plot $ic u ($1-0.08):3:4:xtic(2) w yerrorbars pt 7 t 'mamba2', $ic u ($1+0.08):5:6 w yerrorbars pt 5 "
          "t 'ridge', 0 w l lc 'black' notitle\n",
          g);
    fprintf(g, "set title 'mean forward return by prediction decile, h=%d (bp)'\nset xlabel 'decile'\n", H);
    fputs("set xrange [0.4:10.6]\nset style fill solid 0.7\nset boxwidth 0.38\nset xtics 1\n", g);
    fputs("plot $dec u ($1-0.2):2 w boxes t 'mamba2', $dec u ($1+0.2):3 w boxes t 'ridge'\n", g);
    fputs("unset multiplot\nset output\n", g);
}

int m2_plot_write(const char *png, const m2_research *r, const float *cum, int64_t M, const char *title)
{
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", png, (long)getpid());
    if (strchr(png, '\'') || strchr(title, '"'))
        return m2_fail(M2_EUSAGE, "--plot (%s): quotes in the file name are not supported", png);
    FILE *g = popen("gnuplot 2>&1", "w");
    if (!g) return m2_fail(M2_EFAIL, "--plot (%s): cannot start gnuplot: %s", png, strerror(errno));
    script(g, tmp, r, cum, M, title);
    int status = pclose(g);
    if (status != 0) {
        unlink(tmp);
        return m2_fail(M2_EFAIL,
                       "--plot (%s): gnuplot failed (exit status %d; is gnuplot installed? "
                       "launch/setup.sh installs gnuplot-nox)",
                       png, status);
    }
    if (rename(tmp, png) != 0) {
        int e = errno;
        unlink(tmp);
        return m2_fail(M2_EFAIL, "--plot (%s): cannot rename %s: %s", png, tmp, strerror(e));
    }
    return M2_OK;
}
