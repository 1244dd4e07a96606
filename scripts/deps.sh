# shellcheck shell=bash
#
# Test dependencies of Valkyrie. Source this file, then call `valkyrie_deps`.
#
# valkyrie_deps installs, only when missing:
#   * valkey-server, valkey-sentinel, valkey-cli, valkey-benchmark
#     (Debian packages valkey-server, valkey-sentinel and valkey-tools; on
#     bookworm they come from bookworm-backports, which is added if missing)
#   * the Python clients redis-py and valkey-py, and kubernetes-validate
#     (offline Kubernetes schema validation of deploy/), in a virtualenv at
#     .deps/python
#   * the Node clients ioredis and node-redis, under .deps/node
#   * iptables (Debian package), for the partition tests' network cuts
#   * podman, runc, debootstrap and containerd (Debian packages), for the
#     container images (scripts/images builds them when a test asks)
#   * chromium and chromium-driver (Debian packages), for the status page's
#     browser test (tests/status/page.rs)
#   * the Java client drivers (Jedis, Lettuce, Redisson, Spring Data Redis),
#     built by Maven from tests/clients/java (artifacts cached in ~/.m2),
#     and the go-redis driver, built by Go from tests/clients/go (modules
#     cached in Go's module cache, the binary under ~/.cache/valkyrie)
#   * kube-apiserver and etcd, built from the Go module proxy by
#     scripts/kube-testbin (cached under ~/.cache/valkyrie-kube)
#   * for the one-node cluster (tests/node/, tests/support/cluster/):
#     containerd, runc, containernetworking-plugins, conntrack and iptables
#     (Debian packages; the containerd service the package may start is
#     kept from starting), the node's binaries (VALKYRIE_KUBE_NODE=1
#     scripts/kube-testbin: kubelet, kube-proxy, kube-scheduler,
#     kube-controller-manager, kubectl, crictl, CoreDNS) and the container
#     images of scripts/images (cached under ~/.cache/valkyrie-images)
# Go itself is not installed: the Go drivers and the cluster binaries need
# the version their go.mod files name (1.26 today), which no Debian package
# has, and Go is never allowed to download a toolchain (GOTOOLCHAIN=local).
# Without it the run fails with a message naming the version.
# and exports, for the tests:
#   VALKYRIE_PYTHON     python interpreter that can `import redis, valkey,
#                       kubernetes_validate`
#   VALKYRIE_NODE_PATH  node_modules folder holding ioredis and redis
#                       (use it as NODE_PATH when running node)
#   VALKEY_SERVER, VALKEY_SENTINEL, VALKEY_CLI, VALKEY_BENCHMARK
#                       absolute paths of the Valkey binaries
#   VALKYRIE_JAVA_CLIENTS  the Java driver (a jar, run with `java -jar`)
#   VALKYRIE_GO_CLIENTS    the Go driver (an executable)
#   VALKYRIE_KUBE_BIN      the directory of kube-apiserver and etcd (and of
#                          the node's binaries)
#   VALKYRIE_IMAGES        the directory scripts/images prints (images.txt)
#   VALKYRIE_CHROMIUM, VALKYRIE_CHROMEDRIVER
#                       absolute paths of chromium and chromedriver
#
# A second call does nothing but checks (well under a second) and the
# drivers' incremental builds (a few seconds).
# `valkyrie_deps --valkey-only` stops after the Valkey binaries (the demo).
#
# Knobs:
#   VALKEY_SERVER=... etc.   use these binaries instead of the ones on PATH
#   VALKYRIE_NO_INSTALL=1    never install anything; only look things up and
#                            export what is found
#   VALKYRIE_KUBE_NODE=0     do not build the node's binaries and images
#                            (tests/node/ then fails: it is part of the suite)
#
# Works with `set -euo pipefail` in the caller. Returns non-zero on failure.

