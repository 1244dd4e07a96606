#!/usr/bin/env python3
"""Runs every test of the workspace, two units at a time.

`cargo test` runs its binaries one after another, and most of our tests
spend their time waiting on real processes (a down-after, an election, a
kube-apiserver starting), not computing: two at once halve the suite's
wall time on 2 cores. The tests that compute (the stateright models, the
property tests) still run alone, first, so they never take the CPU from a
test that waits on real time.

A unit is what runs as one process: one module of an area's binary
(`tests/<area>/main.rs`, e.g. `peering::trio`, the tests of
tests/peering/trio.rs), or a whole binary otherwise (the libraries' unit
tests, the other crates' tests, the benchmarks in test mode). A module's
tests share their process as they did when each module was a binary of
its own: libtest's default threads, and no other module's process state
(the metrics recorder, the logger, the locks that serialise a module's
tests). Units are taken longest first, by the durations of the previous
run (valkyrie-test-durations.json in the target directory).

Each unit that shares the machine runs in a network namespace of its own
(`unshare --net`, its loopback up): the tests pick free ports on
127.0.0.1, and a port one unit freed (a node it killed) could be taken by
the other lane's unit while a sentinel of the first still dials it, which
once joined two tests' deployments. Their iptables cuts stay theirs too.
The units run alone keep the host's network (the one-node cluster's CNI
and containerd). Where no namespace can be made (not root), the shared
units run one at a time instead, and the run says so.

Usage: scripts/run-tests.py [-- ARGS...]   (ARGS go to every test binary,
e.g. `-- --include-ignored`, `-- --ignored --skip deep_`, or a name
filter). Builds with `cargo test --workspace --all-targets --no-run`,
lists each binary's tests with ARGS (`--list`), then runs each unit from
its package's directory, as cargo does, printing a unit's output when it
ends. A unit fails when it exits non-zero, or when the tests it ran are
not the tests listed for it (none may be skipped silently). Exits non-zero
when any unit fails; the last lines are the summary.
"""

import json
import os
import re
import subprocess
import sys
import threading
import time

LANES = 2
# Units that keep a core busy (the models, the property tests, the
# daemon with 1,000 groups whose masters refuse every connect, whose test
# is that one healthy group still meets a 1 s down-after), the images
# (whose Valkyrie image is rebuilt in release mode after a source edit)
# and the tests on a one-node cluster (tests/node/: a control plane, a
# kubelet and containerd on 2 cores, and one node per machine at a time):
# run alone, one after another, before the others.
ALONE = re.compile(
    r"^(models::.*|properties|failover::resilience|kube::images|node::.*)$"
)
RESULT = re.compile(
    r"test result: (\w+)\. (\d+) passed; (\d+) failed; (\d+) ignored"
)
# The harness's options that take a value: what follows them is no filter.
VALUED = {
    "--skip", "--test-threads", "--format", "--color", "--logfile", "-Z",
    "--shuffle-seed",
}


def build():
    cmd = [
        "cargo", "test", "--workspace", "--all-targets", "--no-run",
        "--message-format=json-render-diagnostics",
    ]
    out = subprocess.run(cmd, stdout=subprocess.PIPE, check=False, text=True)
    if out.returncode != 0:
        sys.exit(out.returncode)
    binaries = []
    for line in out.stdout.splitlines():
        msg = json.loads(line)
        if msg.get("reason") != "compiler-artifact" or not msg.get("executable"):
            continue
        if not msg["profile"]["test"]:
            continue
        target = msg["target"]
        src = target["src_path"]
        binaries.append({
            "name": target["name"],
            "kind": target["kind"][0],
            "src": src,
            "exe": msg["executable"],
            "dir": os.path.dirname(msg["manifest_path"]),
            # An area's binary: tests/<area>/main.rs, one unit a module.
            "grouped": target["kind"][0] == "test"
            and os.path.basename(src) == "main.rs"
            and os.path.basename(os.path.dirname(os.path.dirname(src))) == "tests",
        })
    return binaries


def options(args):
    """ARGS without the name filters (and `--exact`), for a unit's run."""
    kept, value = [], False
    for a in args:
        if value:
            kept.append(a)
            value = False
        elif a in VALUED:
            kept.append(a)
            value = True
        elif a.startswith("-") and a != "--exact":
            kept.append(a)
    return kept


