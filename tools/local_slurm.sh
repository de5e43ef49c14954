#!/usr/bin/env bash
# A real single-node SLURM cluster on this machine, for testing `snakemake --profile slurm`.
#
#   bash tools/local_slurm.sh start    # install what is missing, write configs, start, wait idle
#   bash tools/local_slurm.sh status   # daemons, sinfo, squeue; exit 0 only if the node is usable
#   bash tools/local_slurm.sh stop     # scancel every job, stop every daemon this script starts
#   bash tools/local_slurm.sh purge    # stop, then remove the packages, configs, state and logs
#
# Needs root on Debian/Ubuntu (apt). Works without systemd: every daemon is started by hand
# (munged, mariadbd, slurmdbd, slurmctld, slurmd). `start` is idempotent: while everything is
# up and the configuration is unchanged it only checks the node; a changed configuration
# restarts the SLURM daemons. On failure it prints the tail of every log and exits 1.
#
# Knobs (environment variables):
#   LOCAL_SLURM_ACCOUNTING=1   1: slurmdbd + MariaDB, so `sacct` works (the snakemake SLURM
#                              plugin polls job status with sacct); 0: no accounting (then run
#                              snakemake with `--slurm-status-command squeue`).
#   LOCAL_SLURM_GPUS=2         fake GPUs (GRES gpu, files cloned from /dev/null); 0 for none.
#   LOCAL_SLURM_CPUS=          declare this many CPUs (one socket, one thread per core)
#                              instead of what slurmd sees, e.g. to run 4 sleeping jobs at
#                              once on a 2-core machine (benchmarks of scheduling overhead).
#   LOCAL_SLURM_PARTITION=main the one (default) partition.
#   LOCAL_SLURM_CLUSTER=paravg ClusterName in slurm.conf and in the accounting database.
#   LOCAL_SLURM_WAIT=60        seconds to wait for each daemon and for the node to be idle.
#   LOCAL_SLURM_DEF_MEM_PER_CPU=1000  MB given to a job that asks for no memory.
#   LOCAL_SLURM_CRED_EXPIRE=20 AuthInfo=cred_expire: a job step credential's lifetime (s),
#                              which is also how long a requeued job (NODE_FAIL) waits before
#                              it may start again; SLURM's default is 120 s. Jobs here start
#                              within a second of their credential, so 20 s is ample.
#   LOCAL_SLURM_SCHED_INTERVAL=5  SchedulerParameters=sched_interval: seconds between the
#                              main scheduling loop's passes over every pending job (SLURM's
#                              default 60 s); only they start a requeued job once its wait is
#                              over (the backfill loop runs only after a state change).
#
# What the fixes are for (each was needed on a bare Debian 12 container):
#   - apt's policy-rc.d blocks service starts at install time and there is no systemd, so the
#     daemons are started by hand; on a systemd host a temporary policy-rc.d keeps apt from
#     starting them with Debian's default configs.
#   - The node topology comes from `slurmd -C`; RealMemory is 90 % of what slurmd sees, since a
#     node that reports less memory than configured goes INVALID.
#   - A GPU without `File=` is dropped by slurmd and the node drains ("count reported lower than
#     configured"), so each fake GPU is a character device clone of /dev/null.
#   - DefMemPerCPU keeps a job without --mem from taking the whole node (CR_Core_Memory).
#   - AccountingStorageTRES=gres/gpu and job_comment make sacct show GPUs and job comments.
#   - MpiDefault=none, MailProg=/bin/true: no PMIx / MailProg errors in the logs.
#   - proctrack/linuxproc + task/none: no cgroups needed.
#   - The daemons bind to 127.0.0.1 only when the host name resolves to exactly 127.0.0.1
#     (with Debian's `127.0.1.1 host` line they would bind where clients do not connect).
set -euo pipefail
shopt -s inherit_errexit