# Pinned versions. Bump them here; the next run installs the new ones.
VALKYRIE_PY_PKGS=(redis==8.1.0 valkey==6.2.0 kubernetes-validate==1.37.0)
VALKYRIE_NODE_PKGS=(ioredis@6.0.0 redis@5.9.0)
VALKYRIE_DEB_PKGS=(valkey-server valkey-sentinel valkey-tools)
# runc, never crun: crun refuses hybrid cgroups v1 ("cgroups in hybrid mode
# not supported"); named here, apt takes it for podman's crun | runc.
VALKYRIE_IMAGE_PKGS=(podman runc debootstrap containerd)

VALKYRIE_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

_valkyrie_log() { printf '[deps] %s\n' "$*" >&2; }

# Microseconds since the epoch (EPOCHREALTIME may use ',' in some locales).
_valkyrie_now_us() {
    local t="${EPOCHREALTIME:-}"
    if [ -n "$t" ]; then
        t="${t//[.,]/}"
        printf '%s\n' "$((10#$t))"
    else
        printf '%s\n' "$(($(date +%s) * 1000000))"
    fi
}

# _valkyrie_elapsed START_US -> "1.23s"
_valkyrie_elapsed() {
    local d=$(($(_valkyrie_now_us) - $1))
    printf '%d.%02ds' "$((d / 1000000))" "$((d % 1000000 / 10000))"
}

# Run a command as root: directly when we are root, else through sudo.
_valkyrie_as_root() {
    if [ "$(id -u)" -eq 0 ]; then
        "$@"
    elif command -v sudo >/dev/null 2>&1; then
        sudo "$@"
    else
        _valkyrie_log "need root for: $*  (not root, and sudo is not installed)"
        return 1
    fi
}

_valkyrie_apt_updated=0
_valkyrie_apt_update() {
    if [ "$_valkyrie_apt_updated" -eq 0 ]; then
        _valkyrie_as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q || return 1
        _valkyrie_apt_updated=1
    fi
}

# _valkyrie_apt_install [apt-get options...] PACKAGE...
_valkyrie_apt_install() {
    if ! command -v apt-get >/dev/null 2>&1; then
        _valkyrie_log "apt-get not found: install by hand: $*"
        return 1
    fi
    _valkyrie_apt_update || return 1
    _valkyrie_as_root env DEBIAN_FRONTEND=noninteractive \
        apt-get install -y -q --no-install-recommends "$@"
}

# _valkyrie_find VAR BINARY: prints $VAR when it names an executable, else the
# absolute path of BINARY on PATH; fails when neither exists.
_valkyrie_find() {
    local preset="${!1:-}"
    if [ -n "$preset" ] && [ -x "$preset" ]; then
        printf '%s\n' "$preset"
    else
        command -v "$2" 2>/dev/null
    fi
}

_valkyrie_have_valkey() {
    _valkyrie_find VALKEY_SERVER valkey-server >/dev/null &&
        _valkyrie_find VALKEY_SENTINEL valkey-sentinel >/dev/null &&
        _valkyrie_find VALKEY_CLI valkey-cli >/dev/null &&
        _valkyrie_find VALKEY_BENCHMARK valkey-benchmark >/dev/null
}

# Is bookworm-backports among apt's sources (uncommented)?
_valkyrie_has_backports() {
    local f
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
        [ -f "$f" ] || continue
        if grep -qE '^[^#]*bookworm-backports' "$f"; then
            return 0
        fi
    done
    return 1
}

# PID of a live process from a pid file, or nothing.
_valkyrie_pid_from() {
    local pid
    [ -r "$1" ] || return 0
    pid="$(tr -dc '0-9' <"$1")"
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
        printf '%s\n' "$pid"
    fi
}

