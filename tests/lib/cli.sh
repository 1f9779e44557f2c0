# Shared by the command-line test scripts (source it). The script defines `fail MESSAGE` (count the failure, or exit)
# and `scratch`, a folder for temporary files, or has cli_begin define them.

# cli_begin: for a script that checks many things and reports every failure: $dir (a scratch folder, removed on
# exit, also $scratch), `fail MESSAGE` counting failures; cli_end then exits 1 with their number if there were any.
cli_begin() {
  dir=$(mktemp -d)
  trap 'rm -rf "$dir"' EXIT
  scratch=$dir
  failures=0
  fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
}
cli_end() { [ "$failures" -eq 0 ] || { echo "$failures failure(s)"; exit 1; }; }

# expect_error STATUS PATTERN PROGRAM [ARGS...]: PROGRAM exits with STATUS and prints exactly one line on stderr,
# "<program>: error: ..." (the name the program gives itself; a test build may be named differently), matching the extended regular expression PATTERN (CLI.md's error contract).
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
