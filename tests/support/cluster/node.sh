#!/usr/bin/env bash
# PID lists are split on purpose, as in `stop 10 $(pids_of kubelet)`.
# shellcheck disable=SC2046
# The host side of the one-node cluster (tests/support/cluster/): what it
# changes outside its work dir, made and undone here, in one place.
#
#   node.sh watch W NETNS   the watchdog: take the machine-wide lock, `up`,
#                           print "ready", wait for end of file on stdin
#                           (the test process closed it, or ended however it
#                           ended), then `down`; exit when all is undone
#   node.sh down W NETNS    the teardown alone, by hand, if even the
#                           watchdog was killed (it reads W/host/)
#
# `up` mounts a tmpfs on W (4 GiB at most; a run uses about 200 MB), then
# records, under W/host/, what it finds before the cluster changes it:
# the six sysctls kubelet writes, which of the global paths that kubelet,
# containerd and libcni write exist, the `cni-*` network namespaces and the
# pod cgroups (kubepods, k8s.io) that exist; then it makes the node's
# network namespace NETNS with a veth pair as its uplink (both ends inside:
# the host's own network is never touched; the kernel here has no `dummy`
# links). The test process starts every cluster process inside NETNS and
# writes each PID to W/pids/<name>.
#
# `down` undoes it all, in an order that leaves nothing behind: kubelet
# first (it would restart containers), the pods through containerd while it
# still runs (that unmounts their rootfs and deletes their netns), then the
# other processes by PID (only if their command line names W: a PID may
# have been reused), containerd's shims and anything left in the new pod
# cgroups, then mounts under W and in the new `cni-*` netns, the netns
# (the node's holds the bridge, the veths and every iptables chain of
# kubelet, kube-proxy and portmap), the new cgroups, the sysctls, and the
# global paths that did not exist before. Last it checks and prints what is
# left ("left: nothing" when all is gone) and unmounts and removes W.
#
# One cluster at a time on the machine: two nodes would share
# /run/containerd, /var/lib/cni, /var/log/containers and the pod cgroups.
# The lock is ${VALKYRIE_NODE_LOCK:-/run/lock/valkyrie-node.lock}, held by
# the watchdog until its teardown is over, so that the next cluster never
# starts on a half-removed one.
set -uo pipefail

cmd=${1:?usage: node.sh watch|down W NETNS}
W=${2:?work dir}
NETNS=${3:?netns name}
H=$W/host
SYSCTLS="vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops kernel.keys.root_maxkeys kernel.keys.root_maxbytes"
GLOBAL_PATHS="/run/containerd /var/lib/cni /var/lib/kubelet /var/log/containers /var/log/pods /usr/libexec/kubernetes"
CGROUP_TOPS="kubepods k8s.io"
LOCK=${VALKYRIE_NODE_LOCK:-/run/lock/valkyrie-node.lock}

cni_netns() {
    local f
    for f in /run/netns/cni-*; do [ -e "$f" ] && echo "${f#/run/netns/}"; done
}
say() { printf '%s node.sh: %s\n' "$(date +%T.%3N)" "$*"; }

