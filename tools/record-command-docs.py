#!/usr/bin/env python3
"""Records what a real valkey-sentinel answers to `COMMAND` and `COMMAND
DOCS` (RESP3, after `HELLO 3`) into src/sentinel/commands/, where the
Sentinel port serves them from.

Usage: tools/record-command-docs.py [valkey-sentinel binary]
It starts the binary on a free loopback port with an empty configuration
in a temporary directory, asks, and stops it by its PID."""

import os
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "src", "sentinel", "commands")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def command(*args):
    return ("*%d\r\n" % len(args) + "".join("$%d\r\n%s\r\n" % (len(a), a) for a in args)).encode()


def read_frame(f):
    """Reads one RESP3 frame from the file `f`; returns its bytes."""
    line = f.readline()
    kind, rest = line[:1], line[1:-2]
    if kind in b"$=!":
        return line + f.read(int(rest) + 2)
    if kind in b"*~>":
        return line + b"".join(read_frame(f) for _ in range(int(rest)))
    if kind == b"%":
        return line + b"".join(read_frame(f) for _ in range(2 * int(rest)))
    return line


def main():
    binary = sys.argv[1] if len(sys.argv) > 1 else "valkey-sentinel"
    port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        conf = os.path.join(tmp, "sentinel.conf")
        with open(conf, "w") as c:
            c.write("port %d\nbind 127.0.0.1\n" % port)
        proc = subprocess.Popen([binary, conf], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            for _ in range(100):
                try:
                    s = socket.create_connection(("127.0.0.1", port))
                    break
                except OSError:
                    time.sleep(0.05)
            else:
                sys.exit("valkey-sentinel did not start")
            f = s.makefile("rb")
            s.sendall(command("HELLO", "3"))
            read_frame(f)
            for args, name in [(("COMMAND",), "info.resp"), (("COMMAND", "DOCS"), "docs.resp")]:
                s.sendall(command(*args))
                with open(os.path.join(OUT, name), "wb") as out:
                    out.write(read_frame(f))
        finally:
            proc.terminate()
            proc.wait()


if __name__ == "__main__":
    main()
