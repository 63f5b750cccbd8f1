#!/usr/bin/env bash
# A one-node Slurm cluster in a directory, for the tests (no systemd, nothing outside DIR):
#
#   scripts/slurm-cluster.sh start DIR   generates DIR/slurm.conf, starts slurmctld and
#                                        slurmd in the background and waits (bounded:
#                                        SPOOLS_SLURM_START_LIMIT s, default 60) until
#                                        `sinfo` shows the node idle
#   scripts/slurm-cluster.sh stop DIR    cancels the cluster's jobs, stops its daemons,
#                                        kills whatever of its jobs is left (every process
#                                        whose SLURM_CONF is DIR/slurm.conf): nothing runs
#   scripts/slurm-cluster.sh logs DIR    prints the end of the daemons' logs (to stderr)
#
# Clients then use it with `SLURM_CONF=DIR/slurm.conf` (srun, sbatch, sinfo, scancel).
# With SPOOLS_SLURM_OWNER=PID (a test's own process), start also leaves a watchdog that
# stops the cluster when that process ends, however it ends (killed, say).
#
# The node is this host (NodeName = its short host name, NodeAddr=127.0.0.1) declared with
# 8 CPUs whatever it has (SlurmdParameters=config_overrides), so that 4 to 8 tasks fit on
# 2 cores; select/cons_tres with CR_CPU; processes tracked by /proc
# (proctrack/linuxproc), task/none, no cgroups, no accounting; MpiDefault=pmix (pmi2
# when the build lacks pmix). Authentication is auth/none with cred/none (Debian's Slurm
# 22.05 ships auth_none.so and cred_none.so, and they work): no munged and no key. State, spool, logs, pid files and the two ports
# (picked free below the ephemeral range; a daemon that ends at once is started again
# with other ports, 3 times at most) are in DIR. A failure to start prints the daemons'
# logs and exits 1 after stopping what it started. Runs as root (slurmd starts job steps
# as their user).
set -euo pipefail
# /proc/PID/environ keeps the environment a process was started with, also in this
# script's subshells (forks): without SLURM_CONF in it, none of them looks like one of the
# cluster's processes to `stop`.
if [ -n "${SLURM_CONF+set}" ]; then
  exec env -u SLURM_CONF bash "$0" "$@"
fi

usage() { sed -n '2,11p' "$0"; exit 2; }
[ $# = 2 ] || usage
cmd="$1"
dir="$2"
# Debian puts the daemons in /usr/sbin, which a user's PATH may lack.
PATH="$PATH:/usr/sbin:/sbin"
# How long start waits for the node to be idle (seconds).
start_limit="${SPOOLS_SLURM_START_LIMIT:-60}"

# Prints the end of what the daemons wrote (in the foreground they write their log to
# stderr too, and what they say before their log is open) to stderr.
print_logs() {
  for f in "$dir"/log/*.out; do
    [ -s "$f" ] || continue
    echo "---- $f (last 40 lines)" >&2
    tail -n 40 "$f" >&2
  done
}

# Is the process of the pid file $1 still running (and one of ours: its command is $2)?
alive() {
  local pid
  [ -s "$1" ] || return 1
  pid="$(cat "$1")"
  [ -r "/proc/$pid/cmdline" ] && tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q "$2"
}

# Stops the daemon of pid file $1 (command $2): SIGTERM, then SIGKILL after 10 s.
stop_one() {
  local pidfile="$1" name="$2" pid i
  alive "$pidfile" "$name" || { rm -f "$pidfile"; return 0; }
  pid="$(cat "$pidfile")"
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < 100; i++)); do
    alive "$pidfile" "$name" || { rm -f "$pidfile"; return 0; }
    sleep 0.1
  done
  kill -KILL "$pid" 2>/dev/null || true
  for ((i = 0; i < 50; i++)); do
    alive "$pidfile" "$name" || { rm -f "$pidfile"; return 0; }
    sleep 0.1
  done
  echo "slurm-cluster.sh: $name (pid $pid) did not end" >&2
  return 1
}

# Every process of this cluster's jobs (slurmstepd, the tasks, an srun or sbatch left
# running): those whose environment names this cluster's slurm.conf; but this script
# (started without SLURM_CONF, see above, so that its subshells do not match either).
# Killed, and waited for (5 s at most) until they are gone (or zombies).
cluster_pids() {
  local p
  for p in $(grep -lsxzF "SLURM_CONF=$dir/slurm.conf" /proc/[0-9]*/environ | cut -d/ -f3); do
    [ "$p" = $$ ] || echo "$p"
  done
}
stop_jobs() {
  local i pids
  for ((i = 0; i < 50; i++)); do
    pids="$(cluster_pids)"
    [ -n "$pids" ] || return 0
    # shellcheck disable=SC2086 # one pid a word
    kill -KILL $pids 2>/dev/null || true
    sleep 0.1
  done
  echo "slurm-cluster.sh: still running after SIGKILL:" >&2
  # shellcheck disable=SC2086 # one pid a word
  ps -o pid,ppid,stat,cmd -p $pids >&2 || true
}

