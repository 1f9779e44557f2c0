#!/usr/bin/env bash
# cmake --install into a scratch prefix, then the example (examples/stream_example.c) built OUTSIDE the tree against
# the installed streaming library, once with CMake's find_package(mamba2) and once with pkg-config, and run on the
# eval fixture's checkpoint: both must print exactly what the in-tree build of the same example prints.
# The installed library must need no MPI, OpenMP, OpenBLAS or inih, and export only the API of mamba2_stream.h.
# usage: test_install.sh CMAKE PATH/TO/eval_fixture PATH/TO/stream_example (in-tree)
source "$(dirname "$0")/../lib/cli.sh"
cmake=$1 fixture=$2 in_tree=$3
san=${MAMBA2_SANITIZE_FLAGS:-} # a sanitized tree: the example is built with the same flags (tests/stream/CMakeLists.txt)
cli_fixture "$fixture"
prefix=$dir/prefix

"$cmake" --install "$MAMBA2_BIN" --prefix "$prefix" >"$dir/install.log" 2>&1 || { cat "$dir/install.log"; exit 1; }
lib=$(find "$prefix" -name 'libmamba2_stream.so' | head -1)
for f in bin/mamba2_train bin/mamba2_eval bin/mamba2_ticks bin/mamba2_stream include/mamba2_stream.h; do
  [ -e "$prefix/$f" ] || fail "not installed: $f"
done
[ -n "$lib" ] || fail "not installed: libmamba2_stream.so"
[ -n "$(find "$prefix" -name mamba2Config.cmake)" ] || fail "not installed: the CMake package"
pc=$(find "$prefix" -name mamba2_stream.pc | head -1)
[ -n "$pc" ] || fail "not installed: mamba2_stream.pc"
[ "$failures" -eq 0 ] || cli_end

# What a trading process pulls in by linking it: HDF5, libm, libc, nothing of the trainer's stack.
needed=$(readelf -d "$lib" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')
echo "libmamba2_stream.so needs: $needed"
if grep -qE 'libmpi|libgomp|libomp|libopenblas|libblas|libinih' <<<"$needed"; then fail "needs the trainer's stack: $needed"; fi
grep -q 'libhdf5' <<<"$needed" || fail "does not link HDF5 (it reads checkpoints): $needed"
exported=$(nm -D --defined-only "$lib" | awk '$2 ~ /[TDB]/ {print $3}' | sort)
others=$(grep -vE '^(m2_stream_|m2_last_error$)' <<<"$exported" || true)
[ -z "$others" ] || fail "exports more than the API: $(echo $others | head -c 300)"
grep -q '^m2_stream_step_batch$' <<<"$exported" || fail "m2_stream_step_batch is not exported"
echo "exports: $(wc -l <<<"$exported") symbols, all m2_stream_* or m2_last_error"

# Ticks to run the fixture's checkpoint on (the same input as test_stream_cli).
/usr/bin/python3 - "$dir" >"$dir/ticks.txt" <<'EOF2'
import sys, h5py
X = h5py.File(f"{sys.argv[1]}/data.h5", "r")["features/X"][...]
print("reset 0")
for r in range(400, 470):
    print(0, " ".join("%.9g" % v for v in X[r]))
EOF2
"$in_tree" "$ck" <"$dir/ticks.txt" >"$dir/want.txt" || fail "in-tree stream_example failed"
[ "$(wc -l <"$dir/want.txt")" -eq 70 ] || fail "in-tree stream_example printed $(wc -l <"$dir/want.txt") lines, want 70"

# 1. CMake: find_package(mamba2) -> mamba2::stream
if "$cmake" -S "$src/examples" -B "$dir/ex-cmake" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_C_FLAGS="$san" \
     -DCMAKE_EXE_LINKER_FLAGS="$san" >"$dir/ex.log" 2>&1 &&
   "$cmake" --build "$dir/ex-cmake" >>"$dir/ex.log" 2>&1; then
  LD_LIBRARY_PATH="$(dirname "$lib")" "$dir/ex-cmake/stream_example" "$ck" <"$dir/ticks.txt" \
    >"$dir/cmake.txt" || fail "CMake-built example failed"
  cmp -s "$dir/want.txt" "$dir/cmake.txt" && echo "ok: CMake-built example == in-tree" ||
    fail "CMake-built example differs from the in-tree one"
else
  cat "$dir/ex.log"; fail "example did not build with find_package(mamba2)"
fi

# The installed header is valid C++ too (a trading process is often C++).
echo '#include <mamba2_stream.h>
int main() { return m2_stream_defaults().max_streams == 1 ? 0 : 1; }' >"$dir/use.cpp"
if command -v c++ >/dev/null; then
  c++ -Wall -Werror -I"$prefix/include" -c "$dir/use.cpp" -o "$dir/use.o" 2>"$dir/cxx.log" ||
    fail "mamba2_stream.h does not compile as C++: $(cat "$dir/cxx.log")"
fi

# 2. pkg-config: the compiler line a Makefile would use
flags=$(PKG_CONFIG_PATH="$(dirname "$pc")" pkg-config --cflags --libs mamba2_stream) || fail "pkg-config mamba2_stream"
echo "pkg-config: $flags"
if cc -std=c11 -Wall -Werror $san "$src/examples/stream_example.c" $flags -o "$dir/ex-pc" 2>"$dir/cc.log"; then
  LD_LIBRARY_PATH="$(dirname "$lib")" "$dir/ex-pc" "$ck" <"$dir/ticks.txt" >"$dir/pc.txt" ||
    fail "pkg-config-built example failed"
  cmp -s "$dir/want.txt" "$dir/pc.txt" && echo "ok: pkg-config-built example == in-tree" ||
    fail "pkg-config-built example differs from the in-tree one"
else
  cat "$dir/cc.log"; fail "example did not build with pkg-config's flags"
fi
cli_end
