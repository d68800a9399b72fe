#!/usr/bin/env bash
# A real two-node Slurm cluster on one machine, for the Slurm executor's tests (tests/
# experiments/test_slurm.cpp) and for trying `tupe run --executor slurm` by hand: munged,
# MariaDB and slurmdbd (accounting, so sacct answers), slurmctld, and two slurmd named
# tupe-node1 and tupe-node2, each in network, PID, UTS and mount namespaces of its own (its own
# address on a bridge, its own hostname and /etc/hosts), sharing the filesystem. All state,
# logs and sockets live under DIR; nothing under /etc is written. Slurm's commands find the
# cluster through SLURM_CONF=DIR/slurm.conf (printed by `env`). DIR on a tmpfs (/dev/shm)
# starts faster: MariaDB's first start syncs its files about a thousand times.
#
#   slurm_cluster.sh start DIR [PID]   start everything; waits until both nodes are idle. With
#                                       PID, a watcher stops the cluster when PID exits.
#   slurm_cluster.sh env DIR            the variables to export: SLURM_CONF=...
#   slurm_cluster.sh kill-node DIR N    node N (tupe-node1|2) is lost: its slurmd, job steps and
#                                       jobs die at once (SIGKILL to its PID namespace)
#   slurm_cluster.sh start-node DIR N   boot node N again (after kill-node)
#   slurm_cluster.sh restart-controller DIR   slurmctld again with its state lost: job ids
#                                       start at 1 again, accounting keeps the old jobs
#   slurm_cluster.sh stop DIR           stop every daemon started here, remove the namespaces
#
# Needs root (network namespaces), iproute2 and util-linux (ip, unshare), Debian's slurmctld,
# slurmd, slurmdbd, slurm-client, munge, mariadb-server-core and mariadb-client-core
# (./run.sh installs them). On failure it stops what it started and prints one line naming
# the daemon and its log's last line.
set -euo pipefail

