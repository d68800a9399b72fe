#!/usr/bin/env bash
# A real single-host Slurm cluster for the Slurm executor's tests (tests/experiments/
# test_slurm.cpp) and for trying `tupe run --executor slurm` on a laptop: munged with its own
# key and socket, slurmctld, and one slurmd whose node is this host under the name
# tupe-node1, all with their state, logs and sockets under DIR and on free ports, so nothing
# touches /etc or a cluster the machine may belong to. Slurm's commands find the cluster
# through SLURM_CONF=DIR/slurm.conf (printed by `env`).
#
#   tests/support/slurm_cluster.sh start DIR   start the daemons; waits until the node is idle
#   tests/support/slurm_cluster.sh env DIR     the variables to export: SLURM_CONF=...
#   tests/support/slurm_cluster.sh stop DIR    stop the daemons (their pids are under DIR)
#
# Needs Debian's slurmctld, slurmd, slurm-client and munge (./run.sh installs them). Runs as
# the current user (SlurmUser and SlurmdUser are that user: root on CI machines); jobs run as
# the submitting user. On failure it prints one line naming the daemon and its log's last line.
set -euo pipefail

die() { echo "slurm_cluster.sh: $*" >&2; exit 1; }
[ $# -eq 2 ] || die "usage: slurm_cluster.sh start|stop|env DIR"
cmd=$1
dir=$(mkdir -p "$2" && cd "$2" && pwd)

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

stop_all() {
    for d in slurmd slurmctld munged; do
        if [ -s "$dir/$d.pid" ]; then
            pid=$(cat "$dir/$d.pid")
            kill "$pid" 2>/dev/null || true
            for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
            kill -9 "$pid" 2>/dev/null || true
            rm -f "$dir/$d.pid"
        fi
    done
}

log_tail() { [ -f "$1" ] && tail -n 1 "$1" | tr -d '\n' || echo "(no log)"; }

case "$cmd" in
    env) echo "SLURM_CONF=$dir/slurm.conf" ;;
    stop) stop_all ;;
    start)
        for exe in munged slurmctld slurmd sbatch sinfo; do
            command -v "$exe" >/dev/null 2>&1 || [ -x "/usr/sbin/$exe" ] ||
                die "$exe is not installed (Debian: apt-get install slurmctld slurmd slurm-client munge)"
        done
        stop_all
        user=$(id -un)
        mkdir -p "$dir/munge" "$dir/state" "$dir/spool" "$dir/log"
        chmod 700 "$dir/munge"
        # munged wants a private key (0400/0600) in a private directory.
        [ -s "$dir/munge/munge.key" ] || head -c 1024 /dev/urandom >"$dir/munge/munge.key"
        chmod 600 "$dir/munge/munge.key"
        /usr/sbin/munged --force --key-file="$dir/munge/munge.key" \
            --socket="$dir/munge/munge.socket" --pid-file="$dir/munged.pid" \
            --log-file="$dir/log/munged.log" --seed-file="$dir/munge/munged.seed" ||
            die "munged did not start: $(log_tail "$dir/log/munged.log")"
        ctld_port=$(free_port)
        slurmd_port=$(free_port)
        cpus=$(nproc)
        mem=$(($(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 / 2))
        cat >"$dir/slurm.conf" <<CONF
# Written by tests/support/slurm_cluster.sh: a one-node test cluster.
ClusterName=tupe-test
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=$user
SlurmdUser=$user
AuthType=auth/munge
AuthInfo=socket=$dir/munge/munge.socket
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/%n
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=1
ReturnToService=2
MinJobAge=3600
MpiDefault=none
SwitchType=switch/none
LaunchParameters=use_interactive_step
KillWait=5
InactiveLimit=0
NodeName=tupe-node1 NodeHostname=$(hostname) NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=debug Nodes=tupe-node1 Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
CONF
        export SLURM_CONF="$dir/slurm.conf"
        /usr/sbin/slurmctld -f "$dir/slurm.conf" ||
            die "slurmctld did not start: $(log_tail "$dir/log/slurmctld.log")"
        /usr/sbin/slurmd -f "$dir/slurm.conf" -N tupe-node1 ||
            die "slurmd did not start: $(log_tail "$dir/log/slurmd-tupe-node1.log")"
        for _ in $(seq 150); do
            state=$(sinfo -h -n tupe-node1 -o %t 2>/dev/null || true)
            case "$state" in idle*|mix*|alloc*) exit 0 ;; esac
            sleep 0.2
        done
        die "node tupe-node1 is '${state:-unknown}' after 30 s: $(log_tail "$dir/log/slurmctld.log")"
        ;;
    *) die "unknown command '$cmd' (start, stop or env)" ;;
esac
