#!/usr/bin/env bash
# Ingest benchmark of `ferry serve` (release build): dd's fsync'd write rate, one 1 GiB presigned PUT with curl,
# 8 concurrent 128 MiB boto3 multipart uploads, and the server's peak RSS. Loopback only. Prints one table.
#
#   Benchmarks/ServerIngest/run.sh [ingest_bench.py options]     # e.g. --runs 1, --perf DIR, --keep
#
# FERRY_BIN      ferry executable to benchmark (default <repo>/.build-release/release/ferry, built if missing)
# TMPDIR         parent of the temporary data directory; its filesystem is the one dd measures (default /tmp)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
if [ -d /opt/swift/usr/bin ]; then export PATH="/opt/swift/usr/bin:$PATH"; fi

if [ -n "${FERRY_BIN:-}" ]; then
    bin="$FERRY_BIN"
    [ -x "$bin" ] || { echo "FERRY_BIN=$bin is not an executable" >&2; exit 1; }
else
    bin="$root/.build-release/release/ferry"
    if [ ! -x "$bin" ]; then
        echo "building $bin (release; takes several minutes) ..." >&2
        (cd "$root" && swift build -c release --product ferry --scratch-path "$root/.build-release") >&2
    fi
fi

for tool in curl dd python3; do
    command -v "$tool" >/dev/null || { echo "$tool is required" >&2; exit 1; }
done
python3 -c 'import boto3' 2>/dev/null || { echo "boto3 is required: python3 -m pip install boto3" >&2; exit 1; }

exec python3 "$here/ingest_bench.py" --bin "$bin" "$@"
