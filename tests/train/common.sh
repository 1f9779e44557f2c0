# Shared by the training test scripts: paths, a scratch folder removed on exit, a small synthetic dataset and a
# fast model (the tiny config shrunk further: these tests check mechanics, not learning).
set -euo pipefail
bin="${MAMBA2_BIN:?run through ctest}"
src="${MAMBA2_SRC:?run through ctest}"
work=$(mktemp -d /tmp/m2test.XXXXXX)
trap 'rm -rf "$work"' EXIT

make_dataset() { # make_dataset FILE [synth options...]
  local out=$1; shift
  "$bin/mamba2_ticks" synth --out "$out" --ticks 20000 --sessions 4 --seed 11 "$@" >/dev/null
}

fast_model=(--set model.d_model=16 --set model.n_layers=2 --set model.headdim=8 --set model.d_state=8
            --set model.chunk_size=16 --set train.seq_len=48 --set train.burn_in=8 --set train.micro_batch=4
            --set train.global_batch=8 --set train.eval_batches=2 --set train.log_every=1000 --set train.threads=1)

fail() { echo "FAIL: $*" >&2; exit 1; }
scratch=$work
source "$(dirname "${BASH_SOURCE[0]}")/../lib/cli.sh"

