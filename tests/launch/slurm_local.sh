#!/usr/bin/env bash
# A throw-away Slurm cluster on this machine (docs/TESTING.md), for tests:
#   source tests/launch/slurm_local.sh
#   slurm_local_start || { echo "SKIP: $SLURM_LOCAL_WHY"; exit 0; }   # exports SLURM_CONF; sinfo/srun/sbatch work
#   ...
#   slurm_local_stop                                                   # stops the daemons it started, by PID
# Everything (munge socket, slurm.conf, state, logs) lives in one temporary folder, with its own munge socket and
# its own ports, so it never touches a system Slurm or another test's cluster. Needs root (munged runs as munge,
# slurmd as root) and the slurm-wlm and munge packages; otherwise slurm_local_start fails with SLURM_LOCAL_WHY.

# shellcheck disable=SC2034  # SLURM_LOCAL_WHY is read by the scripts that source this file
SLURM_LOCAL_DIR=
SLURM_LOCAL_PIDS=()
SLURM_LOCAL_WHY=

slurm_local_start() {
    local cpus port d
    for prog in munged slurmctld slurmd sinfo sbatch srun; do
        command -v "$prog" >/dev/null 2>&1 || { SLURM_LOCAL_WHY="$prog not installed"; return 1; }
    done
    [ "$(id -u)" -eq 0 ] || { SLURM_LOCAL_WHY="needs root (slurmd, munged as the munge user)"; return 1; }
    id munge >/dev/null 2>&1 || { SLURM_LOCAL_WHY="no munge user"; return 1; }
    [ -r /etc/munge/munge.key ] || { SLURM_LOCAL_WHY="no /etc/munge/munge.key"; return 1; }

    d="$(mktemp -d /tmp/slurm_local.XXXXXX)"
    SLURM_LOCAL_DIR="$d"
    chmod 755 "$d"
    mkdir -p "$d/munge" "$d/state" "$d/spool" "$d/log" "$d/tmp"
    chmod 1777 "$d/tmp"
    chown munge:munge "$d/munge"
    chmod 755 "$d/munge"   # munged wants the socket folder searchable by all, writable only by munge
    su -s /bin/sh munge -c "munged --socket=$d/munge/sock --pid-file=$d/munge/pid --seed-file=$d/munge/seed \
        --log-file=$d/munge/log" || { SLURM_LOCAL_WHY="munged did not start ($d/munge/log)"; return 1; }
    for _ in $(seq 50); do [ -s "$d/munge/pid" ] && break; sleep 0.1; done
    SLURM_LOCAL_PIDS+=("$(cat "$d/munge/pid")")

    cpus=$(getconf _NPROCESSORS_ONLN)   # not nproc: it honours OMP_NUM_THREADS, which tests set to 1
    port=$(( 20000 + RANDOM % 20000 ))
    # TmpFS: PMIx keeps per-step folders there named by job id; a private TmpFS and a random first job id keep two
    # test clusters (or a stale folder from a killed one) from colliding.
    cat >"$d/slurm.conf" <<CONF
ClusterName=mamba2test
SlurmctldHost=localhost
SlurmctldPort=$port
SlurmdPort=$(( port + 1 ))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$d/munge/sock
MpiDefault=pmix
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
StateSaveLocation=$d/state
SlurmdSpoolDir=$d/spool
SlurmctldPidFile=$d/slurmctld.pid
SlurmdPidFile=$d/slurmd.pid
SlurmctldLogFile=$d/log/slurmctld.log
SlurmdLogFile=$d/log/slurmd.log
TmpFS=$d/tmp
FirstJobId=$(( 1000 + RANDOM * 16 + RANDOM % 16 ))
JobRequeue=1
MinJobAge=300
KillWait=10
SchedulerParameters=defer_batch=0
NodeName=localhost CPUs=$cpus State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP
CONF
    export SLURM_CONF="$d/slurm.conf"
    slurmctld -D -i >"$d/log/slurmctld.out" 2>&1 &
    SLURM_LOCAL_PIDS+=($!)
    slurmd -D -N localhost >"$d/log/slurmd.out" 2>&1 &
    SLURM_LOCAL_PIDS+=($!)
    for _ in $(seq 100); do
        if sinfo -h -o %T 2>/dev/null | grep -q idle; then return 0; fi
        sleep 0.2
    done
    SLURM_LOCAL_WHY="the node never became idle (logs in $d/log)"
    return 1
}

slurm_local_stop() {
    local pid
    # End our jobs first, so that no job step outlives the daemons.
    if [ -n "${SLURM_CONF:-}" ] && [ "$SLURM_CONF" = "$SLURM_LOCAL_DIR/slurm.conf" ]; then
        scancel --user="$(id -un)" 2>/dev/null
        for _ in $(seq 40); do [ -z "$(squeue -h 2>/dev/null)" ] && break; sleep 0.25; done
    fi
    for ((i = ${#SLURM_LOCAL_PIDS[@]} - 1; i >= 0; i--)); do
        pid="${SLURM_LOCAL_PIDS[$i]}"
        kill "$pid" 2>/dev/null
    done
    for pid in "${SLURM_LOCAL_PIDS[@]}"; do
        for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$pid" 2>/dev/null
    done
    SLURM_LOCAL_PIDS=()
    [ -n "$SLURM_LOCAL_DIR" ] && [ "${SLURM_LOCAL_KEEP:-0}" != 1 ] && rm -rf "$SLURM_LOCAL_DIR"
    SLURM_LOCAL_DIR=
}