ACCOUNTING="${LOCAL_SLURM_ACCOUNTING:-1}"
NGPUS="${LOCAL_SLURM_GPUS:-2}"
CPUS="${LOCAL_SLURM_CPUS:-}"
PARTITION="${LOCAL_SLURM_PARTITION:-main}"
CLUSTER="${LOCAL_SLURM_CLUSTER:-paravg}"
WAIT="${LOCAL_SLURM_WAIT:-60}"
DEF_MEM_PER_CPU="${LOCAL_SLURM_DEF_MEM_PER_CPU:-1000}"
CRED_EXPIRE="${LOCAL_SLURM_CRED_EXPIRE:-20}"
SCHED_INTERVAL="${LOCAL_SLURM_SCHED_INTERVAL:-5}"

ETC=/etc/slurm
RUN=/run/local-slurm                     # fake GPU devices, pid files of munged/mariadbd
LOG=/var/log/slurm
STATE=/var/lib/slurm
DB_CNF=/etc/mysql/mariadb.conf.d/99-local-slurm.cnf
DB_PASS_FILE="$ETC/local-slurm-dbpass"
DB_LOG=/var/log/mysql/local-slurm-mariadb.log
PKGS_SLURM=(munge slurmctld slurmd slurm-client)
PKGS_ACCT=(slurmdbd mariadb-server)

log() { echo "local_slurm: $*" >&2; }

die() {
    log "ERROR: $*"
    print_log_tails
    exit 1
}

print_log_tails() {
    local f
    for f in "$LOG/slurmctld.log" "$LOG/slurmd.log" "$LOG/slurmdbd.log" "$DB_LOG" \
        /var/log/munge/munged.log; do
        if [[ -s "$f" ]]; then
            echo "----- tail -n 25 $f -----" >&2
            tail -n 25 "$f" >&2 || true
        fi
    done
}

require_root() {
    [[ "$(id -u)" == 0 ]] || { log "must run as root"; exit 1; }
}

# --------------------------------------------------------------------------- packages
missing_packages() {
    local p wanted=("${PKGS_SLURM[@]}")
    [[ "$ACCOUNTING" == 1 ]] && wanted+=("${PKGS_ACCT[@]}")
    for p in "${wanted[@]}"; do
        if [[ "$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null)" != installed ]]; then
            echo "$p"
        fi
    done
}

apt_install() { # waits up to 5 min for another apt/dpkg to release its lock
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
        -o DPkg::Lock::Timeout=300 \
        -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold "$@"
}