# Stop the services the packages may have started, and keep them from
# starting at boot: Valkyrie's tests start their own servers on their own
# ports. Only services that were not running before our install are touched.
# $1: space-separated list of services that were already running before.
_valkyrie_stop_new_services() {
    local before=" $1 " svc pid tries
    for svc in valkey-server valkey-sentinel; do
        case "$before" in *" $svc "*) continue ;; esac
        if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
            if systemctl is-active --quiet "$svc" 2>/dev/null; then
                _valkyrie_log "stopping the $svc service the package started"
                _valkyrie_as_root systemctl stop "$svc" || true
            fi
            if systemctl is-enabled --quiet "$svc" 2>/dev/null; then
                _valkyrie_as_root systemctl disable --quiet "$svc" || true
            fi
        fi
        pid="$(_valkyrie_pid_from "/run/valkey/$svc.pid")"
        if [ -n "$pid" ]; then
            _valkyrie_log "stopping $svc (pid $pid) that the package started"
            _valkyrie_as_root service "$svc" stop >/dev/null 2>&1 || true
            tries=0
            while kill -0 "$pid" 2>/dev/null && [ "$tries" -lt 50 ]; do
                if [ "$tries" -eq 10 ]; then _valkyrie_as_root kill "$pid" 2>/dev/null || true; fi
                sleep 0.1
                tries=$((tries + 1))
            done
        fi
    done
}

_valkyrie_running_services() {
    local svc out=""
    for svc in valkey-server valkey-sentinel; do
        if [ -n "$(_valkyrie_pid_from "/run/valkey/$svc.pid")" ] ||
            { [ -d /run/systemd/system ] && systemctl is-active --quiet "$svc" 2>/dev/null; }; then
            out="$out $svc"
        fi
    done
    printf '%s\n' "$out"
}

# _valkyrie_no_start PATTERN COMMAND...: runs COMMAND (an install) while a
# policy-rc.d keeps the services matching the case PATTERN from starting,
# where no policy is in place already (invoke-rc.d and deb-systemd-invoke
# read it).
_valkyrie_no_start() {
    local pattern="$1" rc=0 policy=/usr/sbin/policy-rc.d made_policy=0
    local marker="# temporary: Valkyrie scripts/deps.sh keeps services from starting"
    shift
    if [ ! -e "$policy" ]; then
        # shellcheck disable=SC2016  # $1 is for the generated script
        printf '#!/bin/sh\n%s\ncase "$1" in %s) exit 101 ;; esac\nexit 0\n' "$marker" "$pattern" |
            _valkyrie_as_root tee "$policy" >/dev/null &&
            _valkyrie_as_root chmod 755 "$policy" && made_policy=1
    fi
    "$@" || rc=$?
    if [ "$made_policy" -eq 1 ] && grep -qF "$marker" "$policy" 2>/dev/null; then
        _valkyrie_as_root rm -f "$policy" || true
    fi
    return "$rc"
}

_valkyrie_install_valkey() {
    local codename="" target=() before rc=0

    if [ -r /etc/os-release ]; then
        codename="$(. /etc/os-release && printf '%s' "${VERSION_CODENAME:-}")"
    fi
    if [ "$codename" = bookworm ]; then
        if ! _valkyrie_has_backports; then
            _valkyrie_log "adding bookworm-backports to apt's sources"
            printf '%s\n' \
                'Types: deb' \
                'URIs: http://deb.debian.org/debian' \
                'Suites: bookworm-backports' \
                'Components: main' \
                'Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg' |
                _valkyrie_as_root tee /etc/apt/sources.list.d/bookworm-backports.sources >/dev/null || return 1
            _valkyrie_apt_updated=0
        fi
        target=(-t bookworm-backports)
    fi

    before="$(_valkyrie_running_services)"
    _valkyrie_no_start 'valkey-*' _valkyrie_apt_install "${target[@]}" "${VALKYRIE_DEB_PKGS[@]}" || rc=$?
    _valkyrie_stop_new_services "$before"
    return "$rc"
}

_valkyrie_have_image_tools() {
    local b
    for b in podman runc debootstrap ctr; do
        command -v "$b" >/dev/null 2>&1 || [ -x "/usr/sbin/$b" ] || return 1
    done
}