up() {
    # The work dir in memory: containerd's content store and snapshots,
    # etcd and kubelet write there, and a shared disk made the import and
    # the final removal take from 0.5 s to 10 s.
    mount -t tmpfs -o size=4g,mode=0755 valkyrie-node "$W" || return 1
    mkdir -p "$H" "$W/pids" || return 1
    local k p c t
    for k in $SYSCTLS; do echo "$k=$(sysctl -n "$k")"; done >"$H/sysctl.before" || return 1
    for p in $GLOBAL_PATHS; do [ -e "$p" ] || echo "$p"; done >"$H/paths.new"
    cni_netns >"$H/netns.before"
    for c in /sys/fs/cgroup/*/; do
        for t in $CGROUP_TOPS; do [ -d "$c$t" ] && echo "$c$t"; done
    done >"$H/cgroups.before"
    ip netns add "$NETNS" || return 1
    # From here on, `down` removes the netns: mark it as ours.
    echo "$NETNS" >"$H/netns.ours"
    ip -n "$NETNS" link set lo up &&
        ip -n "$NETNS" link add uplink0 type veth peer name uplink1 &&
        ip -n "$NETNS" addr add 10.89.0.2/24 dev uplink0 &&
        ip -n "$NETNS" addr add 10.89.0.1/24 dev uplink1 &&
        ip -n "$NETNS" link set uplink1 up &&
        ip -n "$NETNS" link set uplink0 up &&
        ip -n "$NETNS" route add default via 10.89.0.1 dev uplink0
}

# ours PID: the process PID runs with W on its command line.
ours() { tr '\0' ' ' 2>/dev/null <"/proc/$1/cmdline" | grep -qF "$W/"; }
# pids_of NAME...: the live PIDs of W/pids/NAME that are still ours.
pids_of() {
    local n p
    for n in "$@"; do
        p=$(cat "$W/pids/$n" 2>/dev/null) || continue
        ours "$p" && echo "$p"
    done
}
# alive PID: running, not a zombie (the test process reaps its children
# only after the teardown).
alive() { [ -r "/proc/$1/status" ] && ! grep -q '^State:[[:space:]]*Z' "/proc/$1/status" 2>/dev/null; }
# stop SECONDS PID...: SIGTERM, then SIGKILL to those alive after SECONDS.
stop() {
    local limit=$(($1 * 10)) i p alive
    shift
    [ $# -gt 0 ] || return 0
    kill -TERM "$@" 2>/dev/null
    for ((i = 0; i < limit; i++)); do
        alive=()
        for p in "$@"; do alive "$p" && alive+=("$p"); done
        [ ${#alive[@]} -gt 0 ] || return 0
        sleep 0.1
    done
    say "SIGKILL to ${alive[*]} ($(for p in "${alive[@]}"; do tr '\0' ' ' <"/proc/$p/cmdline" | cut -c1-60; done | tr '\n' ';'))"
    kill -KILL "${alive[@]}" 2>/dev/null
    sleep 0.2
}
# The PIDs of every process whose command line names W (shims among them:
# they carry `-address W/run/containerd.sock`).
strays() {
    local d
    for d in /proc/[0-9]*; do
        [ "${d#/proc/}" = "$$" ] && continue
        ours "${d#/proc/}" && echo "${d#/proc/}"
    done
}
# The cgroups of pods that `up` did not find, deepest first.
new_cgroups() {
    local c t
    for c in /sys/fs/cgroup/*/; do
        for t in $CGROUP_TOPS; do
            [ -d "$c$t" ] || continue
            grep -qxF "$c$t" "$H/cgroups.before" 2>/dev/null && continue
            find "$c$t" -depth -type d
        done
    done
}
new_cni_netns() {
    local n
    for n in $(cni_netns); do
        grep -qxF "$n" "$H/netns.before" 2>/dev/null || echo "$n"
    done
}
# Mount points under W or in a new cni netns, deepest first.
our_mounts() {
    local cni
    cni=$(new_cni_netns | sed 's#^#/run/netns/#' | paste -sd'|')
    awk -v w="$W/" -v cni="^(${cni:-/nonexistent})$" \
        '{ p = $5; gsub(/\\040/, " ", p); if (index(p, w) == 1 || p ~ cni) print p }' \
        /proc/self/mountinfo | sort -r
}