starting=0
die() {
    echo "slurm_cluster.sh: $*" >&2
    [ "$starting" = 0 ] || stop_all
    exit 1
}
[ $# -ge 2 ] ||
    die "usage: slurm_cluster.sh start|stop|env|kill-node|start-node|restart-controller DIR [NODE|PID]"
cmd=$1
dir=$(mkdir -p "$2" && cd "$2" && pwd)
arg=${3:-}
export SLURM_CONF="$dir/slurm.conf"

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
log_tail() { [ -f "$1" ] && tail -n 1 "$1" | tr -d '\n' || echo "(no log)"; }
slot() { cat "$dir/slot"; }

# Whether process PID is alive. A zombie counts as gone: the daemons are reparented to PID 1,
# which may reap them only seconds later (kill -0 still succeeds on a zombie).
running() {
    local stat
    stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
    stat=${stat##*) }
    [ "${stat%% *}" != Z ]
}

# Kills the processes whose pids are in FILEs (TERM to all at once, then KILL to those left
# after 5 s) and removes the FILEs.
stop_pid_files() {
    local pids=() f pid
    for f in "$@"; do
        [ -s "$f" ] && pids+=("$(cat "$f")")
    done
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    for _ in $(seq 50); do
        local left=0
        for pid in "${pids[@]}"; do running "$pid" && left=1; done
        [ "$left" = 1 ] || break
        sleep 0.1
    done
    for pid in "${pids[@]}"; do kill -9 "$pid" 2>/dev/null || true; done
    rm -f "$@"
}

# A node's processes live in a PID namespace whose first process is a child of `unshare
# --kill-child`: SIGKILL to that unshare ends the whole namespace at once, like a power cut.
kill_node() {
    [ -s "$dir/node-$1.pid" ] || return 0
    local pid
    pid=$(cat "$dir/node-$1.pid")
    kill -9 "$pid" 2>/dev/null || true
    for _ in $(seq 50); do running "$pid" || break; sleep 0.1; done
    rm -f "$dir/node-$1.pid"
}

stop_all() {
    # The watcher runs `stop` itself: it is then this process's parent, and left alone.
    if [ -s "$dir/watcher.pid" ] && [ "$(cat "$dir/watcher.pid")" != "$PPID" ]; then
        stop_pid_files "$dir/watcher.pid"
    fi
    rm -f "$dir/watcher.pid"
    for n in 1 2; do kill_node "tupe-node$n"; done
    # Their state is thrown away: no order among them to keep.
    stop_pid_files "$dir/slurmctld.pid" "$dir/slurmdbd.pid" "$dir/mariadbd.pid" "$dir/munged.pid"
    if [ -s "$dir/slot" ]; then
        local s
        s=$(slot)
        for n in 1 2; do ip netns del "tupe$s-node$n" 2>/dev/null || true; done
        ip link del "tupebr$s" 2>/dev/null || true
        rm -f "$dir/slot"
    fi
}

# A free /24 and bridge: creating the bridge tupebrS is the atomic claim on slot S, so
# clusters of concurrent test processes never share addresses.
claim_slot() {
    local start=$((($$ % 200) + 20))
    for i in $(seq 0 199); do
        local s=$(((start + i) % 200 + 20))
        if ip link add "tupebr$s" type bridge 2>/dev/null; then
            echo "$s" >"$dir/slot"
            return 0
        fi
    done
    die "no free bridge name tupebr20..219 (ip link add failed: not root, or no network namespaces here?)"
}

start_node() {
    local name=$1 n=${1#tupe-node} s
    s=$(slot)
    kill_node "$name"
    # The namespace's first process is bash (it reaps the orphans slurmstepd leaves); the
    # node's hostname and /etc/hosts are its own, its /proc shows only its processes.
    # nsenter, not `ip netns exec`, which mounts a sysfs of its own over /sys and so hides
    # the cgroup filesystem that slurmd's cgroup plugin reads.
    mkdir -p "$dir/spool/$name"
    setsid nsenter --net="/run/netns/tupe$s-node$n" unshare --pid --fork --mount-proc --uts --mount \
        --kill-child=SIGKILL bash -c "mount --bind '$dir/hosts' /etc/hosts && hostname $name &&
            /usr/sbin/slurmd -D -f '$dir/slurm.conf' -N $name & wait" \
        </dev/null >>"$dir/log/node-$name.out" 2>&1 &
    echo $! >"$dir/node-$name.pid"
}

wait_nodes_idle() {
    local state="" until=$((SECONDS + 60))
    while [ $SECONDS -lt $until ]; do
        kill -0 "$(cat "$dir/slurmctld.pid" 2>/dev/null || echo 0)" 2>/dev/null ||
            die "slurmctld is not running: $(log_tail "$dir/log/slurmctld.log")"
        state=$(timeout 5 sinfo -h -N -o '%N %t' 2>/dev/null | sort | tr '\n' ' ' || true)
        case "$state" in "tupe-node1 idle tupe-node2 idle "*) return 0 ;; esac
        sleep 0.2
    done
    die "nodes not idle after 60 s (${state:-sinfo gave nothing}): $(log_tail "$dir/log/slurmctld.log")"
}

start_database() {
    local db_port=$1 dbd_port=$2
    # A 4 MB redo log, not the default 96 MB: the cluster's folder (~100 MB) fits a small
    # /dev/shm. Its ~1,000 fdatasync take ~5 s on a disk and under 1 s on a tmpfs.
    mariadb-install-db --no-defaults --datadir="$dir/mysql" --user="$user" \
        --auth-root-authentication-method=normal --skip-test-db --innodb-log-file-size=4M \
        >"$dir/log/mariadb-install.log" 2>&1 ||
        die "mariadb-install-db failed: $(log_tail "$dir/log/mariadb-install.log")"
    printf "CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY 'tupe';\n%s\n" \
        "GRANT ALL ON *.* TO 'slurm'@'127.0.0.1';" >"$dir/mysql-init.sql"
    setsid /usr/sbin/mariadbd --no-defaults --datadir="$dir/mysql" --user="$user" \
        --bind-address=127.0.0.1 --port="$db_port" --socket="$dir/mysql.sock" \
        --pid-file="$dir/mariadbd.pid" --log-error="$dir/log/mariadbd.log" --skip-name-resolve \
        --skip-log-bin --init-file="$dir/mysql-init.sql" --innodb-buffer-pool-size=16M \
        --innodb-log-file-size=4M \
        </dev/null >/dev/null 2>&1 &
    for _ in $(seq 300); do
        mariadb --no-defaults -h 127.0.0.1 -P "$db_port" -u slurm -ptupe -e 'select 1' \
            >/dev/null 2>&1 && break
        sleep 0.1
    done
    mariadb --no-defaults -h 127.0.0.1 -P "$db_port" -u slurm -ptupe -e 'select 1' >/dev/null 2>&1 ||
        die "mariadbd did not start: $(log_tail "$dir/log/mariadbd.log")"
    cat >"$dir/slurmdbd.conf" <<CONF
# Written by tests/support/slurm_cluster.sh: accounting for the test cluster.
AuthType=auth/munge
AuthInfo=socket=$dir/munge/munge.socket
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort=$dbd_port
SlurmUser=$user
LogFile=$dir/log/slurmdbd.log
PidFile=$dir/slurmdbd.pid
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$db_port
StorageUser=slurm
StoragePass=tupe
StorageLoc=tupe_acct
CONF
    chmod 600 "$dir/slurmdbd.conf"
    # slurmdbd reads slurmdbd.conf beside $SLURM_CONF.
    /usr/sbin/slurmdbd || die "slurmdbd did not start: $(log_tail "$dir/log/slurmdbd.log")"
    for _ in $(seq 150); do
        grep -q "slurmdbd version .* started" "$dir/log/slurmdbd.log" 2>/dev/null && return 0
        sleep 0.2
    done
    die "slurmdbd did not start in 30 s: $(log_tail "$dir/log/slurmdbd.log")"
}

write_slurm_conf() {
    local s=$1 ctld_port=$2 slurmd_port=$3 dbd_port=$4 mem=$5
    cat >"$dir/slurm.conf" <<CONF
# Written by tests/support/slurm_cluster.sh: a two-node test cluster on one machine.
ClusterName=tupe-test
SlurmctldHost=localhost(10.213.$s.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=$user
SlurmdUser=$user
AuthType=auth/munge
# cred_expire also sets how long a requeued job waits before it may start again (default
# 120 s); 20 s keeps the node-loss and preemption tests short.
AuthInfo=socket=$dir/munge/munge.socket,cred_expire=20
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/%n
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/spool/slurmd-%n.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort=$dbd_port
# With slurmdbd and munge this is the munged socket that slurmctld and sacct use for it.
AccountingStoragePass=$dir/munge/munge.socket
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=1
ReturnToService=2
MinJobAge=3600
MpiDefault=none
SwitchType=switch/none
KillWait=5
InactiveLimit=0
SlurmdTimeout=30
# One CPU per node: the two nodes are this machine's two cores (or share one).
NodeName=tupe-node1 NodeHostname=tupe-node1 NodeAddr=10.213.$s.11 CPUs=1 RealMemory=$mem State=UNKNOWN
NodeName=tupe-node2 NodeHostname=tupe-node2 NodeAddr=10.213.$s.12 CPUs=1 RealMemory=$mem State=UNKNOWN
PartitionName=debug Nodes=tupe-node1,tupe-node2 Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
CONF
}

make_network() {
    local s=$1
    ip link set "tupebr$s" up
    ip addr add "10.213.$s.1/24" dev "tupebr$s"
    printf '127.0.0.1 localhost\n10.213.%s.1 tupe-ctl\n10.213.%s.11 tupe-node1\n10.213.%s.12 tupe-node2\n' \
        "$s" "$s" "$s" >"$dir/hosts"
    for n in 1 2; do
        ip netns add "tupe$s-node$n"
        ip link add "tupe${s}h$n" type veth peer name "tupe${s}n$n"
        ip link set "tupe${s}n$n" netns "tupe$s-node$n"
        ip link set "tupe${s}h$n" master "tupebr$s"
        ip link set "tupe${s}h$n" up
        ip netns exec "tupe$s-node$n" ip addr add "10.213.$s.1$n/24" dev "tupe${s}n$n"
        ip netns exec "tupe$s-node$n" ip link set "tupe${s}n$n" up
        ip netns exec "tupe$s-node$n" ip link set lo up
    done
}

start_cluster() {
    for exe in munged slurmctld slurmd slurmdbd sbatch sinfo sacct mariadbd mariadb-install-db ip unshare nsenter timeout; do
        command -v "$exe" >/dev/null 2>&1 || [ -x "/usr/sbin/$exe" ] ||
            die "$exe is not installed (Debian: apt-get install slurmctld slurmd slurmdbd slurm-client munge mariadb-server-core mariadb-client-core iproute2 util-linux)"
    done
    [ "$(id -u)" -eq 0 ] || die "needs root for network namespaces (ip netns add)"
    stop_all
    rm -rf "$dir/state" "$dir/spool" "$dir/mysql" "$dir/log"
    user=$(id -un)
    mkdir -p "$dir/munge" "$dir/state" "$dir/spool" "$dir/log"
    chmod 700 "$dir/munge"
    starting=1
    trap 'echo "slurm_cluster.sh: failed: $BASH_COMMAND" >&2; starting=0; stop_all' ERR
    trap 'stop_all; exit 1' TERM INT
    # munged wants a private key (0400/0600) in a private directory; its socket is a file, so
    # the nodes' namespaces reach it through the shared filesystem.
    [ -s "$dir/munge/munge.key" ] || head -c 1024 /dev/urandom >"$dir/munge/munge.key"
    chmod 600 "$dir/munge/munge.key"
    /usr/sbin/munged --force --key-file="$dir/munge/munge.key" \
        --socket="$dir/munge/munge.socket" --pid-file="$dir/munged.pid" \
        --log-file="$dir/log/munged.log" --seed-file="$dir/munge/munged.seed" ||
        die "munged did not start: $(log_tail "$dir/log/munged.log")"
    claim_slot
    local s
    s=$(slot)
    make_network "$s"
    local db_port dbd_port ctld_port slurmd_port mem
    db_port=$(free_port)
    dbd_port=$(free_port)
    ctld_port=$(free_port)
    slurmd_port=$(free_port)
    mem=$(($(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 / 4))
    start_database "$db_port" "$dbd_port"
    write_slurm_conf "$s" "$ctld_port" "$slurmd_port" "$dbd_port" "$mem"
    # slurmctld registers the cluster with slurmdbd on its first start.
    /usr/sbin/slurmctld -f "$dir/slurm.conf" ||
        die "slurmctld did not start: $(log_tail "$dir/log/slurmctld.log")"
    for n in 1 2; do start_node "tupe-node$n"; done
    wait_nodes_idle
    if [ -n "$arg" ]; then
        # The owner's watcher: a test process killed before its teardown leaves no daemons.
        setsid bash -c "while kill -0 $arg 2>/dev/null; do sleep 1; done; '$0' stop '$dir'" \
            </dev/null >/dev/null 2>&1 &
        echo $! >"$dir/watcher.pid"
    fi
    trap - ERR TERM INT
    starting=0
}

case "$cmd" in
    env) echo "SLURM_CONF=$dir/slurm.conf" ;;
    stop) stop_all ;;
    start) start_cluster ;;
    kill-node)
        case "$arg" in tupe-node1 | tupe-node2) kill_node "$arg" ;; *) die "no node '$arg'" ;; esac
        ;;
    restart-controller)
        # A controller that lost its state (a reinstalled cluster): job ids start again at 1,
        # while accounting (slurmdbd) remembers the jobs of before.
        stop_pid_files "$dir/slurmctld.pid"
        rm -rf "$dir/state" && mkdir -p "$dir/state"
        /usr/sbin/slurmctld -f "$dir/slurm.conf" ||
            die "slurmctld did not start: $(log_tail "$dir/log/slurmctld.log")"
        wait_nodes_idle
        ;;
    start-node)
        case "$arg" in tupe-node1 | tupe-node2) start_node "$arg" ;; *) die "no node '$arg'" ;; esac
        ;;
    *) die "unknown command '$cmd' (start, stop, env, kill-node, start-node, restart-controller)" ;;
esac