# With SPOOLS_SLURM_OWNER=PID: a process of its own (in DIR/run/watchdog.pid) that waits
# for PID to end, then stops the cluster.
watch_owner() {
  local owner="${SPOOLS_SLURM_OWNER:-}"
  [ -n "$owner" ] || return 0
  setsid bash -c 'tail --pid="$1" -f /dev/null; exec bash "$2" stop "$3"' \
    slurm-cluster-watchdog "$owner" "$0" "$dir" </dev/null >>"$dir/log/watchdog.out" 2>&1 &
  echo $! >"$dir/run/watchdog.pid"
}

stop() {
  local rc=0
  # (The commands this script starts must not match stop_jobs: start exported it.)
  unset SLURM_CONF
  # A watchdog stopping this cluster must not outlive it (unless it is the one stopping).
  # (It leads a process group of its own: the group goes, its `tail` included.)
  if alive "$dir/run/watchdog.pid" slurm-cluster-watchdog; then
    kill -KILL -- "-$(cat "$dir/run/watchdog.pid")" 2>/dev/null || true
  fi
  rm -f "$dir/run/watchdog.pid"
  # Cancel the jobs first (their steps end their tasks), while the daemons are there.
  if alive "$dir/run/slurmctld.pid" slurmctld; then
    SLURM_CONF="$dir/slurm.conf" timeout 10 scancel --full --quiet --user="$(id -un)" 2>/dev/null || true
  fi
  stop_one "$dir/run/slurmd.pid" slurmd || rc=1
  stop_one "$dir/run/slurmctld.pid" slurmctld || rc=1
  # Whatever is left, also when DIR is gone with its pid files (the daemons too: they run
  # with SLURM_CONF in their environment).
  stop_jobs
  return $rc
}

# A TCP port in 20000-32767 (below the ephemeral range) that nothing listens on.
free_port() {
  local p
  while :; do
    p=$((20000 + RANDOM % 12768))
    if ! ss -Htln "sport = :$p" 2>/dev/null | grep -q .; then
      echo "$p"
      return
    fi
  done
}

# The cluster's default --mpi: pmix when the build has it (as sites usually set), else
# pmi2, else none. An srun without --mpi then gives its tasks that PMI.
mpi_default() {
  local plugins
  plugins="$(dirname "$(command -v slurmd)")/../lib/$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)/slurm-wlm"
  if [ -e "$plugins/mpi_pmix.so" ]; then echo pmix
  elif [ -e "$plugins/mpi_pmi2.so" ]; then echo pmi2
  else echo none
  fi
}

