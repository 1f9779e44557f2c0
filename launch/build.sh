#!/usr/bin/env bash
# Configures and builds everything into build/ (after setup.sh). Extra arguments go to cmake's configure step.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bash "$root/launch/setup.sh"
cmake -S "$root" -B "$root/build" -DCMAKE_BUILD_TYPE=Release -DMAMBA2_WERROR=ON "$@" >/dev/null
cmake --build "$root/build" -j "$(nproc)"