# The container tools (VALKYRIE_IMAGE_PKGS). containerd is there for `ctr`
# only: its service is kept from starting, and from starting at boot when
# it was not enabled before (tests run containerds of their own).
_valkyrie_install_image_tools() {
    local enabled=0 rc=0
    if [ -d /run/systemd/system ] && systemctl is-enabled --quiet containerd 2>/dev/null; then
        enabled=1
    fi
    _valkyrie_no_start 'containerd | podman*' _valkyrie_apt_install "${VALKYRIE_IMAGE_PKGS[@]}" || rc=$?
    if [ "$enabled" = 0 ] && [ -d /run/systemd/system ] &&
        systemctl is-enabled --quiet containerd 2>/dev/null; then
        _valkyrie_as_root systemctl disable --now --quiet containerd || true
    fi
    return "$rc"
}

# The one-node cluster's host packages (tests/support/cluster/).
VALKYRIE_NODE_DEB_PKGS=(containerd runc containernetworking-plugins conntrack iptables)

_valkyrie_have_node_pkgs() {
    local tool
    for tool in containerd ctr runc conntrack iptables nsenter; do
        command -v "$tool" >/dev/null 2>&1 || [ -x "/usr/sbin/$tool" ] || return 1
    done
    [ -x /usr/lib/cni/bridge ] && [ -x /usr/lib/cni/host-local ] && [ -x /usr/lib/cni/portmap ]
}

# The test cluster runs a containerd of its own: the package's service must
# not start (it would take /run/containerd). As for Valkey, a temporary
# policy keeps maintainer scripts from starting it, and a service started
# anyway is stopped and disabled.
_valkyrie_install_node_pkgs() {
    local rc=0
    _valkyrie_no_start 'containerd*' _valkyrie_apt_install "${VALKYRIE_NODE_DEB_PKGS[@]}" || rc=$?
    if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
        if systemctl is-active --quiet containerd 2>/dev/null; then
            _valkyrie_log "stopping the containerd service the package started"
            _valkyrie_as_root systemctl stop containerd || true
        fi
        _valkyrie_as_root systemctl disable --quiet containerd 2>/dev/null || true
    fi
    return "$rc"
}

_valkyrie_python_ok() {
    [ -x "$1" ] || return 1
    "$1" - "${VALKYRIE_PY_PKGS[@]}" <<'PY' >/dev/null 2>&1
import sys
from importlib import metadata
for spec in sys.argv[1:]:
    name, version = spec.split("==")
    if metadata.version(name) != version:
        sys.exit(1)
PY
}

_valkyrie_install_python() {
    local venv="$VALKYRIE_ROOT/.deps/python" base="${VALKYRIE_BASE_PYTHON:-python3}"
    local py="$venv/bin/python"

    if ! command -v "$base" >/dev/null 2>&1; then
        _valkyrie_apt_install python3 python3-venv || return 1
    fi
    # A virtualenv whose interpreter no longer runs (base Python moved) is rebuilt.
    if [ -e "$venv" ] && ! "$py" -c '' >/dev/null 2>&1; then
        rm -rf "$venv"
    fi
    if [ ! -x "$py" ]; then
        mkdir -p "$VALKYRIE_ROOT/.deps"
        if ! "$base" -m venv "$venv" >/dev/null 2>&1; then
            # Debian's own python3 needs python3-venv for ensurepip.
            rm -rf "$venv"
            _valkyrie_apt_install python3-venv || return 1
            "$base" -m venv "$venv" || return 1
        fi
    fi
    "$py" -m pip install --disable-pip-version-check --no-input -q "${VALKYRIE_PY_PKGS[@]}" || return 1
    _valkyrie_python_ok "$py"
}

