#!/usr/bin/env bash
# Builds the go-redis driver for tests/clients/java_go.rs into the cache
# (outside the clone) and prints the binary's absolute path on the last line.
# Needs Go and the Go module proxy (modules go to the default module cache).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out_dir="${VALKYRIE_CACHE:-$HOME/.cache/valkyrie}/go-clients"
mkdir -p "$out_dir"
out_dir="$(cd "$out_dir" && pwd)"
cd "$here"
go build -mod=readonly -o "$out_dir/valkyrie-go-clients" . >&2
echo "$out_dir/valkyrie-go-clients"
