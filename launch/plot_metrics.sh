#!/usr/bin/env bash
# Draws train/val loss and the learning rate of a run from RUN_DIR/metrics.jsonl into RUN_DIR/metrics.png.
# usage: launch/plot_metrics.sh RUN_DIR [OUT.png]
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: $0 RUN_DIR [OUT.png]" >&2; exit 2; }
run="$1"; png="${2:-$run/metrics.png}"
log="$run/metrics.jsonl"
[ -s "$log" ] || { echo "plot_metrics: error: $log: missing or empty" >&2; exit 1; }
command -v gnuplot >/dev/null || bash "$(dirname "$0")/setup.sh"

tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
# metrics.jsonl holds flat objects of numbers: pull out the named fields (NaN when a line lacks one).
field() { sed -n "s/.*\"$1\": *\([-0-9.eE+naif]*\).*/\1/p;t;s/.*/NaN/p"; }
# Per-step losses are noisy (one global batch each): add an exponential moving average (column 4) to read the trend.
paste <(field step <"$log") <(field loss <"$log") <(field lr <"$log") |
  awk 'BEGIN { a = 0.1 } $2 == $2 + 0 { ema = (n++ ? ema + a * ($2 - ema) : $2) } { print $0 "\t" (n ? ema : "NaN") }' \
  >"$tmp/train.dat"
grep '"val_loss"' "$log" >"$tmp/val.jsonl" || true
paste <(field step <"$tmp/val.jsonl") <(field val_loss <"$tmp/val.jsonl") >"$tmp/val.dat"

gnuplot <<GP
set terminal pngcairo size 1000,600 noenhanced
set output "$png"
set title "$run"
set xlabel "step"
set ylabel "loss (MSE, bp^2)"
set y2label "learning rate"
set y2tics
set ytics nomirror
set key top right
plot "$tmp/train.dat" using 1:2 with lines lw 1 lc rgb "#c0c0e0" title "train loss", \
     "$tmp/train.dat" using 1:4 with lines lw 2 lc rgb "#4040c0" title "train loss (EMA 0.1)", \
     "$tmp/val.dat" using 1:2 with linespoints pt 7 lw 2 title "val loss", \
     "$tmp/train.dat" using 1:3 axes x1y2 with lines dt 2 title "lr"
GP
echo "plot_metrics: wrote $png"
