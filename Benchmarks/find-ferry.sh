# Sourced by the benchmarks' run.sh scripts: sets `bin` to the ferry executable to benchmark (FERRY_BIN, or the
# release build at <repo>/.build-release/release/ferry, built when missing), and `require TOOL...` exits with a
# message when one of the tools is not on PATH.

benchmarks="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$benchmarks/.." && pwd)"
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

require() {
    for tool in "$@"; do
        command -v "$tool" >/dev/null || { echo "$tool is required" >&2; exit 1; }
    done
    python3 -c 'import boto3' 2>/dev/null || { echo "boto3 is required: python3 -m pip install boto3" >&2; exit 1; }
}