install_packages() {
    local missing
    mapfile -t missing < <(missing_packages)
    ((${#missing[@]} == 0)) && return 0
    command -v apt-get >/dev/null || die "packages missing (${missing[*]}) and no apt-get"
    log "installing ${missing[*]}"
    # Keep apt from starting the services with Debian's default configs (systemd hosts);
    # containers usually already have a policy-rc.d that exits 101.
    local own_policy=0
    if [[ ! -e /usr/sbin/policy-rc.d ]]; then
        trap 'rm -f /usr/sbin/policy-rc.d' EXIT
        printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
        chmod 755 /usr/sbin/policy-rc.d
        own_policy=1
    fi
    local rc=0
    if ! apt_install "${missing[@]}" >/tmp/local-slurm-apt.log 2>&1; then
        log "install failed; apt-get update and retry"
        apt-get update -q -o DPkg::Lock::Timeout=300 >>/tmp/local-slurm-apt.log 2>&1 || true
        apt_install "${missing[@]}" >>/tmp/local-slurm-apt.log 2>&1 || rc=$?
    fi
    if ((own_policy)); then
        rm -f /usr/sbin/policy-rc.d
        trap - EXIT
    fi
    if ((rc != 0)); then
        tail -n 30 /tmp/local-slurm-apt.log >&2
        die "apt-get install ${missing[*]} failed (full log /tmp/local-slurm-apt.log)"
    fi
}

# --------------------------------------------------------------------------- helpers
# A process that exited but was not reaped yet (a zombie; some container inits reap late)
# counts as stopped.
proc_running() { # pid
    [[ -r "/proc/$1/status" ]] && ! grep -q '^State:[[:space:]]*Z' "/proc/$1/status" 2>/dev/null
}

# True if the daemon of a pid file runs: the pid is alive and is that daemon (the pid file
# names it: munged.pid -> munged, mysqld.pid -> mariadbd), so a stale pid file whose pid was
# reused by another process is never taken for the daemon, nor signalled by stop.
pid_alive() { # pidfile
    local pid name comm
    [[ -s "$1" ]] || return 1
    pid="$(cat "$1" 2>/dev/null)" || return 1
    [[ "$pid" =~ ^[0-9]+$ ]] && proc_running "$pid" || return 1
    name="$(basename "$1" .pid)"
    [[ "$name" == mysqld ]] && name=mariadbd
    comm="$(cat "/proc/$pid/comm" 2>/dev/null)" || return 1
    [[ "$comm" == "$name" ]]
}

wait_for() { # description, pidfile of the daemon that must stay up ("" for none), command...
    local what="$1" pidfile="$2" t=0 out
    shift 2
    until out="$("$@" 2>&1)"; do
        ((t++ >= WAIT * 5)) && die "timed out after ${WAIT}s waiting for $what: '$*' said: $out"
        if [[ -n "$pidfile" ]] && ((t > 10)) && ! pid_alive "$pidfile"; then
            die "$what exited (see its log below)"
        fi
        sleep 0.2
    done
}

stop_pidfile() { # name, pidfile
    local name="$1" pidfile="$2" pid t=0
    pid_alive "$pidfile" || { rm -f "$pidfile"; return 0; }
    pid="$(cat "$pidfile")"
    log "stopping $name (pid $pid)"
    kill -TERM "$pid" 2>/dev/null || true
    while proc_running "$pid"; do
        if ((t++ >= 150)); then
            log "$name did not stop in 30 s; KILL"
            kill -KILL "$pid" 2>/dev/null || true
            break
        fi
        sleep 0.2
    done
    rm -f "$pidfile"
}

node_name() { slurmd -C | sed -n 's/^NodeName=\([^ ]*\).*/\1/p'; }

# --------------------------------------------------------------------------- configs
ensure_hostname() { # node
    if ! getent hosts "$1" >/dev/null; then
        log "host name $1 does not resolve; adding '127.0.0.1 $1' to /etc/hosts"
        echo "127.0.0.1 $1" >>/etc/hosts
    fi
}

make_fake_gpus() {
    mkdir -p "$RUN"
    local i
    for ((i = 0; i < NGPUS; i++)); do
        [[ -c "$RUN/gpu$i" ]] || { rm -f "$RUN/gpu$i"; mknod -m 666 "$RUN/gpu$i" c 1 3; }
    done
}

# Print slurm.conf for this machine on stdout.
render_slurm_conf() { # node
    local node="$1" hw sockets cores threads mem addr_params="" gres_line="" acct
    hw="$(slurmd -C | head -n 1)"
    sockets="$(sed -n 's/.*SocketsPerBoard=\([0-9]*\).*/\1/p' <<<"$hw")"
    cores="$(sed -n 's/.*CoresPerSocket=\([0-9]*\).*/\1/p' <<<"$hw")"
    threads="$(sed -n 's/.*ThreadsPerCore=\([0-9]*\).*/\1/p' <<<"$hw")"
    mem="$(sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p' <<<"$hw")"
    [[ -n "$sockets" && -n "$cores" && -n "$threads" && -n "$mem" ]] ||
        die "cannot parse 'slurmd -C': $hw"
    mem=$((mem * 9 / 10))
    if [[ -n "$CPUS" ]]; then sockets=1 cores="$CPUS" threads=1; fi
    if [[ "$(getent ahostsv4 "$node" | awk 'NR == 1 {print $1}')" == 127.0.0.1 ]]; then
        addr_params="CommunicationParameters=NoCtldInAddrAny,NoInAddrAny"
    fi
    ((NGPUS > 0)) && gres_line="Gres=gpu:$NGPUS"
    if [[ "$ACCOUNTING" == 1 ]]; then
        acct="AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=$node
AccountingStoragePort=6819
AccountingStorageTRES=gres/gpu
AccountingStoreFlags=job_comment"
    else
        acct="AccountingStorageType=accounting_storage/none"
    fi
    cat <<EOF
# Written by tools/local_slurm.sh: a single-node test cluster. Do not edit; rerun the script.
ClusterName=$CLUSTER
SlurmctldHost=$node(127.0.0.1)
SlurmUser=slurm
AuthType=auth/munge
CredType=cred/munge
# a requeued job (node failure) may start again after this many seconds (default 120)
AuthInfo=cred_expire=$CRED_EXPIRE
$addr_params
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=$LOG/slurmctld.log
SlurmdLogFile=$LOG/slurmd.log
StateSaveLocation=$STATE/slurmctld
SlurmdSpoolDir=$STATE/slurmd
MpiDefault=none
MailProg=/bin/true
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
ReturnToService=2
# a declared CPU count may exceed the hardware's (LOCAL_SLURM_CPUS)
SlurmdParameters=config_overrides
SchedulerType=sched/backfill
# a pending job whose begin time has passed (a requeued one) starts within this many seconds
SchedulerParameters=sched_interval=$SCHED_INTERVAL
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=$DEF_MEM_PER_CPU
GresTypes=gpu
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=30
$acct
JobCompType=jobcomp/none
# squeue status mode of the snakemake plugin needs MinJobAge >= 3 x its poll interval.
MinJobAge=300
NodeName=$node NodeAddr=127.0.0.1 Sockets=$sockets CoresPerSocket=$cores ThreadsPerCore=$threads RealMemory=$mem $gres_line State=UNKNOWN
PartitionName=$PARTITION Nodes=$node Default=YES MaxTime=INFINITE State=UP
EOF
}

render_gres_conf() {
    echo "# Written by tools/local_slurm.sh: fake GPUs (character devices cloned from /dev/null)."
    ((NGPUS > 0)) && echo "Name=gpu File=$RUN/gpu[0-$((NGPUS - 1))]"
    return 0
}

render_slurmdbd_conf() { # node
    local addr_params=""
    if [[ "$(getent ahostsv4 "$1" | awk 'NR == 1 {print $1}')" == 127.0.0.1 ]]; then
        addr_params="CommunicationParameters=NoInAddrAny"
    fi
    cat <<EOF
# Written by tools/local_slurm.sh. MariaDB is reached over its unix socket only.
AuthType=auth/munge
DbdHost=$1
DbdAddr=127.0.0.1
DbdPort=6819
$addr_params
SlurmUser=slurm
LogFile=$LOG/slurmdbd.log
PidFile=/run/slurmdbd.pid
StorageType=accounting_storage/mysql
StorageHost=localhost
StorageUser=slurm
StoragePass=$(cat "$DB_PASS_FILE")
StorageLoc=slurm_acct_db
EOF
}

# Write content to path (mode, owner) unless it is already there; echo "changed" if written.
install_file() { # path, content, mode, owner
    local path="$1" content="$2" mode="$3" owner="$4"
    if [[ ! -f "$path" ]] || [[ "$(cat "$path")" != "$content" ]]; then
        printf '%s\n' "$content" >"$path.tmp"
        chmod "$mode" "$path.tmp"
        chown "$owner" "$path.tmp"
        mv "$path.tmp" "$path"
        echo changed
    fi
}

write_configs() { # node; echo "changed" if any slurm config changed
    local node="$1" changed=""
    mkdir -p "$ETC" "$LOG" "$STATE/slurmctld" "$STATE/slurmd"
    chown slurm:slurm "$LOG" "$STATE/slurmctld"
    changed+="$(install_file "$ETC/slurm.conf" "$(render_slurm_conf "$node")" 644 root:root)"
    changed+="$(install_file "$ETC/gres.conf" "$(render_gres_conf)" 644 root:root)"
    if [[ "$ACCOUNTING" == 1 ]]; then
        if [[ ! -s "$DB_PASS_FILE" ]]; then
            (umask 077 && head -c 18 /dev/urandom | base64 | tr -d '/+=' >"$DB_PASS_FILE")
        fi
        changed+="$(install_file "$ETC/slurmdbd.conf" "$(render_slurmdbd_conf "$node")" \
            600 slurm:slurm)"
    fi
    [[ -n "$changed" ]] && echo changed
    return 0
}

# --------------------------------------------------------------------------- daemons
start_munge() {
    if [[ ! -s /etc/munge/munge.key ]]; then
        log "creating /etc/munge/munge.key"
        if command -v mungekey >/dev/null; then
            mungekey --create --keyfile=/etc/munge/munge.key
        else
            dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
        fi
    fi
    chown munge:munge /etc/munge/munge.key
    chmod 400 /etc/munge/munge.key
    mkdir -p /run/munge
    chown munge:munge /run/munge
    chmod 755 /run/munge
    if ! pid_alive /run/munge/munged.pid; then
        log "starting munged"
        runuser -u munge -- /usr/sbin/munged --pid-file=/run/munge/munged.pid ||
            die "munged did not start"
    fi
    wait_for "munged" /run/munge/munged.pid bash -c 'munge -n | unmunge'
}

start_mariadb() {
    mkdir -p /etc/mysql/mariadb.conf.d /var/log/mysql /run/mysqld
    chown mysql:mysql /run/mysqld /var/log/mysql
    install_file "$DB_CNF" "# Written by tools/local_slurm.sh: values slurmdbd recommends; no TCP.
[mariadbd]
innodb_buffer_pool_size=1024M
innodb_lock_wait_timeout=900
skip-networking" 644 root:root >/dev/null
    if [[ ! -d /var/lib/mysql/mysql ]]; then
        log "initialising the MariaDB data directory"
        mariadb-install-db --user=mysql --datadir=/var/lib/mysql >/dev/null ||
            die "mariadb-install-db failed"
    fi
    if ! pid_alive /run/mysqld/mysqld.pid; then
        log "starting mariadbd"
        setsid -f /usr/sbin/mariadbd --user=mysql --pid-file=/run/mysqld/mysqld.pid \
            --log-error="$DB_LOG" </dev/null >/dev/null 2>&1
    fi
    wait_for "mariadbd" /run/mysqld/mysqld.pid mariadb-admin --no-defaults --protocol=socket \
        --socket=/run/mysqld/mysqld.sock ping
    mariadb --protocol=socket -u root <<EOF || die "cannot create the slurm database user"
CREATE DATABASE IF NOT EXISTS slurm_acct_db;
CREATE USER IF NOT EXISTS 'slurm'@'localhost';
ALTER USER 'slurm'@'localhost' IDENTIFIED BY '$(cat "$DB_PASS_FILE")';
GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';
EOF
}

start_slurmdbd() {
    if ! pid_alive /run/slurmdbd.pid; then
        log "starting slurmdbd"
        slurmdbd || die "slurmdbd did not start"
    fi
    wait_for "slurmdbd" /run/slurmdbd.pid sacctmgr -n list cluster
    if ! sacctmgr -n -P list cluster format=cluster | grep -qx "$CLUSTER"; then
        log "adding cluster $CLUSTER to the accounting database"
        sacctmgr -i add cluster "$CLUSTER" >/dev/null || die "sacctmgr add cluster failed"
    fi
}

start_slurm() {
    if ! pid_alive /run/slurmctld.pid; then
        log "starting slurmctld"
        slurmctld || die "slurmctld did not start"
    fi
    wait_for "slurmctld" /run/slurmctld.pid scontrol ping
    if ! pid_alive /run/slurmd.pid; then
        log "starting slurmd"
        slurmd || die "slurmd did not start"
    fi
}

node_state() { # node
    sinfo -h -n "$1" -p "$PARTITION" -o '%T' 2>/dev/null | head -n 1
}

wait_node_usable() { # node
    local node="$1" state t=0 resumed=0
    while :; do
        state="$(node_state "$node")"
        case "$state" in
            idle | mixed | allocated | completing) break ;;
        esac
        if ((resumed == 0 && t >= 10)) && [[ "$state" =~ drain|down|inval|fail ]]; then
            log "node $node is '$state'; resuming it"
            scontrol update nodename="$node" state=resume || true
            resumed=1
        fi
        ((t++ >= WAIT * 5)) && die "node $node is '${state:-unknown}' after ${WAIT}s, not idle"
        sleep 0.2
    done
    log "node $node is $state (partition $PARTITION, $NGPUS fake GPUs, accounting=$ACCOUNTING)"
}

cmd_start() {
    require_root
    install_packages
    local node
    node="$(node_name)"
    [[ -n "$node" ]] || die "slurmd -C gave no NodeName"
    ensure_hostname "$node"
    make_fake_gpus
    start_munge
    local changed
    changed="$(write_configs "$node")"
    if [[ -n "$changed" ]] && { pid_alive /run/slurmctld.pid || pid_alive /run/slurmd.pid ||
        pid_alive /run/slurmdbd.pid; }; then
        log "configuration changed; restarting the SLURM daemons"
        stop_slurm_daemons
        stop_pidfile slurmdbd /run/slurmdbd.pid
    fi
    if [[ "$ACCOUNTING" == 1 ]]; then
        start_mariadb
        start_slurmdbd
    else
        stop_pidfile slurmdbd /run/slurmdbd.pid
    fi
    start_slurm
    wait_node_usable "$node"
}

cancel_jobs() {
    command -v squeue >/dev/null && scontrol ping >/dev/null 2>&1 || return 0
    local ids t=0
    mapfile -t ids < <(squeue -h -o '%A' 2>/dev/null)
    ((${#ids[@]} == 0)) && return 0
    log "cancelling ${#ids[@]} job(s)"
    scancel "${ids[@]}" 2>/dev/null || true
    while [[ -n "$(squeue -h -o '%A' 2>/dev/null)" ]] && ((t++ < 75)); do sleep 0.2; done
}

stop_slurm_daemons() {
    stop_pidfile slurmd /run/slurmd.pid
    stop_pidfile slurmctld /run/slurmctld.pid
}

cmd_stop() {
    require_root
    cancel_jobs
    stop_slurm_daemons
    stop_pidfile slurmdbd /run/slurmdbd.pid
    stop_pidfile mariadbd /run/mysqld/mysqld.pid
    stop_pidfile munged /run/munge/munged.pid
    log "stopped"
}

cmd_status() {
    local name pidfile rc=0
    for name in munged:/run/munge/munged.pid mariadbd:/run/mysqld/mysqld.pid \
        slurmdbd:/run/slurmdbd.pid slurmctld:/run/slurmctld.pid slurmd:/run/slurmd.pid; do
        pidfile="${name#*:}"
        if pid_alive "$pidfile"; then
            printf '%-10s running (pid %s)\n' "${name%%:*}" "$(cat "$pidfile")"
        else
            printf '%-10s not running\n' "${name%%:*}"
        fi
    done
    if command -v sinfo >/dev/null && scontrol ping >/dev/null 2>&1; then
        sinfo -N -o '%N %P %T %c %m %G'
        squeue
        case "$(node_state "$(node_name)")" in
            idle | mixed | allocated | completing) ;;
            *) rc=1 ;;
        esac
    else
        echo "slurmctld not reachable"
        rc=1
    fi
    return "$rc"
}

cmd_purge() {
    require_root
    cmd_stop
    local p installed=()
    for p in "${PKGS_SLURM[@]}" "${PKGS_ACCT[@]}" slurm-wlm-basic-plugins; do
        dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null | grep -qx installed &&
            installed+=("$p")
    done
    if ((${#installed[@]})); then
        log "purging ${installed[*]}"
        DEBIAN_FRONTEND=noninteractive apt-get purge -y -q "${installed[@]}" >/dev/null
        DEBIAN_FRONTEND=noninteractive apt-get autoremove --purge -y -q >/dev/null
    fi
    rm -rf "$ETC" "$STATE" "$LOG" "$RUN" /var/spool/slurmctld /var/spool/slurmd \
        /etc/munge /var/lib/munge /var/log/munge /run/munge "$DB_CNF" /var/lib/mysql \
        /run/mysqld "$DB_LOG"
    log "purged"
}

case "${1:-}" in
    start) cmd_start ;;
    stop) cmd_stop ;;
    status) cmd_status ;;
    purge) cmd_purge ;;
    *)
        echo "usage: $0 start|stop|status|purge" >&2
        exit 2
        ;;
esac
