#!/usr/bin/env bash
# A single-node SLURM cluster with accounting, for `make test-cluster`.
#
# As root on Debian 12 with only the package archive reachable: installs slurm-wlm, slurmdbd,
# mariadb-server and munge when they are missing, then starts munged, mariadbd, slurmdbd,
# slurmctld and slurmd directly (no systemd), each on 127.0.0.1 only, and records their PIDs
# for stop.sh. Idempotent: a daemon already running from an earlier call is kept, the database
# and the munge key are reused. Everything it writes lies under one scratch directory
# ($SLURM_FIXTURE_DIR, default /tmp/privssl-slurm), except /etc/slurm/slurm.conf: the executor's
# job steps run `srun` with the SLURM_* variables removed (so without SLURM_CONF), hence that
# path is made a symlink to the fixture's slurm.conf; whatever was there is kept and put back
# by stop.sh.
#
# The node is the machine itself, with its real CPUs and memory, one fake GPU (gres gpu:fake:1,
# /dev/null for a device) so that `--gpus=1` or `--gpus=fake:1` can be requested, granted and
# accounted without a GPU, and EnforcePartLimits=ALL, so that an impossible request fails at
# submission instead of pending forever. Accounting (slurmdbd on mariadb) is what `sacct`, the
# executor plugin's default status query, needs; the cluster is registered in it, with an account.
#
#   bash tests/cluster/start.sh      # prints the variables of the cluster (also in $DIR/cluster.env)
#   bash tests/cluster/stop.sh
set -euo pipefail

DIR=${SLURM_FIXTURE_DIR:-/tmp/privssl-slurm}
PORT=${SLURM_FIXTURE_PORT:-16817}   # slurmctld; slurmd, slurmdbd and mariadbd use the next three
CLUSTER=privssl
ACCOUNT=privssl
PARTITION=debug
GPU_TYPE=fake   # the model of the node's one fake GPU
DB=slurm_acct_db
PACKAGES=(slurmctld slurmd slurm-client slurmdbd mariadb-server munge)
ETC_CONF=/etc/slurm/slurm.conf

