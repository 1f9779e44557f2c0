# shellcheck shell=bash disable=SC2034 # (bundle_bin and bundle_missing are for the sourcing script)
# Sourced (bash) by the GPU scripts that run tests/gpu/make_bundle.sh's prebuilt binaries on a GPU machine without
# the project's build dependencies (check.sh, profile_ssd.sh):
#   m2_bundle_unpack <gpu-bundle.tar.xz> <dir>
# unpacks it into <dir>/bundle and exports what its programs need; sets bundle_bin (the binaries' folder) and
# bundle_missing (the libraries ldd cannot find for them: empty when all is well).
m2_bundle_unpack() {
  local archive="$1" dir="$2" lib found libpath t
  rm -rf "$dir/bundle" && mkdir -p "$dir" && tar -C "$dir" -xJf "$archive" || return 1
  bundle_bin="$dir/bundle/bin"
  # Open MPI from the bundle (mamba2_train initialises MPI even alone), relocated to where it was unpacked, with the
  # settings of the build machine's /etc/openmpi (no InfiniBand, UCX or OFI transports)
  export OPAL_PREFIX="$dir/bundle/ompi" PATH="$dir/bundle/ompi/bin:$PATH"
  export OMPI_MCA_btl="^uct,openib,ofi" OMPI_MCA_pml="^ucx" OMPI_MCA_mtl="^ofi" OMPI_MCA_osc="^ucx,pt2pt" \
         OMPI_MCA_btl_base_warn_component_unused=0
  # cuBLAS, cuBLASLt, NCCL and the CUDA runtime come from this machine: the CUDA toolkit or PyTorch's wheels
  libpath="$dir/bundle/lib"
  for lib in libcublas.so.13 libcublasLt.so.13 libnccl.so.2 libcudart.so.13; do
    found=$(find /usr/local /usr/lib /opt -xdev -name "$lib" 2>/dev/null | head -1)
    [ -n "$found" ] && libpath="$libpath:$(dirname "$found")"
  done
  export LD_LIBRARY_PATH="$libpath${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  bundle_missing=$(for t in "$bundle_bin"/*; do ldd "$t" | grep "not found"; done | sort -u)
  return 0 # (the status of the last grep above says nothing)
}

# A CUDA tool on the PATH, else in the toolkit's or Nsight Compute's own folders (where the workplace's image keeps ncu)
m2_cuda_tool() {
  command -v "$1" 2>/dev/null ||
    ls -d /usr/local/cuda/bin/"$1" /usr/local/cuda/compute-sanitizer/"$1" /opt/nvidia/nsight-compute/*/"$1" 2>/dev/null |
    head -1
}
