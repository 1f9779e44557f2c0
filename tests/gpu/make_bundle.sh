#!/usr/bin/env bash
# Builds the GPU tests and the GPU benchmark on THIS machine (which has the project's build dependencies) and packs
# them with the shared libraries they need into one archive, for a GPU machine that has the NVIDIA driver and the
# CUDA libraries but not HDF5/MPI/OpenBLAS/inih/cmocka (the workplace's H200 image: nvcc and CMake, no Debian -dev
# packages, no network). tests/gpu/check.sh uses the archive when it cannot configure the project itself.
#   tests/gpu/make_bundle.sh              -> build-gpubundle/gpu-bundle.tar.xz  (about 15 MB)
# Packed: bin/ (test_gpu_*, bench_gpu, and mamba2_train + mamba2_ticks + mamba2_eval for check.sh's training and evaluation runs), lib/ (every
# library they load except the C runtime, the compiler runtime and the big CUDA libraries cuBLAS/cuBLASLt/NCCL, which
# check.sh finds on the GPU machine), ompi/ (Open MPI's runtime: mpirun, orted, its plugins and help files, laid out
# under a prefix as installed here, so that OPAL_PREFIX=<bundle>/ompi relocates it; mamba2_train initialises MPI
# even alone), configs/ (8gpu.ini, tiny.ini).
# The build is portable (MAMBA2_NATIVE=OFF: the GPU machine's CPU may lack this one's instructions).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="${BUNDLE_BUILD:-$root/build-gpubundle}"
targets="test_gpu_ops test_gpu_ssd test_gpu_act test_gpu_model test_gpu_train test_gpu_nccl"
programs="mamba2_train mamba2_ticks mamba2_eval bench_gpu"
bash "$root/launch/setup.sh" # a fresh machine has none of the build dependencies yet (the bundle exists to carry them)

# Device code for the workplace's GPU alone (an H200: sm_90): every binary carries all the kernels, and each further
# architecture adds ~17 MB to each of the ten (BUNDLE_CUDA_ARCH="80;90" for an A100 as well).
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DMAMBA2_CUDA=ON -DMAMBA2_NATIVE=OFF -DMAMBA2_WERROR=ON \
  -DCMAKE_CUDA_ARCHITECTURES="${BUNDLE_CUDA_ARCH:-90}" >/dev/null
# shellcheck disable=SC2086
cmake --build "$build" -j "${JOBS:-2}" --target $targets $programs

stage="$build/bundle"
rm -rf "$stage"
mkdir -p "$stage/bin" "$stage/lib" "$stage/configs"
for t in $targets; do cp "$build/tests/$t" "$stage/bin/"; done
for p in $programs; do cp "$build/$p" "$stage/bin/"; done
cp "$root/configs/8gpu.ini" "$root/configs/tiny.ini" "$stage/configs/"

# Open MPI's runtime, each installed folder at its place relative to the install prefix (ompi_info --path).
ompi_path() { ompi_info --parsable --path "$1" | sed -n "s|^path:$1:||p"; }
prefix=$(ompi_path prefix)
bindir=$(ompi_path bindir)
for dir in "$(ompi_path pkglibdir)" "$(ompi_path pkgdatadir)" "$bindir"; do mkdir -p "$stage/ompi/${dir#"$prefix"/}"; done
for dir in "$(ompi_path pkglibdir)" "$(ompi_path pkgdatadir)"; do cp -rLT "$dir" "$stage/ompi/${dir#"$prefix"/}"; done
ompi_bin="$stage/ompi/${bindir#"$prefix"/}"
for exe in orterun orted; do cp -L "$bindir/$exe" "$ompi_bin/"; done
ln -s orterun "$ompi_bin/mpirun"

# Libraries: everything ldd resolves except glibc's, the compiler runtime's (the GPU machine has newer ones) and
# cuBLAS/cuBLASLt/NCCL (hundreds of MB; part of every CUDA installation and of PyTorch's wheels).
skip='^(linux-vdso|ld-linux|libc\.|libm\.|libdl\.|libpthread\.|librt\.|libstdc\+\+|libgcc_s|libcublas|libcublasLt|libnccl)'
for f in "$stage"/bin/* "$ompi_bin"/or* $(find "$stage/ompi" -name '*.so'); do
  ldd "$f" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}'
done | sort -u | while read -r name path; do
  if [[ "$name" =~ $skip ]]; then continue; fi
  cp -L "$path" "$stage/lib/$name"
done
{
  echo "mamba2 GPU test bundle, built $(date -u +%Y-%m-%dT%H:%MZ) on $(uname -n) from $(git -C "$root" describe --always --dirty 2>/dev/null || echo unknown)"
  echo "nvcc: $(nvcc --version | tail -1)"
  echo "targets: $targets $programs; Open MPI $(ompi_info --parsable | sed -n 's/^ompi:version:full://p') under ompi/"
} > "$stage/BUNDLE.txt"
# One xz stream with a dictionary larger than a binary, so that the kernels every binary repeats are stored once: the
# archive must travel in the device tool's 64 MiB with the working tree.
tar -C "$build" -cf - bundle | xz -9 --lzma2=dict=96MiB -T1 > "$build/gpu-bundle.tar.xz"
echo "make_bundle: $build/gpu-bundle.tar.xz ($(du -h "$build/gpu-bundle.tar.xz" | cut -f1)); libraries packed:"
ls "$stage/lib" | sed 's/^/  /'