_valkyrie_node_ok() {
    local dir="$1"
    shift
    [ -f "$dir/.valkyrie-stamp" ] && [ "$(cat "$dir/.valkyrie-stamp")" = "$*" ] || return 1
    node - "$dir/node_modules" "$@" <<'JS' >/dev/null 2>&1
const path = require("path");
const [modules, ...specs] = process.argv.slice(2);
for (const spec of specs) {
  const at = spec.lastIndexOf("@");
  const name = spec.slice(0, at), version = spec.slice(at + 1);
  const pkg = require(path.join(modules, name, "package.json"));
  if (pkg.version !== version) process.exit(1);
}
JS
}

_valkyrie_install_node() {
    local dir="$VALKYRIE_ROOT/.deps/node"
    if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
        _valkyrie_apt_install nodejs npm || return 1
    fi
    mkdir -p "$dir"
    rm -f "$dir/.valkyrie-stamp"
    # Own package.json, so npm never walks up into the repository.
    [ -f "$dir/package.json" ] || printf '{\n  "name": "valkyrie-test-deps",\n  "private": true\n}\n' >"$dir/package.json"
    (cd "$dir" && npm install --save-exact --no-audit --no-fund --loglevel=error "${VALKYRIE_NODE_PKGS[@]}") >&2 || return 1
    printf '%s\n' "${VALKYRIE_NODE_PKGS[*]}" >"$dir/.valkyrie-stamp"
    _valkyrie_node_ok "$dir" "${VALKYRIE_NODE_PKGS[@]}"
}

# The Go the drivers and the cluster binaries need: the newest `go`
# directive of their go.mod files.
_valkyrie_go_wanted() {
    sed -n 's/^go \([0-9.]*\)$/\1/p' "$VALKYRIE_ROOT/tests/clients/go/go.mod" \
        "$VALKYRIE_ROOT/tools/kube-testbin/go.mod" | sort -V | tail -n1
}

_valkyrie_go_missing() {
    _valkyrie_log "Go $(_valkyrie_go_wanted) or newer is needed (tests/clients/go/go.mod," \
        "tools/kube-testbin/go.mod) and 'go' on PATH is $(command -v go >/dev/null 2>&1 &&
            go env GOVERSION || echo missing). Install it from https://go.dev/dl/ and" \
        "put its bin/ on PATH; Valkyrie never lets Go download a toolchain (GOTOOLCHAIN=local)."
}

# _valkyrie_go_ok: `go` is on PATH and at least the version go.mod names.
_valkyrie_go_ok() {
    local have want
    command -v go >/dev/null 2>&1 || return 1
    have="$(GOTOOLCHAIN=local go env GOVERSION 2>/dev/null)" || return 1
    have="${have#go}"
    want="$(_valkyrie_go_wanted)"
    [ "$(printf '%s\n%s\n' "$want" "$have" | sort -V | head -n1)" = "$want" ]
}

# _valkyrie_build_driver DIR TOOL...: runs tests/clients/DIR/build.sh once
# every TOOL is on PATH; prints the artifact's path (its last line).
_valkyrie_build_driver() {
    local dir="$VALKYRIE_ROOT/tests/clients/$1" tool out
    shift
    for tool in "$@"; do
        if [ "$tool" = go ]; then
            _valkyrie_go_ok || { _valkyrie_go_missing; return 1; }
            continue
        fi
        command -v "$tool" >/dev/null 2>&1 && continue
        _valkyrie_log "$tool not found: it is needed to build $dir; installing it"
        case "$tool" in
            mvn | java) _valkyrie_apt_install maven openjdk-17-jdk-headless || return 1 ;;
        esac
        if ! command -v "$tool" >/dev/null 2>&1; then
            _valkyrie_log "$tool still not found after installing"
            return 1
        fi
    done
    out="$(bash "$dir/build.sh" | tail -n1)" || return 1
    if [ -z "$out" ] || [ ! -f "$out" ]; then
        _valkyrie_log "$dir/build.sh named no artifact (got '$out')"
        return 1
    fi
    printf '%s\n' "$out"
}

