#!/usr/bin/env bash
# Media pipeline benchmark: a generated 60 s 1080p clip through `ferry serve`'s pipeline (upload complete → Normal)
# against the same ffmpeg and ffprobe commands run by hand from a shell script; the ladder encoded in one ffmpeg
# process against one process per definition; and `ferry upload` throughput while a transcode runs against idle.
# Prints one table.
#
#   Benchmarks/Transcode/run.sh [transcode_bench.py options]   # e.g. --seconds 30, --upload-mib 512, --rounds 3
#
# FERRY_BIN   ferry executable to benchmark (default <repo>/.build-release/release/ferry, built if missing)
# TMPDIR      parent of the temporary directory holding the clip, the outputs and the server's data (default /tmp)
#
# Needs python3 with boto3 (for find-ferry.sh's check), ffmpeg and ffprobe.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/../find-ferry.sh"
require python3 ffmpeg ffprobe bash

exec python3 "$here/transcode_bench.py" --bin "$bin" "$@"
