#!/usr/bin/env bash
# CPU and memory of one monitor watching many healthy groups: Valkyrie
# against one real valkey-sentinel, in the same run, on the same servers.
#
#   benches/many_groups.sh [GROUPS] [SECONDS]      (defaults: 1100 30)
#
# One valkey-server master and one replica (no persistence) on free
# loopback ports; GROUPS `sentinel monitor gN …` lines all name that master
# (Sentinel's defaults otherwise: down-after 30 s). Each monitor runs alone
# for a warm-up of 10 s, then SECONDS of measurement: CPU is the monitor's
# user+system time over the window (from /proc/PID/stat), RSS its
# resident set at the end. Prints one markdown row per monitor.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
groups=${1:-1100}
secs=${2:-30}

# shellcheck source=scripts/deps.sh
source scripts/deps.sh
valkyrie_deps >/dev/null 2>&1
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/valkyrie/target}"
cargo build --release --bin valkyrie -q
valkyrie="$CARGO_TARGET_DIR/release/valkyrie"

dir=$(mktemp -d /tmp/valkyrie-many-groups.XXXXXX)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$dir"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
pm=$(free_port)
pr=$(free_port)
"$VALKEY_SERVER" --port "$pm" --bind 127.0.0.1 --save "" --appendonly no --dir "$dir" --maxclients 20000 >/dev/null 2>&1 &
pids+=($!)
"$VALKEY_SERVER" --port "$pr" --bind 127.0.0.1 --save "" --appendonly no --dir "$dir" --maxclients 20000 --replicaof 127.0.0.1 "$pm" >/dev/null 2>&1 &
pids+=($!)
for _ in $(seq 100); do "$VALKEY_CLI" -p "$pr" INFO replication 2>/dev/null | grep -q 'master_link_status:up' && break; sleep 0.1; done

ticks=$(getconf CLK_TCK)
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
rss_kib() { awk '/VmRSS/ {print $2}' "/proc/$1/status"; }

measure() { # name binary conf
    local name=$1 bin=$2 conf=$3 pid t0 c0 t1 c1
    ulimit -n "$(ulimit -Hn)"
    "$bin" "$conf" >"$dir/$name.log" 2>&1 &
    pid=$!
    pids+=("$pid")
    sleep 10
    t0=$(date +%s%N); c0=$(cpu_ticks "$pid")
    sleep "$secs"
    t1=$(date +%s%N); c1=$(cpu_ticks "$pid")
    local cpu rss
    cpu=$(awk -v c="$((c1 - c0))" -v hz="$ticks" -v ns="$((t1 - t0))" 'BEGIN { printf "%.1f", 100 * c / hz / (ns / 1e9) }')
    rss=$(rss_kib "$pid")
    printf '| %s | %s | %s%% | %.1f MiB |\n' "$name" "$groups" "$cpu" "$(awk -v k="$rss" 'BEGIN { print k / 1024 }')"
    kill "$pid"
    wait "$pid" 2>/dev/null || true
}

conf() { # port extra
    local f="$dir/monitor-$1.conf"
    { printf 'port %s\nbind 127.0.0.1\ndir %s\n%s' "$1" "$dir" "$2"
      for i in $(seq "$groups"); do printf 'sentinel monitor g%s 127.0.0.1 %s 1\n' "$i" "$pm"; done
    } >"$f"
    echo "$f"
}

echo "| monitor | groups | CPU (user+sys, % of one core) | RSS |"
echo "|---|---:|---:|---:|"
measure Valkyrie "$valkyrie" "$(conf "$(free_port)" $'index-port 0\nadmin-port 0\n')"
measure valkey-sentinel "$VALKEY_SENTINEL" "$(conf "$(free_port)" '')"
