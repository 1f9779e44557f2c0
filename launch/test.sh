#!/usr/bin/env bash
# Sets up, builds and runs every test (the README's test command; .ci/run calls it).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bash "$root/launch/build.sh"
cd "$root/build"
ctest --output-on-failure --timeout 900 "$@"
