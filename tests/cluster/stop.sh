#!/usr/bin/env bash
# Stop the single-node SLURM cluster of tests/cluster/start.sh: cancels the jobs still in it,
# stops exactly the daemons start.sh started (the PIDs it recorded under $DIR/pids, each checked
# against the daemon's name before it is signalled), and puts back what /etc/slurm/slurm.conf was.
# The scratch directory stays (packages, database and munge key are reused by the next start);
# `--purge` removes it as well.
set -uo pipefail

DIR=${SLURM_FIXTURE_DIR:-/tmp/privssl-slurm}
CONF=$DIR/etc/slurm.conf
ETC_CONF=/etc/slurm/slurm.conf
say() { echo "cluster: $*"; }

[ -d "$DIR/pids" ] || { say "no cluster recorded in $DIR"; exit 0; }
export SLURM_CONF=$CONF

pid_of() {  # the recorded PID of daemon $1, if that process is still the daemon
    local pid
    [ -s "$DIR/pids/$1" ] || return 1
    pid=$(cat "$DIR/pids/$1")
    [ -d "/proc/$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$1" ] && echo "$pid"
}

# Jobs left running would leave slurmstepd and their processes behind.
if pid_of slurmctld >/dev/null; then
    scancel --user root --quiet 2>/dev/null || true
    for _ in $(seq 100); do
        [ -z "$(squeue -h -o %i 2>/dev/null)" ] && break
        sleep 0.2
    done
fi

status=0
for name in slurmd slurmctld slurmdbd mariadbd munged; do
    if pid=$(pid_of "$name"); then
        kill -TERM "$pid"
        for _ in $(seq 150); do [ -d "/proc/$pid" ] || break; sleep 0.2; done
        if [ -d "/proc/$pid" ]; then
            say "$name (pid $pid) ignored SIGTERM for 30 s: SIGKILL"
            kill -KILL "$pid" 2>/dev/null
        fi
        say "stopped $name (pid $pid)"
    fi
    rm -f "$DIR/pids/$name"
done

# /etc/slurm/slurm.conf: put back what start.sh found there
if [ "$(readlink "$ETC_CONF" 2>/dev/null)" = "$CONF" ]; then
    rm -f "$ETC_CONF"
    case "$(cat "$DIR/backup/state" 2>/dev/null)" in
        moved) mv "$DIR/backup/slurm.conf" "$ETC_CONF" && say "restored the previous $ETC_CONF" ;;
    esac
    if [ "$(cat "$DIR/backup/dir" 2>/dev/null)" = created-dir ]; then rmdir /etc/slurm 2>/dev/null || true; fi
    rm -f "$DIR/backup/state" "$DIR/backup/dir"
fi

if [ "${1:-}" = --purge ]; then
    rm -rf "$DIR" && say "removed $DIR"
fi
exit $status
