# The one helper library of the shell tests (source it). A script then calls one of
#   cli_begin:  for a script that checks many things and reports every failure (cli_end exits with their number);
#   test_begin: for a script that stops at its first failure (set -euo pipefail, `fail` exits 1);
# both make a scratch folder ($scratch) that is removed on exit. $src is the source tree; test_begin also sets $bin,
# the build tree (MAMBA2_BIN).
src="${MAMBA2_SRC:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"

# cli_begin: for a script that checks many things and reports every failure: $dir (a scratch folder, removed on
# exit, also $scratch), `fail MESSAGE` counting failures; cli_end then exits 1 with their number if there were any.
cli_begin() {
  dir=$(mktemp -d)
  trap 'rm -rf "$dir"' EXIT
  scratch=$dir
  failures=0
  fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
}
# cli_fixture FIXTURE: cli_begin, then the eval fixture program (tests/run/eval_fixture.c) writes a small dataset
# and checkpoint into $dir: $ck is the checkpoint, $dir/data.h5 the dataset.
cli_fixture() {
  cli_begin
  "$1" "$dir" >/dev/null || { echo "FAIL: fixture"; exit 1; }
  ck=$dir/ckpt_7.h5
}
cli_end() { [ "$failures" -eq 0 ] || { echo "$failures failure(s)"; exit 1; }; }

# expect_error STATUS PATTERN PROGRAM [ARGS...]: PROGRAM exits with STATUS and prints exactly one line on stderr,
# "<program>: error: ..." (the name the program gives itself; a test build may be named differently), matching the extended regular expression PATTERN (docs/CLI.md's error contract).
expect_error() {
  local want=$1 pattern=$2
  shift 2
  local rc=0 lines
  "$@" >"$scratch/out.txt" 2>"$scratch/err.txt" || rc=$?
  lines=$(wc -l <"$scratch/err.txt")
  if [ "$rc" -ne "$want" ] || [ "$lines" -ne 1 ] || ! grep -qE "^[a-z0-9_]+: error: " "$scratch/err.txt" ||
     ! grep -qE -- "$pattern" "$scratch/err.txt"; then
    fail "$*: exit $rc (want $want), $lines stderr lines (want 1 'program: error: ...' matching '$pattern'): $(cat "$scratch/err.txt")"
  else
    echo "ok ($rc): $(cat "$scratch/err.txt")"
  fi
}

# check_help_version PROGRAM OPTION...: --help exits 0 and lists every OPTION; --version exits 0 and prints
# "<program name> <version>" and the backends built in.
check_help_version() {
  local prog=$1 name
  shift
  name=$(basename "$prog")
  "$prog" --help >"$scratch/help.txt" 2>&1 || fail "$name --help: exit status"
  for opt in "$@"; do
    grep -q -- "$opt" "$scratch/help.txt" || fail "$name --help lacks $opt"
  done
  "$prog" --version >"$scratch/version.txt" 2>&1 || fail "$name --version: exit status"
  grep -q "^$name [0-9]" "$scratch/version.txt" && grep -q 'backends: cpu' "$scratch/version.txt" ||
    fail "$name --version: $(cat "$scratch/version.txt")"
}

# test_begin: stop at the first failure; $work (= $scratch) is a scratch folder removed on exit.
test_begin() {
  set -euo pipefail
  bin="${MAMBA2_BIN:?run through ctest}"
  work=$(mktemp -d /tmp/m2test.XXXXXX)
  trap 'rm -rf "$work"' EXIT
  scratch=$work
  fail() { echo "FAIL: $*" >&2; exit 1; }
}

# make_dataset FILE [synth options...]: a small synthetic dataset (4 sessions, 20,000 ticks).
make_dataset() {
  local out=$1; shift
  "$MAMBA2_BIN/mamba2_ticks" synth --out "$out" --ticks 20000 --sessions 4 --seed 11 "$@" >/dev/null
}

# A fast model for the training scripts (the tiny config shrunk further: they check mechanics, not learning).
fast_model=(--set model.d_model=16 --set model.n_layers=2 --set model.headdim=8 --set model.d_state=8
            --set model.chunk_size=16 --set train.seq_len=48 --set train.burn_in=8 --set train.micro_batch=4
            --set train.global_batch=8 --set train.eval_batches=2 --set train.log_every=1000 --set train.threads=1)