write_conf() {
  local host user ctld_port slurmd_port
  host="$(hostname -s)"
  user="$(id -un)"
  ctld_port="$(free_port)"
  slurmd_port="$(free_port)"
  while [ "$slurmd_port" = "$ctld_port" ]; do slurmd_port="$(free_port)"; done
  cat >"$dir/slurm.conf" <<EOF
# Generated by scripts/slurm-cluster.sh: a one-node test cluster inside $dir.
ClusterName=spools-test
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=$user
SlurmdUser=root
AuthType=auth/none
CredType=cred/none
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/run/slurmctld.own.pid
SlurmdPidFile=$dir/run/slurmd.own.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=$(mpi_default)
SwitchType=switch/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
ReturnToService=2
MailProg=/bin/true
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
KillWait=5
# sbatch --wait polls every 2 s only while 2 >= MinJobAge/2 (then every 8 s)
MinJobAge=5
# Per cluster, so that two test clusters on one machine (two CI runs at once) never share
# a path named after a job and step: the steps' temporary directory (TmpFS, /tmp by
# default, where the PMIx plugin keeps one named by uid, job and step), and job ids drawn
# apart. Without them, one of two Slurm tests run at once failed 3 times in 3: its
# step's launch "aborted before step completely launched".
TmpFS=$dir/tmp
FirstJobId=$(( (RANDOM << 10 | RANDOM % 1024) % 60000000 + 1000 ))
NodeName=$host NodeAddr=127.0.0.1 CPUs=8 RealMemory=1000 State=UNKNOWN
PartitionName=test Nodes=$host Default=YES MaxTime=10 State=UP OverSubscribe=YES
EOF
}

# Starts the daemons once (ports picked anew) and waits until the node is idle: 0 when it
# is, 1 when a daemon ended meanwhile (a port taken between the pick and the bind, say),
# 2 when the node was not idle in time; the daemons are stopped unless it returns 0.
start_once() {
  local i state=""
  write_conf
  export SLURM_CONF="$dir/slurm.conf"
  # -D: in the foreground of a background job of our own (its pid is the daemon's), in a
  # session of its own, its output in DIR (not holding the caller's pipes).
  setsid slurmctld -D -i -f "$SLURM_CONF" </dev/null >"$dir/log/slurmctld.out" 2>&1 &
  echo $! >"$dir/run/slurmctld.pid"
  setsid slurmd -D -N "$(hostname -s)" -f "$SLURM_CONF" </dev/null >"$dir/log/slurmd.out" 2>&1 &
  echo $! >"$dir/run/slurmd.pid"
  for ((i = 0; i < start_limit * 10; i++)); do
    if ! alive "$dir/run/slurmctld.pid" slurmctld || ! alive "$dir/run/slurmd.pid" slurmd; then
      echo "slurm-cluster.sh: a Slurm daemon ended while starting (node state '${state:-unknown}')" >&2
      return 1
    fi
    # (sinfo retries an absent controller for 10 s: asked again soon instead)
    state="$(timeout 2 sinfo -h -N -o '%T' 2>/dev/null | head -n 1 || true)"
    if [ "$state" = idle ]; then
      echo "slurm-cluster.sh: node $(hostname -s) idle (SLURM_CONF=$SLURM_CONF)"
      return 0
    fi
    sleep 0.1
  done
  echo "slurm-cluster.sh: the node was not idle within ${start_limit} s (state '${state:-unknown}')" >&2
  return 2
}

start() {
  local attempt rc
  for tool in slurmctld slurmd sinfo scancel; do
    command -v "$tool" >/dev/null || {
      echo "slurm-cluster.sh: $tool is missing (scripts/install-slurm.sh installs Debian's Slurm)" >&2
      exit 1
    }
  done
  if [ "$(id -u)" != 0 ]; then
    echo "slurm-cluster.sh: slurmd must run as root (it starts job steps as their user); this is uid $(id -u)" >&2
    exit 1
  fi
  mkdir -p "$dir"/{state,spool,run,log,tmp}
  dir="$(cd "$dir" && pwd)"
  stop || true
  # A daemon that ended at once is tried again with other ports (at most 3 times).
  for attempt in 1 2 3; do
    rc=0
    start_once || rc=$?
    if [ "$rc" = 0 ]; then
      watch_owner
      return 0
    fi
    print_logs
    stop || true
    [ "$rc" = 1 ] || break
    [ "$attempt" = 3 ] || echo "slurm-cluster.sh: trying again with other ports" >&2
    rm -f "$dir"/log/*
  done
  exit 1
}

[ -d "$dir" ] && dir="$(cd "$dir" && pwd)"
case "$cmd" in
  start) start ;;
  stop) stop ;;
  logs) print_logs ;;
  *) usage ;;
esac