valkyrie_deps() {
    local t0 t rc=0 no_install="${VALKYRIE_NO_INSTALL:-0}"
    # Go builds with the Go on PATH, never one it would download.
    export GOTOOLCHAIN=local
    t0="$(_valkyrie_now_us)"

    # Valkey binaries.
    t="$(_valkyrie_now_us)"
    if ! _valkyrie_have_valkey; then
        if [ "$no_install" = 1 ]; then
            _valkyrie_log "valkey binaries missing (VALKYRIE_NO_INSTALL=1: not installing)"
        else
            _valkyrie_log "installing ${VALKYRIE_DEB_PKGS[*]}"
            _valkyrie_install_valkey || rc=1
        fi
    fi
    VALKEY_SERVER="$(_valkyrie_find VALKEY_SERVER valkey-server || true)"
    VALKEY_SENTINEL="$(_valkyrie_find VALKEY_SENTINEL valkey-sentinel || true)"
    VALKEY_CLI="$(_valkyrie_find VALKEY_CLI valkey-cli || true)"
    VALKEY_BENCHMARK="$(_valkyrie_find VALKEY_BENCHMARK valkey-benchmark || true)"
    export VALKEY_SERVER VALKEY_SENTINEL VALKEY_CLI VALKEY_BENCHMARK
    if [ -n "$VALKEY_SERVER" ]; then
        _valkyrie_log "valkey: $("$VALKEY_SERVER" --version 2>/dev/null | head -n1) ($(_valkyrie_elapsed "$t"))"
    else
        _valkyrie_log "valkey: valkey-server NOT found ($(_valkyrie_elapsed "$t"))"
        rc=1
    fi

    if [ "${1:-}" = "--valkey-only" ]; then
        _valkyrie_log "done in $(_valkyrie_elapsed "$t0")"
        return "$rc"
    fi

    # iptables, for the partition tests' real network cuts
    # (tests/failover/partition.rs).
    t="$(_valkyrie_now_us)"
    if command -v iptables >/dev/null 2>&1 || [ -x /usr/sbin/iptables ]; then
        _valkyrie_log "iptables: present ($(_valkyrie_elapsed "$t"))"
    elif [ "$no_install" = 1 ]; then
        _valkyrie_log "iptables: missing (VALKYRIE_NO_INSTALL=1: not installing)"
    elif _valkyrie_apt_install iptables; then
        _valkyrie_log "iptables: installed ($(_valkyrie_elapsed "$t"))"
    else
        _valkyrie_log "iptables: installing FAILED ($(_valkyrie_elapsed "$t"))"
        rc=1
    fi

    # podman, runc, debootstrap and containerd's ctr, for the container
    # images (scripts/images, tests/kube/images.rs).
    t="$(_valkyrie_now_us)"
    if _valkyrie_have_image_tools; then
        _valkyrie_log "images: ${VALKYRIE_IMAGE_PKGS[*]} present ($(_valkyrie_elapsed "$t"))"
    elif [ "$no_install" = 1 ]; then
        _valkyrie_log "images: ${VALKYRIE_IMAGE_PKGS[*]} missing (VALKYRIE_NO_INSTALL=1: not installing)"
    elif _valkyrie_install_image_tools && _valkyrie_have_image_tools; then
        _valkyrie_log "images: installed ${VALKYRIE_IMAGE_PKGS[*]} ($(_valkyrie_elapsed "$t"))"
    else
        _valkyrie_log "images: installing ${VALKYRIE_IMAGE_PKGS[*]} FAILED ($(_valkyrie_elapsed "$t"))"
        rc=1
    fi

    # Chromium and chromedriver, for the status page in a real browser
    # (tests/status/page.rs).
    t="$(_valkyrie_now_us)"
    if _valkyrie_find VALKYRIE_CHROMIUM chromium >/dev/null &&
        _valkyrie_find VALKYRIE_CHROMEDRIVER chromedriver >/dev/null; then
        _valkyrie_log "chromium: present ($(_valkyrie_elapsed "$t"))"
    elif [ "$no_install" = 1 ]; then
        _valkyrie_log "chromium: missing (VALKYRIE_NO_INSTALL=1: not installing)"
    elif _valkyrie_apt_install chromium chromium-driver; then
        _valkyrie_log "chromium: installed ($(_valkyrie_elapsed "$t"))"
    else
        _valkyrie_log "chromium: installing FAILED ($(_valkyrie_elapsed "$t"))"
        rc=1
    fi
    VALKYRIE_CHROMIUM="$(_valkyrie_find VALKYRIE_CHROMIUM chromium || true)"
    VALKYRIE_CHROMEDRIVER="$(_valkyrie_find VALKYRIE_CHROMEDRIVER chromedriver || true)"
    if [ -z "$VALKYRIE_CHROMIUM" ] || [ -z "$VALKYRIE_CHROMEDRIVER" ]; then
        _valkyrie_log "chromium: chromium or chromedriver NOT found"
        rc=1
    fi
    export VALKYRIE_CHROMIUM VALKYRIE_CHROMEDRIVER

    # Python clients.
    t="$(_valkyrie_now_us)"
    VALKYRIE_PYTHON="$VALKYRIE_ROOT/.deps/python/bin/python"
    if _valkyrie_python_ok "$VALKYRIE_PYTHON"; then
        _valkyrie_log "python: ${VALKYRIE_PY_PKGS[*]} present ($(_valkyrie_elapsed "$t"))"
    elif [ "$no_install" = 1 ]; then
        _valkyrie_log "python: ${VALKYRIE_PY_PKGS[*]} missing (VALKYRIE_NO_INSTALL=1: not installing)"
    elif _valkyrie_install_python; then
        _valkyrie_log "python: installed ${VALKYRIE_PY_PKGS[*]} ($(_valkyrie_elapsed "$t"))"
    else
        _valkyrie_log "python: installing ${VALKYRIE_PY_PKGS[*]} FAILED ($(_valkyrie_elapsed "$t"))"
        rc=1
    fi
    export VALKYRIE_PYTHON

    # Node clients.
    t="$(_valkyrie_now_us)"
    VALKYRIE_NODE_PATH="$VALKYRIE_ROOT/.deps/node/node_modules"
    if command -v node >/dev/null 2>&1 && _valkyrie_node_ok "$VALKYRIE_ROOT/.deps/node" "${VALKYRIE_NODE_PKGS[@]}"; then
        _valkyrie_log "node: ${VALKYRIE_NODE_PKGS[*]} present ($(_valkyrie_elapsed "$t"))"
    elif [ "$no_install" = 1 ]; then
        _valkyrie_log "node: ${VALKYRIE_NODE_PKGS[*]} missing (VALKYRIE_NO_INSTALL=1: not installing)"
    elif _valkyrie_install_node; then
        _valkyrie_log "node: installed ${VALKYRIE_NODE_PKGS[*]} ($(_valkyrie_elapsed "$t"))"
    else
        _valkyrie_log "node: installing ${VALKYRIE_NODE_PKGS[*]} FAILED ($(_valkyrie_elapsed "$t"))"
        rc=1
    fi
    export VALKYRIE_NODE_PATH

    # Java and Go client drivers. Their build scripts print the artifact's
    # path on their last line; a rerun is incremental and offline.
    t="$(_valkyrie_now_us)"
    if VALKYRIE_JAVA_CLIENTS="$(_valkyrie_build_driver java mvn java)"; then
        _valkyrie_log "java: drivers built ($(_valkyrie_elapsed "$t"))"
    else
        _valkyrie_log "java: building tests/clients/java FAILED ($(_valkyrie_elapsed "$t"))"
        rc=1
    fi
    t="$(_valkyrie_now_us)"
    if VALKYRIE_GO_CLIENTS="$(_valkyrie_build_driver go go)"; then
        _valkyrie_log "go: driver built ($(_valkyrie_elapsed "$t"))"
    else
        _valkyrie_log "go: building tests/clients/go FAILED ($(_valkyrie_elapsed "$t"))"
        rc=1
    fi
    export VALKYRIE_JAVA_CLIENTS VALKYRIE_GO_CLIENTS

    # A real kube-apiserver and etcd, built from the Go module proxy once per
    # machine (several minutes cold; cached under ~/.cache/valkyrie-kube);
    # with VALKYRIE_KUBE_CONTROLLER_MANAGER=1 (scripts/test --slow, for
    # tests/kube/endpoints.rs) kube-controller-manager too.
    # With VALKYRIE_KUBE_NODE=1 (the default here: tests/node/ is part of
    # the suite) everything a one-node cluster runs, too.
    export VALKYRIE_KUBE_NODE="${VALKYRIE_KUBE_NODE:-1}"
    local kube_bins=(kube-apiserver etcd)
    if [ "$VALKYRIE_KUBE_NODE" = 1 ]; then
        kube_bins+=(kube-controller-manager kube-scheduler kube-proxy kubelet kubectl crictl coredns)
    elif [ "${VALKYRIE_KUBE_CONTROLLER_MANAGER:-0}" = 1 ]; then
        kube_bins+=(kube-controller-manager)
    fi
    t="$(_valkyrie_now_us)"
    if _valkyrie_go_ok &&
        VALKYRIE_KUBE_BIN="$(bash "$VALKYRIE_ROOT/scripts/kube-testbin" | tail -n1)" &&
        (for b in "${kube_bins[@]}"; do [ -x "$VALKYRIE_KUBE_BIN/$b" ] || exit 1; done); then
        _valkyrie_log "kube: ${kube_bins[*]} in $VALKYRIE_KUBE_BIN ($(_valkyrie_elapsed "$t"))"
    else
        _valkyrie_go_ok || _valkyrie_go_missing
        _valkyrie_log "kube: building ${kube_bins[*]} FAILED ($(_valkyrie_elapsed "$t"))"
        VALKYRIE_KUBE_BIN=""
        rc=1
    fi
    export VALKYRIE_KUBE_BIN

    if [ "$VALKYRIE_KUBE_NODE" = 1 ]; then
        # The one-node cluster's host packages and images.
        t="$(_valkyrie_now_us)"
        if _valkyrie_have_node_pkgs; then
            _valkyrie_log "node: ${VALKYRIE_NODE_DEB_PKGS[*]} present ($(_valkyrie_elapsed "$t"))"
        elif [ "$no_install" = 1 ]; then
            _valkyrie_log "node: ${VALKYRIE_NODE_DEB_PKGS[*]} missing (VALKYRIE_NO_INSTALL=1: not installing)"
        elif _valkyrie_install_node_pkgs && _valkyrie_have_node_pkgs; then
            _valkyrie_log "node: installed ${VALKYRIE_NODE_DEB_PKGS[*]} ($(_valkyrie_elapsed "$t"))"
        else
            _valkyrie_log "node: installing ${VALKYRIE_NODE_DEB_PKGS[*]} FAILED ($(_valkyrie_elapsed "$t"))"
            rc=1
        fi
        t="$(_valkyrie_now_us)"
        if [ -x "$VALKYRIE_ROOT/scripts/images" ] &&
            VALKYRIE_IMAGES="$(bash "$VALKYRIE_ROOT/scripts/images" | tail -n1)" &&
            [ -f "$VALKYRIE_IMAGES/images.txt" ]; then
            _valkyrie_log "images: $(cut -d' ' -f2 "$VALKYRIE_IMAGES/images.txt" | tr '\n' ' ')($(_valkyrie_elapsed "$t"))"
        else
            _valkyrie_log "images: scripts/images FAILED or is missing ($(_valkyrie_elapsed "$t"))"
            VALKYRIE_IMAGES=""
            rc=1
        fi
        export VALKYRIE_IMAGES
    fi

    _valkyrie_log "done in $(_valkyrie_elapsed "$t0")"
    return "$rc"
}
