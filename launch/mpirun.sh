#!/usr/bin/env bash
# Runs build/mamba2_train on several ranks of THIS machine under Open MPI's mpirun, with sensible placement:
#   - GPUs present: one rank per GPU (a rank's device = its local rank), each rank bound to its own cores;
#   - CPU only: one rank per socket by default, each bound to that socket's share of the cores;
#   - OMP_NUM_THREADS per rank = physical cores / ranks (at least 1; over-subscribed runs are left unbound).
# Usage: launch/mpirun.sh [TRAIN ARGS...]          e.g. launch/mpirun.sh --config configs/small.ini
# Overridable: RANKS (rank count), THREADS (per rank), TRAIN (the program), MPIRUN (the launcher),
#              MPIRUN_ARGS (extra launcher arguments, e.g. "--hostfile hosts" for several machines), DRY_RUN=1
#              (print the command instead of running it). Arguments are passed to the program unchanged.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
TRAIN="${TRAIN:-$root/build/mamba2_train}"
MPIRUN="${MPIRUN:-mpirun}"

gpus=0
if command -v nvidia-smi >/dev/null 2>&1; then
    gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
fi
# Physical cores (hyper-threads share a core's FPUs, so they add little to this workload).
cores=$(lscpu -p=core,socket 2>/dev/null | grep -v '^#' | sort -u | wc -l)
sockets=$(lscpu -p=socket 2>/dev/null | grep -v '^#' | sort -u | wc -l)
[ "$cores" -ge 1 ] || cores=$(getconf _NPROCESSORS_ONLN)   # not nproc: it honours OMP_NUM_THREADS
[ "$sockets" -ge 1 ] || sockets=1

if [ "$gpus" -gt 0 ]; then
    RANKS="${RANKS:-$gpus}"
else
    RANKS="${RANKS:-$sockets}"
fi
THREADS="${THREADS:-$(( cores / RANKS > 0 ? cores / RANKS : 1 ))}"

placement=()
if [ $(( RANKS * THREADS )) -le "$cores" ]; then
    # PE=n gives each rank n consecutive cores; with GPUs this keeps a rank's threads on its own cores
    # (by slot: ranks fill a socket first, so local ranks 0..k share the socket that usually hosts GPUs 0..k).
    if [ "$gpus" -gt 0 ]; then
        placement=(--map-by "slot:PE=$THREADS" --bind-to core)
    else
        placement=(--map-by "socket:PE=$THREADS" --bind-to core)
    fi
else
    placement=(--oversubscribe --bind-to none)
fi

# Open MPI refuses to run as root unless told it is intended (containers, CI).
if [ "$(id -u)" -eq 0 ]; then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
export OMP_NUM_THREADS="$THREADS"

# shellcheck disable=SC2206  # MPIRUN_ARGS is split on purpose
cmd=("$MPIRUN" -np "$RANKS" "${placement[@]}" -x OMP_NUM_THREADS ${MPIRUN_ARGS:-} "$TRAIN" "$@")
echo "mpirun.sh: $RANKS ranks x $THREADS threads (${gpus} GPUs, ${cores} cores, ${sockets} sockets)" >&2
if [ "${DRY_RUN:-0}" = 1 ]; then
    printf '%q ' "${cmd[@]}"
    echo
    exit 0
fi
exec "${cmd[@]}"
