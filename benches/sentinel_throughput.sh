#!/usr/bin/env bash
# Sentinel-port throughput, side by side in one run: Valkyrie against one
# real valkey-sentinel monitoring the same master and replicas.
#
#   valkey-benchmark -c 50 -n N [-P 1|16] SENTINEL get-master-addr-by-name mymaster
#   valkey-benchmark -c 50 -n N [-P 1|16] PING
#
# Prints requests/s and p50/p99 for each, and the RSS of both daemons idle
# and after the load. Needs valkey-server, valkey-sentinel, valkey-benchmark
# (scripts/deps.sh installs them) and a release build of valkyrie.
# Usage: benches/sentinel_throughput.sh [requests]   (default 200000)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
N="${1:-200000}"
BIN="${CARGO_TARGET_DIR:-target}/release/valkyrie"
[ -x "$BIN" ] || cargo build --release --quiet
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
"$SENTINEL" "$DIR/sentinel.conf" & SPID=$!; PIDS+=($SPID)
"$BIN" "$DIR/valkyrie.conf" --index-port 0 --admin-port 0 2>"$DIR/valkyrie.log" & VPID=$!; PIDS+=($VPID)
wait_port "$PS"; wait_port "$PV"
sleep 3   # both discover the replicas
rss() { awk '/VmRSS/ {printf "%.1f MiB", $2/1024}' "/proc/$1/status"; }
echo "RSS idle: valkyrie $(rss $VPID), valkey-sentinel $(rss $SPID)"
echo
echo "| command | pipeline | system | requests/s | p50 ms | p99 ms |"
echo "|---|---:|---|---:|---:|---:|"
run() { # name port pipeline args...
  local name=$1 p=$2 pl=$3; shift 3
  "$BENCH" -h 127.0.0.1 -p "$p" -c 50 -n "$N" -P "$pl" --csv "$@" 2>/dev/null | tail -1 |
    awk -F',' -v n="$name" -v pl="$pl" -v what="$*" '{for (i = 1; i <= NF; i++) gsub(/"/, "", $i); printf "| %s | %s | %s | %.0f | %s | %s |\n", what, pl, n, $2, $5, $7}'
}
for pl in 1 16; do
  for cmd in "SENTINEL get-master-addr-by-name mymaster" "PING"; do
    # shellcheck disable=SC2086
    run valkyrie "$PV" "$pl" $cmd
    # shellcheck disable=SC2086
    run valkey-sentinel "$PS" "$pl" $cmd
  done
done
echo
echo "RSS after: valkyrie $(rss $VPID), valkey-sentinel $(rss $SPID)"
