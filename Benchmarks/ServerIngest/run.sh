#!/usr/bin/env bash
# Ingest benchmark of `ferry serve` (release build): dd's fsync'd write rate, one 1 GiB presigned PUT with curl,
# 8 concurrent 128 MiB boto3 multipart uploads, 250 presigned 4 MiB PUTs at once, and the server's peak RSS. Loopback only. Prints one table.
#
#   Benchmarks/ServerIngest/run.sh [ingest_bench.py options]     # e.g. --runs 1, --perf DIR, --keep
#
# FERRY_BIN      ferry executable to benchmark (default <repo>/.build-release/release/ferry, built if missing)
# TMPDIR         parent of the temporary data directory; its filesystem is the one dd measures (default /tmp)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/../find-ferry.sh"
require curl dd python3

exec python3 "$here/ingest_bench.py" --bin "$bin" "$@"