say() { echo "cluster: $*"; }
die() { echo "cluster: error: $*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "the SLURM fixture needs root (it installs packages and runs the daemons as root)"
command -v apt-get >/dev/null || die "the SLURM fixture needs apt-get (Debian or Ubuntu)"

t0=$(date +%s.%N)
mkdir -p "$DIR/backup"

# ------------------------------------------------------------------------------ packages
missing=()
for pkg in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
    say "installing ${missing[*]}"
    # The packages' maintainer scripts would start the system's own daemons (with /etc config):
    # a policy-rc.d that answers 101 keeps invoke-rc.d from starting anything.
    policy=/usr/sbin/policy-rc.d
    policy_backup=""
    if [ -e "$policy" ]; then
        set +e; "$policy" slurmctld start >/dev/null 2>&1; rc=$?; set -e
    else
        rc=none
    fi
    if [ "$rc" != 101 ]; then
        if [ -e "$policy" ]; then policy_backup=$DIR/backup/policy-rc.d; cp -p "$policy" "$policy_backup"; fi
        printf '#!/bin/sh\nexit 101\n' > "$policy"; chmod 755 "$policy"
        restore_policy() { if [ -n "$policy_backup" ]; then mv "$policy_backup" "$policy"; else rm -f "$policy"; fi; }
        trap restore_policy EXIT
    fi
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    if [ "$rc" != 101 ]; then restore_policy; trap - EXIT; fi
fi
t_installed=$(date +%s.%N)

# ------------------------------------------------------------------------------ layout
mkdir -p "$DIR"
chmod 755 "$DIR"
mkdir -p "$DIR"/{etc,log,run,pids,state/ctld,state/d,tmp,backup}
install -d -m 755 "$DIR/munge"
chmod 755 "$DIR"/{etc,log,run,pids,state,tmp}

HOST=$(hostname -s)
CTLD_PORT=$PORT
SLURMD_PORT=$((PORT + 1))
DBD_PORT=$((PORT + 2))
DB_PORT=$((PORT + 3))
MUNGE_SOCKET=$DIR/munge/munge.socket
MYSQL_SOCKET=$DIR/run/mariadbd.sock
CONF=$DIR/etc/slurm.conf
export SLURM_CONF=$CONF   # slurmdbd finds slurmdbd.conf beside it; the clients use it too

# alive NAME: the daemon NAME that this fixture started is running
alive() {
    local pid
    [ -s "$DIR/pids/$1" ] || return 1
    pid=$(cat "$DIR/pids/$1")
    [ -d "/proc/$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$1" ]
}

# start NAME CMD...: run CMD (a daemon in the foreground) in its own session, record its PID
start() {
    local name=$1; shift
    if alive "$name"; then say "$name already running (pid $(cat "$DIR/pids/$name"))"; return; fi
    setsid "$@" >>"$DIR/log/$name.out" 2>&1 </dev/null &
    local pid=$!
    echo "$pid" > "$DIR/pids/$name"
    # setsid execs the daemon itself (the shell's background job is not a group leader); were it
    # to fork instead, the daemon's own pid file ($DIR/run/NAME.pid) names it
    for _ in $(seq 50); do
        [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$name" ] && return
        if [ ! -d "/proc/$pid" ] && [ -s "$DIR/run/$name.pid" ]; then
            cp "$DIR/run/$name.pid" "$DIR/pids/$name"
            alive "$name" && return
        fi
        sleep 0.1
    done
    tail -n 20 "$DIR/log/$name.out" "$DIR/log/$name.log" >&2 2>/dev/null
    die "$name did not start"
}

# wait_for WHAT SECONDS CMD...: retry CMD until it succeeds
wait_for() {
    local what=$1 seconds=$2; shift 2
    local deadline=$(( $(date +%s) + seconds ))
    until "$@" >/dev/null 2>&1; do
        [ "$(date +%s)" -lt "$deadline" ] || die "timed out waiting for $what (logs: $DIR/log)"
        sleep 0.2
    done
}

# ------------------------------------------------------------------------------ munge
# Its own key and socket under $DIR; slurm finds the socket through AuthInfo.
if [ ! -s "$DIR/munge/munge.key" ]; then
    dd if=/dev/urandom of="$DIR/munge/munge.key" bs=1024 count=1 status=none
fi
chmod 400 "$DIR/munge/munge.key"
start munged munged --foreground --force --key-file="$DIR/munge/munge.key" --socket="$MUNGE_SOCKET" \
    --pid-file="$DIR/run/munged.pid" --log-file="$DIR/log/munged.log" --seed-file="$DIR/munge/munged.seed"
wait_for munged 20 sh -c "munge -S '$MUNGE_SOCKET' -n | unmunge -S '$MUNGE_SOCKET'"

# ------------------------------------------------------------------------------ mariadb
if [ ! -d "$DIR/mysql/mysql" ]; then
    rm -rf "$DIR/mysql"
    mariadb-install-db --no-defaults --datadir="$DIR/mysql" --user=root --auth-root-authentication-method=socket \
        --skip-test-db >"$DIR/log/mariadb-install-db.log" 2>&1 \
        || { tail -n 20 "$DIR/log/mariadb-install-db.log" >&2; die "mariadb-install-db failed"; }
fi
start mariadbd mariadbd --no-defaults --user=root --datadir="$DIR/mysql" --socket="$MYSQL_SOCKET" \
    --pid-file="$DIR/run/mariadbd.pid" --port="$DB_PORT" --bind-address=127.0.0.1 --skip-name-resolve \
    --log-error="$DIR/log/mariadbd.log" --tmpdir="$DIR/tmp" --innodb-buffer-pool-size=64M \
    --innodb-lock-wait-timeout=900
wait_for mariadbd 60 mariadb-admin --no-defaults --socket="$MYSQL_SOCKET" ping
if [ ! -s "$DIR/etc/db.pass" ]; then
    (umask 077; head -c 18 /dev/urandom | base64 | tr -d '/+=' > "$DIR/etc/db.pass")
fi
DB_PASS=$(cat "$DIR/etc/db.pass")
mariadb --no-defaults --socket="$MYSQL_SOCKET" -u root <<SQL
CREATE DATABASE IF NOT EXISTS $DB;
CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY '$DB_PASS';
ALTER USER 'slurm'@'127.0.0.1' IDENTIFIED BY '$DB_PASS';
GRANT ALL ON $DB.* TO 'slurm'@'127.0.0.1';
SQL

# ------------------------------------------------------------------------------ slurm config
# The node as slurmd sees it (sockets, cores, threads, memory), plus the fake GPU.
node_hw=$(slurmd -C 2>/dev/null | head -n 1 | tr ' ' '\n' \
    | grep -E '^(CPUs|Boards|SocketsPerBoard|CoresPerSocket|ThreadsPerCore|RealMemory)=' | tr '\n' ' ')
[ -n "$node_hw" ] || die "slurmd -C printed no node description"
CPUS=$(echo "$node_hw" | tr ' ' '\n' | sed -n 's/^CPUs=//p')

cat > "$CONF.new" <<EOF
# Written by tests/cluster/start.sh: a single-node cluster on 127.0.0.1 for the workflow tests.
ClusterName=$CLUSTER
SlurmctldHost=$HOST(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
# bind to the address the host name resolves to (127.0.0.1), not to every address
CommunicationParameters=NoCtldInAddrAny,NoInAddrAny
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$MUNGE_SOCKET
CredType=cred/munge
StateSaveLocation=$DIR/state/ctld
SlurmdSpoolDir=$DIR/state/d
SlurmctldPidFile=$DIR/run/slurmctld.pid
SlurmdPidFile=$DIR/run/slurmd.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
TmpFS=$DIR/tmp
# no systemd, no cgroups: processes are tracked through /proc, tasks are not bound
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
ReturnToService=2
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
EnforcePartLimits=ALL
GresTypes=gpu
MinJobAge=300
KillWait=5
InactiveLimit=0
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort=$DBD_PORT
# the munge socket for slurmdbd connections (AuthInfo covers the others)
AccountingStoragePass=$MUNGE_SOCKET
AccountingStorageEnforce=associations
AccountingStorageTRES=gres/gpu,gres/gpu:$GPU_TYPE
AccountingStoreFlags=job_comment
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=30
JobCompType=jobcomp/none
NodeName=$HOST NodeAddr=127.0.0.1 ${node_hw}Gres=gpu:$GPU_TYPE:1 State=UNKNOWN
PartitionName=$PARTITION Nodes=$HOST Default=YES MaxTime=INFINITE State=UP
EOF
mv "$CONF.new" "$CONF"
cat > "$DIR/etc/gres.conf" <<EOF
# One fake GPU of model "$GPU_TYPE" (slurm 22.05 counts gpu:0 without a File=): enough to request,
# grant and account --gpus=1 or --gpus=$GPU_TYPE:1 without a GPU. Its jobs see CUDA_VISIBLE_DEVICES=0.
NodeName=$HOST Name=gpu Type=$GPU_TYPE File=/dev/null
EOF
(umask 077; cat > "$DIR/etc/slurmdbd.conf" <<EOF
AuthType=auth/munge
AuthInfo=socket=$MUNGE_SOCKET
DbdHost=$HOST
DbdAddr=127.0.0.1
DbdPort=$DBD_PORT
CommunicationParameters=NoInAddrAny
SlurmUser=root
PidFile=$DIR/run/slurmdbd.pid
LogFile=$DIR/log/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$DB_PORT
StorageUser=slurm
StoragePass=$DB_PASS
StorageLoc=$DB
EOF
)
chmod 600 "$DIR/etc/slurmdbd.conf"

# /etc/slurm/slurm.conf -> the fixture's slurm.conf (what was there is kept in $DIR/backup)
if [ "$(readlink "$ETC_CONF" 2>/dev/null)" != "$CONF" ]; then
    if [ ! -e "$DIR/backup/state" ]; then
        if [ -d /etc/slurm ]; then : ; else mkdir -p /etc/slurm; echo created-dir > "$DIR/backup/dir"; fi
        if [ -e "$ETC_CONF" ] || [ -L "$ETC_CONF" ]; then
            mv "$ETC_CONF" "$DIR/backup/slurm.conf"; echo moved > "$DIR/backup/state"
        else
            echo absent > "$DIR/backup/state"
        fi
    fi
    ln -sfn "$CONF" "$ETC_CONF"
fi

# ------------------------------------------------------------------------------ slurm daemons
start slurmdbd slurmdbd -D
wait_for slurmdbd 60 sacctmgr -n list cluster
# sacct needs the cluster registered; jobs are charged to $ACCOUNT (root's default account).
if [ -z "$(sacctmgr -n -P list cluster "$CLUSTER" format=cluster)" ]; then
    sacctmgr -i add cluster "$CLUSTER" >/dev/null
fi
if [ -z "$(sacctmgr -n -P list account "$ACCOUNT" format=account)" ]; then
    sacctmgr -i add account "$ACCOUNT" cluster="$CLUSTER" description="privssl workflow tests" \
        organization=privssl >/dev/null
fi
if [ -z "$(sacctmgr -n -P list assoc cluster="$CLUSTER" account="$ACCOUNT" user=root format=user)" ]; then
    sacctmgr -i add user root account="$ACCOUNT" cluster="$CLUSTER" >/dev/null
fi
sacctmgr -i modify user root set defaultaccount="$ACCOUNT" >/dev/null 2>&1 || true

start slurmctld slurmctld -D -f "$CONF"
wait_for slurmctld 60 scontrol ping
start slurmd slurmd -D -f "$CONF"
node_ready() { sinfo -h -n "$HOST" -o %t | grep -Eq '^(idle|mix|alloc)'; }
deadline=$(( $(date +%s) + 60 ))
until node_ready; do
    state=$(sinfo -h -n "$HOST" -o %t 2>/dev/null || true)
    case "$state" in
        drain*|down*) scontrol update nodename="$HOST" state=resume >/dev/null 2>&1 || true ;;
    esac
    [ "$(date +%s)" -lt "$deadline" ] || die "node $HOST is '$state', not idle (logs: $DIR/log)"
    sleep 0.2
done

t_up=$(date +%s.%N)
cat > "$DIR/cluster.env" <<EOF
SLURM_FIXTURE_DIR=$DIR
SLURM_CONF=$CONF
SLURM_FIXTURE_CLUSTER=$CLUSTER
SLURM_FIXTURE_ACCOUNT=$ACCOUNT
SLURM_FIXTURE_PARTITION=$PARTITION
SLURM_FIXTURE_NODE=$HOST
SLURM_FIXTURE_CPUS=$CPUS
SLURM_FIXTURE_GPU_TYPE=$GPU_TYPE
EOF
cat "$DIR/cluster.env"
took=$(awk -v a="$t0" -v b="$t_installed" -v c="$t_up" 'BEGIN { printf "%.1f s (packages: %.1f s)", c - a, b - a }')
say "up in $took:" \
    "node $HOST, $CPUS CPUs, gres gpu:$GPU_TYPE:1, partition $PARTITION, account $ACCOUNT"
