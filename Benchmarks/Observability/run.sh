#!/usr/bin/env bash
# Observability overhead: `ferry upload` of the same file to a release `ferry serve` with tracing exported over OTLP
# and /metrics scraped every second, against one with neither, alternating in one run; prints the ratio.
#
#   Benchmarks/Observability/run.sh [observability_bench.py options]   # e.g. --size-mib 256 --repeat 7
#
# FERRY_BIN   ferry executable to benchmark (default <repo>/.build-release/release/ferry, built if missing)
#
# Needs python3 with boto3.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/../find-ferry.sh"
require python3

exec python3 "$here/observability_bench.py" --bin "$bin" "$@"