def listed(b, args):
    """The names of the tests `b` runs with ARGS; None for a binary
    without libtest's harness (a criterion bench in test mode)."""
    if b["kind"] == "bench":
        return None
    out = subprocess.run(
        [b["exe"], *args, "--list", "--format", "terse"], cwd=b["dir"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=False,
        text=True,
    )
    if out.returncode != 0:
        sys.exit(f'{b["exe"]} --list failed:\n{out.stdout}')
    return [
        line[: -len(": test")] for line in out.stdout.splitlines()
        if line.endswith(": test")
    ]


def units(binaries, args):
    """The units to run: a module of a grouped binary, or a whole one."""
    out = []
    for b in binaries:
        names = listed(b, args)
        if names is None:
            out.append({"bin": b, "id": b["name"], "names": None,
                        "cmd": [b["exe"], *args]})
            continue
        if not b["grouped"]:
            if names:
                out.append({"bin": b, "id": b["name"], "names": names,
                            "cmd": [b["exe"], *args]})
            continue
        modules = {}
        for n in names:
            modules.setdefault(n.split("::")[0] if "::" in n else "", []).append(n)
        for module, ns in sorted(modules.items()):
            uid = f'{b["name"]}::{module}' if module else b["name"]
            # Exact names: a module's filter (`trio::`) would also match
            # another module's `…::trio::…`.
            out.append({"bin": b, "id": uid, "names": ns,
                        "cmd": [b["exe"], *options(args), "--exact", *ns]})
    return out


def durations_file():
    target = os.environ.get("CARGO_TARGET_DIR", "target")
    return os.path.join(target, "valkyrie-test-durations.json")


def load_durations():
    try:
        with open(durations_file()) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


# Runs a command in a new network namespace whose loopback is up.
ISOLATED = ["unshare", "--net", "--", "sh", "-c", 'ip link set lo up && exec "$@"', "unit"]


def can_isolate():
    """Whether a unit can have a network namespace of its own."""
    try:
        probe = subprocess.run(
            [*ISOLATED, "ip", "-o", "addr", "show", "lo"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=False,
            text=True,
        )
    except OSError:
        return False
    return probe.returncode == 0 and "127.0.0.1" in probe.stdout


def run_one(u, isolated=False):
    start = time.monotonic()
    cmd = [*ISOLATED, *u["cmd"]] if isolated else u["cmd"]
    proc = subprocess.run(
        cmd, cwd=u["bin"]["dir"], stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, check=False,
    )
    u["secs"] = time.monotonic() - start
    u["code"] = proc.returncode
    u["output"] = proc.stdout.decode("utf-8", "replace")
    return u


def main():
    args = sys.argv[1:]
    if args[:1] == ["--"]:
        args = args[1:]
    todo = units(build(), args)
    known = load_durations()
    key = lambda u: f'{u["bin"]["kind"]}:{u["id"]}'
    # Longest first (unknown ones count as long): the two lanes end close
    # together.
    todo.sort(key=lambda u: -known.get(key(u), 1e9))
    alone = [u for u in todo if ALONE.match(u["id"])]
    shared = [u for u in todo if not ALONE.match(u["id"])]
    lock = threading.Lock()
    started = time.monotonic()

    def report(u):
        with lock:
            rel = os.path.relpath(u["bin"]["src"])
            print(
                f'     Running {rel} {u["id"]} ({u["bin"]["exe"]}) '
                f'[{u["secs"]:.1f}s]',
                flush=True,
            )
            sys.stdout.write(u["output"])
            sys.stdout.flush()

    for u in alone:
        report(run_one(u))

    isolated = can_isolate()
    lanes = LANES if isolated else 1
    if not isolated:
        print(
            "no network namespace can be made here (unshare --net needs "
            "root): the units run one at a time, on the host's loopback",
            flush=True,
        )
    pending = list(shared)

    def lane():
        while True:
            with lock:
                if not pending:
                    return
                u = pending.pop(0)
            report(run_one(u, isolated))

    threads = [threading.Thread(target=lane) for _ in range(lanes)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    totals = [0, 0, 0]
    failed = []
    for u in todo:
        ran = 0
        for _, p, f, i in RESULT.findall(u["output"]):
            totals[0] += int(p)
            totals[1] += int(f)
            totals[2] += int(i)
            ran += int(p) + int(f) + int(i)
        # A harness-less binary (a criterion bench in test mode) prints no
        # "test result" line: its exit status is the verdict.
        if u["code"] != 0:
            failed.append(f'{u["id"]} (exit {u["code"]})')
        elif u["names"] is not None and ran != len(u["names"]):
            failed.append(
                f'{u["id"]} (ran {ran} tests of the {len(u["names"])} listed)'
            )
        known[key(u)] = round(u["secs"], 1)
    try:
        with open(durations_file(), "w") as f:
            json.dump(known, f, indent=1, sort_keys=True)
    except OSError:
        pass
    wall = time.monotonic() - started
    print(
        f"\n{len(todo)} test units in {wall:.0f} s: {totals[0]} passed, "
        f"{totals[1]} failed, {totals[2]} ignored"
    )
    for f in failed:
        print(f"FAILED: {f}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
