#!/usr/bin/env python3
"""Runs every test binary of the workspace, two at a time.

`cargo test` runs its binaries one after another, and most of ours spend
their time waiting on real processes (a down-after, an election, a
kube-apiserver starting), not computing: two at once halve the suite's
wall time on 2 cores. The binaries that compute (the stateright models,
the property tests) still run alone, first, so they never take the CPU
from a test that waits on real time.

Usage: scripts/run-tests.py [-- ARGS...]   (ARGS go to every test binary,
e.g. `-- --include-ignored`). Builds with `cargo test --workspace
--all-targets --no-run`, then runs each binary from its package's
directory, as cargo does, printing a binary's output when it ends. Exits
non-zero when any binary fails; the last lines are the summary.
"""

import json
import os
import re
import subprocess
import sys
import threading
import time

LANES = 2
# Binaries that keep a core busy (the models, the property tests, and the
# daemon with 1,000 groups whose masters refuse every connect, whose test
# is that one healthy group still meets a 1 s down-after): run alone,
# before the others.
ALONE = re.compile(r"^(model.*|properties|core_properties|resilience)$")
RESULT = re.compile(
    r"test result: (\w+)\. (\d+) passed; (\d+) failed; (\d+) ignored"
)


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
        binaries.append({
            "name": target["name"],
            "kind": target["kind"][0],
            "src": target["src_path"],
            "exe": msg["executable"],
            "dir": os.path.dirname(msg["manifest_path"]),
        })
    return binaries


def durations_file():
    target = os.environ.get("CARGO_TARGET_DIR", "target")
    return os.path.join(target, "valkyrie-test-durations.json")


def load_durations():
    try:
        with open(durations_file()) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def run_one(b, args):
    start = time.monotonic()
    proc = subprocess.run(
        [b["exe"], *args], cwd=b["dir"], stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, check=False,
    )
    b["secs"] = time.monotonic() - start
    b["code"] = proc.returncode
    b["output"] = proc.stdout.decode("utf-8", "replace")
    return b


def main():
    args = sys.argv[1:]
    if args[:1] == ["--"]:
        args = args[1:]
    binaries = build()
    known = load_durations()
    key = lambda b: f'{b["kind"]}:{b["name"]}'
    # Longest first (unknown ones count as long): the two lanes end close
    # together.
    binaries.sort(key=lambda b: -known.get(key(b), 1e9))
    alone = [b for b in binaries if ALONE.match(b["name"])]
    shared = [b for b in binaries if not ALONE.match(b["name"])]
    lock = threading.Lock()
    started = time.monotonic()

    def report(b):
        with lock:
            rel = os.path.relpath(b["src"])
            print(f'     Running {rel} ({b["exe"]}) [{b["secs"]:.1f}s]', flush=True)
            sys.stdout.write(b["output"])
            sys.stdout.flush()

    for b in alone:
        report(run_one(b, args))

    pending = list(shared)

    def lane():
        while True:
            with lock:
                if not pending:
                    return
                b = pending.pop(0)
            report(run_one(b, args))

    threads = [threading.Thread(target=lane) for _ in range(LANES)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    totals = [0, 0, 0]
    failed = []
    for b in binaries:
        found = RESULT.findall(b["output"])
        for _, p, f, i in found:
            totals[0] += int(p)
            totals[1] += int(f)
            totals[2] += int(i)
        # A harness-less binary (a criterion bench in test mode) prints no
        # "test result" line: its exit status is the verdict.
        if b["code"] != 0:
            failed.append(f'{os.path.relpath(b["src"])} (exit {b["code"]})')
        known[key(b)] = round(b["secs"], 1)
    try:
        with open(durations_file(), "w") as f:
            json.dump(known, f, indent=1, sort_keys=True)
    except OSError:
        pass
    wall = time.monotonic() - started
    print(
        f"\n{len(binaries)} test binaries in {wall:.0f} s: {totals[0]} passed, "
        f"{totals[1]} failed, {totals[2]} ignored"
    )
    for f in failed:
        print(f"FAILED: {f}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
