#!/usr/bin/env bash
# Installs the Debian packages mamba2 needs, only those missing (idempotent, quiet, non-interactive).
# Every other script calls this first, because CI and every new machine start bare.
set -euo pipefail

packages=(build-essential cmake pkg-config libopenmpi-dev openmpi-bin libhdf5-dev hdf5-tools libcmocka-dev
          libopenblas-dev libinih-dev gnuplot-nox slurm-wlm munge python3-numpy python3-h5py clang-format)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -qq
  "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
