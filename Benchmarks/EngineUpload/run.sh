#!/usr/bin/env bash
# Client-engine upload benchmark: `ferry upload` (defaults, and fixed 5 MiB parts) against `aws s3 cp` and one
# `curl -T` presigned PUT, same 1 GiB random file, to a release `ferry serve` on 127.0.0.1; then the engine alone
# with a 4 GiB file (less if the disk is short) to show its peak RSS does not grow with the file. Prints one table.
#
#   Benchmarks/EngineUpload/run.sh [engine_bench.py options]   # e.g. --explore, --repeat 5, --size-mib 256, --big-mib 0
#
# FERRY_BIN   ferry executable to benchmark (default <repo>/.build-release/release/ferry, built if missing)
# TMPDIR      parent of the temporary directory holding the test files and the server's data (default /tmp)
#
# Needs python3 with boto3, awscli (`aws`), curl and GNU time (/usr/bin/time; apt-get install -y time).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/../find-ferry.sh"
require curl head python3 aws
[ -x /usr/bin/time ] || { echo "GNU time is required: apt-get install -y time" >&2; exit 1; }

exec python3 "$here/engine_bench.py" --bin "$bin" "$@"
