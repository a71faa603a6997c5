#!/usr/bin/env bash
# Download benchmark of `ferry serve` (release build) against SeaweedFS's S3 API: rounds of concurrent presigned GETs
# of one large object from each, interleaved; rates, peak RSS and the RSS each server holds afterwards. Loopback only.
#
#   Benchmarks/ServerEgress/run.sh [egress_bench.py options]     # e.g. --clients 20 --size-mib 64 --rounds 6
#
# FERRY_BIN      ferry executable to benchmark (default <repo>/.build-release/release/ferry, built if missing)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/../find-ferry.sh"
require curl weed python3

exec python3 "$here/egress_bench.py" --bin "$bin" "$@"