down() {
    if [ ! -d "$H" ]; then
        say "no $H: nothing was set up"
        umount "$W" 2>/dev/null
        rm -rf "$W"
        return 0
    fi
    local crictl ns p n k v left=()
    ns=$(cat "$H/netns.ours" 2>/dev/null)
    say "tearing down $W (netns ${ns:-none})"
    stop 10 $(pids_of kubelet)
    say "kubelet stopped"
    crictl=$W/bin/crictl
    if [ -x "$crictl" ] && [ -S "$W/run/containerd.sock" ] && [ -n "$(pids_of containerd)" ]; then
        # Stopping a sandbox kills its containers and runs CNI DEL (the pod
        # netns goes); removing it unmounts its rootfs and shm.
        for p in $(nsenter --net="/run/netns/$ns" "$crictl" --config "$W/crictl.yaml" pods -q 2>/dev/null); do
            nsenter --net="/run/netns/$ns" timeout 20 "$crictl" --config "$W/crictl.yaml" stopp "$p" >/dev/null
            nsenter --net="/run/netns/$ns" timeout 20 "$crictl" --config "$W/crictl.yaml" rmp -f "$p" >/dev/null
            n=$((${n:-0} + 1))
        done
    fi
    say "${n:-0} pods removed"
    stop 15 $(pids_of kube-proxy coredns kube-scheduler kube-controller-manager containerd)
    # kube-apiserver can take over 15 s to end on SIGTERM; its state goes.
    stop 3 $(pids_of kube-apiserver)
    stop 10 $(pids_of etcd)
    say "cluster processes stopped"
    # Whatever still runs: shims, containers, a process started after its
    # PID file was read.
    stop 5 $(strays) $(for c in $(new_cgroups); do cat "$c/cgroup.procs" 2>/dev/null; done | sort -u)
    say "strays stopped"
    for p in $(our_mounts); do umount "$p" 2>/dev/null || umount -l "$p" || say "cannot unmount $p"; done
    for n in $(new_cni_netns); do ip netns del "$n" || rm -f "/run/netns/$n"; done
    [ -z "$ns" ] || ip netns del "$ns" || say "cannot delete netns $ns"
    for p in $(new_cgroups); do rmdir "$p" 2>/dev/null || say "cannot remove cgroup $p"; done
    while IFS='=' read -r k v; do
        [ "$(sysctl -n "$k")" = "$v" ] || sysctl -qw "$k=$v" || say "cannot restore $k=$v"
    done <"$H/sysctl.before"
    while read -r p; do rm -rf "$p"; done <"$H/paths.new"
    say "unmounted, netns, cgroups, sysctls and paths undone"

    # What is left?
    p=$(strays | tr '\n' ' ')
    [ -z "$p" ] || left+=("processes $p")
    p=$(our_mounts | tr '\n' ' ')
    [ -z "$p" ] || left+=("mounts $p")
    p=$(new_cni_netns | tr '\n' ' ')
    [ -z "$p" ] || left+=("netns $p")
    [ -z "$ns" ] || [ ! -e "/run/netns/$ns" ] || left+=("netns $ns")
    p=$(new_cgroups | tr '\n' ' ')
    [ -z "$p" ] || left+=("cgroups $p")
    while IFS='=' read -r k v; do
        [ "$(sysctl -n "$k")" = "$v" ] || left+=("sysctl $k=$(sysctl -n "$k") (was $v)")
    done <"$H/sysctl.before"
    while read -r p; do [ ! -e "$p" ] || left+=("path $p"); done <"$H/paths.new"
    say "checked; removing the work dir ($(du -sh "$W" 2>/dev/null | cut -f1))"
    umount "$W" 2>/dev/null
    rm -rf "$W" && ! grep -qF " $W " /proc/self/mountinfo || left+=("work dir $W")
    if [ ${#left[@]} -eq 0 ]; then
        say "left: nothing"
    else
        say "left: $(printf '%s; ' "${left[@]}")"
        return 1
    fi
}

case $cmd in
watch)
    # A ^C or a hang-up is for the test, not for its teardown; and the
    # test's end of the pipe may be gone when the report is written.
    trap '' INT HUP PIPE
    mkdir -p "$(dirname "$LOCK")"
    exec 9>"$LOCK"
    if ! flock -n 9; then
        echo "waiting: another one-node cluster holds $LOCK"
        flock -w "${VALKYRIE_NODE_LOCK_WAIT:-900}" 9 || { echo "error: $LOCK still held"; exit 1; }
    fi
    mkdir -p "$W"
    if up >"$W/up.log" 2>&1; then
        echo ready
    else
        echo "error: setting up the node failed: $(tr '\n' ' ' <"$W/up.log")"
    fi
    cat >/dev/null
    # The teardown's log goes to the test (if it still listens) at the end.
    out=$(down 2>&1)
    rc=$?
    printf '%s\n' "$out" 2>/dev/null
    exit $rc
    ;;
down) down ;;
*)
    echo "usage: node.sh watch|down W NETNS" >&2
    exit 2
    ;;
esac
