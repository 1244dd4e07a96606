#!/usr/bin/env bash
# Sentinel-port throughput and CPU per request, side by side in one run:
# Valkyrie against one real valkey-sentinel monitoring the same master and
# replicas.
#
#   valkey-benchmark -c 50 -n N [-P 1|16] SENTINEL get-master-addr-by-name mymaster
#   valkey-benchmark -c 50 -n N [-P 1|16] PING
#
# Part 1 (same core): both daemons pinned to CPU 0, the load generator to
# CPU 1, so that the generator never competes with the daemon under test
# and both daemons get the same single core (Valkyrie's runtime then starts
# one worker thread; Sentinel is single-threaded anyway). For each cell:
# requests/s and p50/p99 from valkey-benchmark, and the daemon's CPU time
# (user + system, from /proc/PID/stat, every thread counted, exited ones
# included) over the fixed request count, divided by it. The median of
# REPEATS runs, Valkyrie and Sentinel alternating.
#
# Part 2 (SCALING=1): Valkyrie with VALKYRIE_WORKER_THREADS=1 and =2, not
# pinned (the runtime and the load generator share all CPUs), next to the
# same unpinned Sentinel: requests/s with one and with two workers.
#
# ADMIN=1 also opens Valkyrie's admin port (as a default deployment does),
# so that the Prometheus recorder is installed and every per-request
# metric is really recorded; by default it is off (port 0).
#
# Needs valkey-server, valkey-sentinel, valkey-benchmark (scripts/deps.sh
# installs them), taskset and two CPUs (it stops otherwise), and builds
# valkyrie in release mode (VALKYRIE_BIN=<path> measures that binary
# instead).
# Usage: benches/sentinel_throughput.sh [requests] [repeats]   (500000, 5)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
N="${1:-500000}"
REPEATS="${2:-5}"
SCALING="${SCALING:-0}"
ADMIN="${ADMIN:-0}"
if [ "$(nproc)" -lt 2 ] || ! command -v taskset >/dev/null; then
  echo "needs two CPUs and taskset: the daemons and the load generator are pinned apart" >&2
  exit 1
fi
DAEMON_CPU=(taskset -c 0)
echo "pinning: daemons on CPU 0, valkey-benchmark on CPU 1; $N requests per run, $REPEATS runs per cell"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
if [ -n "${VALKYRIE_BIN:-}" ]; then
  # A given build (e.g. an earlier commit's, for a before/after).
  BIN="$VALKYRIE_BIN"
else
  BIN="${CARGO_TARGET_DIR:-target}/release/valkyrie"
  # Always: a stale binary would measure old code.
  cargo build --release --quiet --bin valkyrie
fi
echo "valkyrie binary: $BIN"
SERVER="${VALKEY_SERVER:-$(command -v valkey-server)}"
SENTINEL="${VALKEY_SENTINEL:-$(command -v valkey-sentinel)}"
BENCH="${VALKEY_BENCHMARK:-$(command -v valkey-benchmark)}"
CLI="${VALKEY_CLI:-$(command -v valkey-cli)}"
DIR="$(mktemp -d)"
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$DIR"; }
trap cleanup EXIT
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() { for _ in $(seq 1 200); do "$CLI" -p "$1" PING >/dev/null 2>&1 && return 0; sleep 0.05; done; echo "port $1 not up" >&2; return 1; }
# Waits until the daemon on port $1 reports the master's two replicas.
wait_replicas() {
  for _ in $(seq 1 200); do
    [ "$("$CLI" -p "$1" SENTINEL replicas mymaster 2>/dev/null | grep -c '^ip$')" -ge 2 ] && return 0
    sleep 0.05
  done
  echo "port $1: replicas not discovered" >&2; return 1
}

PM=$(port); P1=$(port); P2=$(port); PS=$(port); PV=$(port); PA=0
[ "$ADMIN" = 1 ] && PA=$(port)
"$SERVER" --port "$PM" --bind 127.0.0.1 --save '' --dir "$DIR" --logfile "$DIR/m.log" & PIDS+=($!)
wait_port "$PM"
for p in "$P1" "$P2"; do
  "$SERVER" --port "$p" --bind 127.0.0.1 --save '' --dir "$DIR" --logfile "$DIR/r$p.log" --replicaof 127.0.0.1 "$PM" & PIDS+=($!)
  wait_port "$p"
