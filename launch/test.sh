#!/usr/bin/env bash
# Sets up, builds and runs every test (the README's test command; .ci/run calls it), then the same suite again
# under AddressSanitizer + UndefinedBehaviorSanitizer with leak checks (launch/test_sanitize.sh, build-asan/;
# MAMBA2_SANITIZE_SUITE=0 skips it). Extra arguments go to both ctest runs.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bash "$root/launch/build.sh"
(cd "$root/build" && ctest --output-on-failure --timeout 900 "$@")
if [ "${MAMBA2_SANITIZE_SUITE:-1}" != 0 ]; then
  bash "$root/launch/test_sanitize.sh" "$@"
fi
