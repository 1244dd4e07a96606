#!/usr/bin/env bash
# Sentinel-port throughput, side by side in one run: Valkyrie against one
# real valkey-sentinel monitoring the same master and replicas.
#
#   valkey-benchmark -c 50 -n N [-P 1|16] SENTINEL get-master-addr-by-name mymaster
#   valkey-benchmark -c 50 -n N [-P 1|16] PING
#
# Prints requests/s and p50/p99 for each (the median of REPEATS runs,
# Valkyrie and Sentinel alternating), and the RSS of both daemons idle and
# after the load. Needs valkey-server, valkey-sentinel, valkey-benchmark
# (scripts/deps.sh installs them) and a release build of valkyrie.
#
# With two CPUs or more, each daemon is pinned to CPU 0 and the load
# generator to CPU 1, so that the generator never competes with the daemon
# under test and both daemons get the same single core (Valkyrie's runtime
# then starts one worker thread, Sentinel is single-threaded anyway).
# Usage: benches/sentinel_throughput.sh [requests] [repeats]   (200000, 3)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
N="${1:-200000}"
REPEATS="${2:-3}"
if [ "$(nproc)" -ge 2 ] && command -v taskset >/dev/null; then
  DAEMON_CPU=(taskset -c 0); LOAD_CPU=(taskset -c 1)
  echo "pinning: daemons on CPU 0, valkey-benchmark on CPU 1"
else
  DAEMON_CPU=(); LOAD_CPU=()
  echo "not pinning (fewer than 2 CPUs or no taskset): the load generator shares the CPU"
fi
BIN="${CARGO_TARGET_DIR:-target}/release/valkyrie"
# Always: a stale binary would measure old code.
cargo build --release --quiet --bin valkyrie
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

PM=$(port); P1=$(port); P2=$(port); PS=$(port); PV=$(port)
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
"${DAEMON_CPU[@]}" "$SENTINEL" "$DIR/sentinel.conf" & SPID=$!; PIDS+=($SPID)
"${DAEMON_CPU[@]}" "$BIN" "$DIR/valkyrie.conf" --index-port 0 --admin-port 0 2>"$DIR/valkyrie.log" & VPID=$!; PIDS+=($VPID)
wait_port "$PS"; wait_port "$PV"
sleep 3   # both discover the replicas
rss() { awk '/VmRSS/ {printf "%.1f MiB", $2/1024}' "/proc/$1/status"; }
echo "RSS idle: valkyrie $(rss $VPID), valkey-sentinel $(rss $SPID)"
echo
RESULTS="$DIR/results.csv"
# CPU time (user + system, clock ticks) the daemon has used so far.
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
TICK=$(getconf CLK_TCK)
run() { # name pid port pipeline args...
  local name=$1 pid=$2 p=$3 pl=$4; shift 4
  local before after
  before=$(cpu_ticks "$pid")
  "${LOAD_CPU[@]}" "$BENCH" -h 127.0.0.1 -p "$p" -c 50 -n "$N" -P "$pl" --csv "$@" 2>/dev/null | tail -1 |
    awk -F',' -v n="$name" -v pl="$pl" -v what="$*" '{for (i = 1; i <= NF; i++) gsub(/"/, "", $i); printf "%s,%s,%s,%s,%s,%s,", what, pl, n, $2, $5, $7}' >>"$RESULTS"
  after=$(cpu_ticks "$pid")
  # Daemon CPU microseconds per request.
  awk -v t=$((after - before)) -v hz="$TICK" -v n="$N" 'BEGIN {printf "%.3f\n", t / hz * 1e6 / n}' >>"$RESULTS"
}
for pl in 1 16; do
  for cmd in "SENTINEL get-master-addr-by-name mymaster" "PING"; do
    for _ in $(seq 1 "$REPEATS"); do
      # shellcheck disable=SC2086
      run valkyrie "$VPID" "$PV" "$pl" $cmd
      # shellcheck disable=SC2086
      run valkey-sentinel "$SPID" "$PS" "$pl" $cmd
    done
  done
done
python3 - "$RESULTS" <<'PY'
import csv, statistics, sys
rows = {}
for what, pl, name, rps, p50, p99, cpu in csv.reader(open(sys.argv[1])):
    rows.setdefault((what, int(pl)), {}).setdefault(name, []).append(
        (float(rps), float(p50), float(p99), float(cpu)))
print("| command | pipeline | system | requests/s (median) | all runs | p50 ms | p99 ms | daemon CPU µs/request | rps ÷ Sentinel | Sentinel CPU/request ÷ ours |")
print("|---|---:|---|---:|---|---:|---:|---:|---:|---:|")
for (what, pl), systems in rows.items():
    med = {n: tuple(statistics.median(x[i] for x in runs) for i in range(4)) for n, runs in systems.items()}
    base = med.get("valkey-sentinel", (0, 0, 0, 0))
    for n, runs in systems.items():
        rps, p50, p99, cpu = med[n]
        mine = n == "valkyrie" and base[0]
        ratio = f"{rps / base[0]:.2f}x" if mine else ""
        eff = f"{base[3] / cpu:.2f}" if mine and cpu else ""
        print(f"| {what} | {pl} | {n} | {rps:,.0f} | {' / '.join(f'{r[0]:,.0f}' for r in runs)} | {p50:.3f} | {p99:.3f} | {cpu:.2f} | {ratio} | {eff} |")
PY
echo
echo "RSS after: valkyrie $(rss $VPID), valkey-sentinel $(rss $SPID)"