done
cat > "$DIR/sentinel.conf" <<CONF
port $PS
bind 127.0.0.1
dir $DIR
sentinel monitor mymaster 127.0.0.1 $PM 1
sentinel down-after-milliseconds mymaster 1000
CONF
cp "$DIR/sentinel.conf" "$DIR/valkyrie.conf"
sed -i "s/^port $PS/port $PV/" "$DIR/valkyrie.conf"
echo "logfile $DIR/sentinel.log" >> "$DIR/sentinel.conf"
# start_valkyrie <cpu list> [worker threads]: (re)starts Valkyrie, sets VPID.
VPID=
start_valkyrie() {
  if [ -n "$VPID" ]; then kill "$VPID"; wait "$VPID" 2>/dev/null || true; fi
  env ${2:+VALKYRIE_WORKER_THREADS=$2} taskset -c "$1" "$BIN" "$DIR/valkyrie.conf" --index-port 0 --admin-port "$PA" \
    2>>"$DIR/valkyrie.log" & VPID=$!; PIDS+=("$VPID")
  wait_port "$PV"; wait_replicas "$PV"
}
"${DAEMON_CPU[@]}" "$SENTINEL" "$DIR/sentinel.conf" & SPID=$!; PIDS+=("$SPID")
start_valkyrie 0
wait_port "$PS"; wait_replicas "$PS"
rss() { awk '/VmRSS/ {printf "%.1f MiB", $2/1024}' "/proc/$1/status"; }
threads() { find "/proc/$1/task" -mindepth 1 -maxdepth 1 | wc -l; }
echo "RSS idle: valkyrie $(rss "$VPID"), valkey-sentinel $(rss $SPID); valkyrie threads: $(threads "$VPID")"
echo
# CPU time (user + system, clock ticks) the daemon has used so far.
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
TICK=$(getconf CLK_TCK)
# run <csv> <name> <pid> <port> <pipeline> <load cpu list> args...
run() {
  local out=$1 name=$2 pid=$3 p=$4 pl=$5 cpus=$6; shift 6
  local before after
  before=$(cpu_ticks "$pid")
  taskset -c "$cpus" "$BENCH" -h 127.0.0.1 -p "$p" -c 50 -n "$N" -P "$pl" --csv "$@" 2>/dev/null | tail -1 |
    awk -F',' -v n="$name" -v pl="$pl" -v what="$*" '{for (i = 1; i <= NF; i++) gsub(/"/, "", $i); printf "%s,%s,%s,%s,%s,%s,", what, pl, n, $2, $5, $7}' >>"$out"
  after=$(cpu_ticks "$pid")
  # Daemon CPU microseconds per request.
  awk -v t=$((after - before)) -v hz="$TICK" -v n="$N" 'BEGIN {printf "%.3f\n", t / hz * 1e6 / n}' >>"$out"
}
# table <csv> <baseline name>: the medians, each system against the baseline.
table() {
  python3 - "$1" "$2" <<'PY'
import csv, statistics, sys
rows = {}
for what, pl, name, rps, p50, p99, cpu in csv.reader(open(sys.argv[1])):
    rows.setdefault((what, int(pl)), {}).setdefault(name, []).append(
        (float(rps), float(p50), float(p99), float(cpu)))
base_name = sys.argv[2]
print("| command | pipeline | system | requests/s (median) | all runs | p50 ms | p99 ms | daemon CPU µs/request (median) | all runs | rps ÷ Sentinel | CPU/request ÷ Sentinel's |")
print("|---|---:|---|---:|---|---:|---:|---:|---|---:|---:|")
for (what, pl), systems in rows.items():
    med = {n: tuple(statistics.median(x[i] for x in runs) for i in range(4)) for n, runs in systems.items()}
    base = med.get(base_name, (0, 0, 0, 0))
    for n, runs in systems.items():
        rps, p50, p99, cpu = med[n]
        mine = n != base_name and base[0]
        ratio = f"{rps / base[0]:.2f}×" if mine else ""
        eff = f"{cpu / base[3]:.2f}" if mine and base[3] else ""
        print(f"| {what} | {pl} | {n} | {rps:,.0f} | {' / '.join(f'{r[0]:,.0f}' for r in runs)} | {p50:.3f} | {p99:.3f} "
              f"| {cpu:.2f} | {' / '.join(f'{r[3]:.2f}' for r in runs)} | {ratio} | {eff} |")
PY
}

SAME="$DIR/same_core.csv"
for pl in 1 16; do
  for cmd in "SENTINEL get-master-addr-by-name mymaster" "PING"; do
    for _ in $(seq 1 "$REPEATS"); do
      # shellcheck disable=SC2086
      run "$SAME" valkyrie "$VPID" "$PV" "$pl" 1 $cmd
      # shellcheck disable=SC2086
      run "$SAME" valkey-sentinel "$SPID" "$PS" "$pl" 1 $cmd
    done
  done
done
echo "## Same core (daemons on CPU 0, valkey-benchmark on CPU 1)"
table "$SAME" valkey-sentinel
echo
echo "RSS after: valkyrie $(rss "$VPID"), valkey-sentinel $(rss $SPID)"
echo "load average after part 1: $(cut -d' ' -f1-3 /proc/loadavg)"

if [ "$SCALING" = 1 ]; then
  # Every process may run on both CPUs: the worker threads and the load
  # generator share them, as on a host where clients run beside it.
  taskset -p -c 0,1 "$SPID" >/dev/null
  SCALE="$DIR/scaling.csv"
  for workers in 1 2; do
    start_valkyrie 0,1 "$workers"
    echo "valkyrie with VALKYRIE_WORKER_THREADS=$workers: $(threads "$VPID") threads"
    for pl in 1 16; do
      for _ in $(seq 1 "$REPEATS"); do
        run "$SCALE" "valkyrie $workers worker(s)" "$VPID" "$PV" "$pl" 0,1 SENTINEL get-master-addr-by-name mymaster
        [ "$workers" = 1 ] && run "$SCALE" valkey-sentinel "$SPID" "$PS" "$pl" 0,1 SENTINEL get-master-addr-by-name mymaster
      done
    done
  done
  echo
  echo "## Not pinned (daemon and valkey-benchmark share CPUs 0 and 1)"
  table "$SCALE" valkey-sentinel
  echo "load average after part 2: $(cut -d' ' -f1-3 /proc/loadavg)"
fi
