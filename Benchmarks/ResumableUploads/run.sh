#!/usr/bin/env bash
# Resumable uploads against a plain PUT: the same file sent to one release `ferry serve` through tus (tuspy, 64 MiB
# chunks, to a media upload URL; and the same chunks sent by curl), through one IETF draft upload (curl, interop
# version 6, the whole file in the creation request, to a media upload URL) and through one S3 PUT (curl, SigV4),
# alternating in one run; prints the median MB/s of each and each resumable / PUT ratio against the target (>= 0.9).
#
#   Benchmarks/ResumableUploads/run.sh [--size-mib N] [--repeat N] [--chunk-mib N] [--no-warm-up] [--tmp DIR]
#
# FERRY_BIN   ferry executable to benchmark (default <repo>/.build-release/release/ferry, built if missing)
#
# Needs curl 7.75 or later (--aws-sigv4) and python3 with tuspy (PyPI `tuspy`, which brings `requests`).
# Exits 0 when both ratios meet the target, 1 when one does not or a run fails, 64 on a usage error.
set -euo pipefail
shopt -s inherit_errexit   # a failure inside $(…) stops the run too

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

size_mib=1024
repeat=3
chunk_mib=64
warm_up=1
tmp="${TMPDIR:-/tmp}"
target=0.9

usage() { sed -n '2,12p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }

while [ $# -gt 0 ]; do
    case "$1" in
        --size-mib) size_mib="${2:-}"; shift 2 ;;
        --repeat) repeat="${2:-}"; shift 2 ;;
        --chunk-mib) chunk_mib="${2:-}"; shift 2 ;;
        --no-warm-up) warm_up=0; shift ;;
        --tmp) tmp="${2:-}"; shift 2 ;;
        -h | --help) usage; exit 0 ;;
        *) echo "unknown option: $1" >&2; usage >&2; exit 64 ;;
    esac
done
for value in "$size_mib" "$repeat" "$chunk_mib"; do
    if ! [[ "$value" =~ ^[1-9][0-9]*$ ]]; then
        echo "--size-mib, --repeat and --chunk-mib take positive integers" >&2
        exit 64
    fi
done

source "$here/../find-ferry.sh"   # sets bin and root
for tool in curl python3; do
    command -v "$tool" >/dev/null || { echo "$tool is required" >&2; exit 1; }
done
curl_help="$(curl --help all 2>/dev/null || true)"
[[ "$curl_help" == *--aws-sigv4* ]] || { echo "curl 7.75 or later is required (--aws-sigv4)" >&2; exit 1; }
python3 -c 'import requests, tusclient.client' 2>/dev/null \
    || { echo "tuspy is required: python3 -m pip install tuspy" >&2; exit 1; }
client="$root/Tests/FerryTests/Scripts/resumable_client.py"
[ -f "$client" ] || { echo "$client is missing" >&2; exit 1; }

key_id="AKIAFERRYBENCH000003"
secret="ferry-resumable-benchmark-secret-01"
size=$((size_mib * 1048576))
chunk=$((chunk_mib * 1048576))

log() { echo "$*" >&2; }

mkdir -p "$tmp"
work="$(mktemp -d "$tmp/ferry-resumable-bench-XXXXXX")"
server_pid=""
cleanup() {
    if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then
        kill -TERM "$server_pid" 2>/dev/null || true
        for _ in $(seq 1 300); do
            kill -0 "$server_pid" 2>/dev/null || break
            sleep 0.1
        done
        if kill -0 "$server_pid" 2>/dev/null; then
            log "ferry serve did not stop within 30 s of SIGTERM; killing it"
            kill -KILL "$server_pid" 2>/dev/null || true
        fi
        wait "$server_pid" 2>/dev/null || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# A copy, so that a rebuild during the run does not change what is measured.
cp "$bin" "$work/ferry"
file="$work/file.bin"
log "writing $size_mib MiB of random bytes ..."
head -c "$size" /dev/urandom >"$file"

# ferry serve on 127.0.0.1, a free port, a fresh data directory; no media jobs (the file is random bytes, and the
# comparison is of the upload paths).
FERRY_ACCESS_KEY_ID="$key_id" FERRY_SECRET_ACCESS_KEY="$secret" \
    "$work/ferry" serve --data-dir "$work/data" --host 127.0.0.1 --port 0 --media-workers 0 \
    >"$work/server.out" 2>"$work/server.log" &
server_pid=$!
port=""
for _ in $(seq 1 600); do
    port="$(sed -n 's#.*ferry serve listening on http://127\.0\.0\.1:\([0-9][0-9]*\).*#\1#p' "$work/server.out" \
        | head -1)"
    [ -n "$port" ] && break
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.1
done
if [ -z "$port" ]; then
    log "ferry serve did not report a port; its log:"
    tail -n 20 "$work/server.log" >&2 || true
    exit 1
fi
endpoint="http://127.0.0.1:$port"
log "ferry serve at $endpoint (pid $server_pid)"

# Signed requests with the root key: the object API (service s3) and the media API (service ferry).
s3() {
    curl -sS --aws-sigv4 "aws:amz:us-east-1:s3" --user "$key_id:$secret" \
        -H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' "$@"
}
media() {
    curl -sS --aws-sigv4 "aws:amz:us-east-1:ferry" --user "$key_id:$secret" -X POST \
        -H 'Content-Type: application/json' --data "$2" "$endpoint/_ferry/v1/$1"
}
# The stored object's length (HEAD).
stored_size() {
    s3 -I -o /dev/null -D - "$endpoint/$1" | tr -d '\r' | awk 'tolower($1) == "content-length:" { print $2 }'
}
now_ns() { date +%s%N; }
rate() { awk -v bytes="$size" -v ns="$1" 'BEGIN { printf "%.1f", bytes * 1000 / ns }'; }
fail() {
    log "$*"
    log "server log (last lines):"
    tail -n 20 "$work/server.log" >&2 || true
    exit 1
}

status="$(s3 -o "$work/bucket.out" -w '%{http_code}' -X PUT "$endpoint/bench")"
[ "$status" = 200 ] || fail "CreateBucket bench answered $status: $(cat "$work/bucket.out")"

# A video and its upload URL: sets video_id, upload_url and object (<bucket>/<key>).
new_video() {
    local answer fields
    answer="$(media CreateUploadVideo '{"Title":"bench","FileName":"bench.mp4"}')"
    fields="$(printf '%s' "$answer" | python3 -c '
import base64, json, sys
answer = json.load(sys.stdin)
address = json.loads(base64.b64decode(answer["UploadAddress"]))
print(answer["VideoId"])
print(answer.get("ResumableUploadURL", ""))
print(address["Bucket"] + "/" + address["FileName"])
')" || fail "CreateUploadVideo answered: $answer"
    video_id="$(sed -n 1p <<<"$fields")"
    upload_url="$(sed -n 2p <<<"$fields")"
    object="$(sed -n 3p <<<"$fields")"
    if [ -z "$upload_url" ]; then
        fail "$bin predates resumable uploads (CreateUploadVideo answers no ResumableUploadURL): rebuild it" \
            "(delete it and run this script again, or set FERRY_BIN to a newer release build)"
    fi
}
delete_video() {
    media DeleteVideo "{\"VideoIds\":\"$video_id\"}" >/dev/null
}

# Each run prints the client's MB/s on stdout, from its wall time (start to exit). run_tus prints two figures: the
# upload as tuspy timed it (from the creation request to the last append's answer), then the client's wall time,
# which also holds starting Python and importing requests and tuspy.
run_tus() {
    new_video
    local start end
    start="$(now_ns)"
    python3 "$client" tus-upload --endpoint "$upload_url" --file "$file" --chunk "$chunk" >"$work/tus.out" \
        2>"$work/tus.err" || fail "tuspy failed: $(tail -n 5 "$work/tus.err")"
    end="$(now_ns)"
    local offset upload_ns
    read -r offset upload_ns < <(tail -n 1 "$work/tus.out" | python3 -c '
import json, sys
answer = json.load(sys.stdin)
print(answer["offset"], int(answer["seconds"] * 1e9))')
    [ "$offset" = "$size" ] || fail "tus: the upload ended at offset $offset, not $size"
    [ "$(stored_size "$object")" = "$size" ] || fail "tus: $object is not $size bytes"
    delete_video
    echo "$(rate "$upload_ns") $(rate $((end - start)))"
}

# The same tus exchange sent by curl: a creation request, then one curl process sending every chunk as a PATCH on one
# connection, each chunk streamed from its own file (split from the file before the runs): what tus costs the server
# when the client does not first read each chunk into memory, as tuspy does.
run_tus_curl() {
    new_video
    local start end location codes
    start="$(now_ns)"
    location="$(curl -sS -o /dev/null -D - -X POST -H 'Tus-Resumable: 1.0.0' -H "Upload-Length: $size" "$upload_url" \
        | tr -d '\r' | awk 'tolower($1) == "location:" { print $2 }')" || fail "curl (tus creation) failed"
    [ -n "$location" ] || fail "tus creation answered no Location"
    [[ "$location" == http* ]] || location="$endpoint$location"
    local patches=() offset=0 i
    for i in "${!pieces[@]}"; do
        patches+=(--next -sS -o /dev/null -w '%{http_code} ' -X PATCH -T "${pieces[$i]}" -H 'Expect:'
            -H 'Tus-Resumable: 1.0.0' -H "Upload-Offset: $offset" -H 'Content-Type: application/offset+octet-stream'
            "$location")
        offset=$((offset + piece_sizes[i]))
    done
    codes="$(curl "${patches[@]:1}")" || fail "curl (tus PATCHes) failed"
    end="$(now_ns)"
    [[ "$codes" =~ ^(204\ )+$ ]] || fail "tus PATCHes answered: $codes"
    [ "$(stored_size "$object")" = "$size" ] || fail "tus (curl): $object is not $size bytes"
    delete_video
    rate $((end - start))
}

run_ietf() {
    new_video
    local start end status
    start="$(now_ns)"
    status="$(curl -sS -o "$work/ietf.out" -w '%{http_code}' -X POST -T "$file" -H 'Expect:' \
        -H 'Upload-Draft-Interop-Version: 6' -H 'Upload-Complete: ?1' "$upload_url")" \
        || fail "curl (IETF) failed"
    end="$(now_ns)"
    [ "$status" = 200 ] || fail "IETF upload answered $status: $(head -c 500 "$work/ietf.out")"
    local stored
    stored="$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["Size"])' "$work/ietf.out")"
    [ "$stored" = "$size" ] || fail "IETF: the answer says $stored bytes, not $size"
    [ "$(stored_size "$object")" = "$size" ] || fail "IETF: $object is not $size bytes"
    delete_video
    rate $((end - start))
}

run_put() {
    local key="bench/put-$(now_ns)" start end status
    start="$(now_ns)"
    status="$(s3 -o "$work/put.out" -w '%{http_code}' -T "$file" "$endpoint/$key")" \
        || fail "curl (PUT) failed"
    end="$(now_ns)"
    [ "$status" = 200 ] || fail "PUT answered $status: $(head -c 500 "$work/put.out")"
    [ "$(stored_size "$key")" = "$size" ] || fail "PUT: $key is not $size bytes"
    s3 -o /dev/null -X DELETE "$endpoint/$key"
    rate $((end - start))
}

median() {
    printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 }
        END { if (NR % 2) print v[(NR + 1) / 2]; else printf "%.1f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
range() { printf '%s\n' "$@" | sort -g | awk 'NR == 1 { low = $1 } { high = $1 } END { printf "%s–%s", low, high }'; }

start_ns="$(now_ns)"
python3 -c 'import requests, tusclient.client'
startup="$(awk -v ns=$(( $(now_ns) - start_ns )) 'BEGIN { printf "%.2f", ns / 1e9 }')"

# The chunks curl's tus client sends, one file each.
split -b "$chunk" -d -a 5 "$file" "$work/piece."
pieces=("$work"/piece.*)
piece_sizes=()
for piece in "${pieces[@]}"; do piece_sizes+=("$(stat -c %s "$piece")"); done

clients=(tus tus_curl ietf put)
if [ "$warm_up" = 1 ]; then
    for name in "${clients[@]}"; do
        value="$("run_$name")"
        log "warm-up: $name $value MB/s (not counted)"
    done
fi
tus_rates=()
tus_curl_rates=()
tus_wall_rates=()
ietf_rates=()
put_rates=()
for ((round = 0; round < repeat; round++)); do
    # The order rotates each round, so no client always runs first or last.
    for ((i = 0; i < ${#clients[@]}; i++)); do
        name="${clients[$(((round + i) % ${#clients[@]}))]}"
        value="$("run_$name")"
        if [ "$name" = tus ]; then
            read -r upload wall <<<"$value"
            tus_rates+=("$upload")
            tus_wall_rates+=("$wall")
            log "round $((round + 1)): tus $upload MB/s (client wall time: $wall MB/s)"
        else
            eval "${name}_rates+=(\"\$value\")"
            log "round $((round + 1)): $name $value MB/s"
        fi
    done
done

tus="$(median "${tus_rates[@]}")"
tus_wall="$(median "${tus_wall_rates[@]}")"
tus_curl="$(median "${tus_curl_rates[@]}")"
ietf="$(median "${ietf_rates[@]}")"
put="$(median "${put_rates[@]}")"
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", a / b }'; }
verdict() { awk -v r="$1" -v t="$target" 'BEGIN { print (r >= t) ? "met" : "NOT met" }'; }
tus_ratio="$(ratio "$tus" "$put")"
tus_wall_ratio="$(ratio "$tus_wall" "$put")"
tus_curl_ratio="$(ratio "$tus_curl" "$put")"
ietf_ratio="$(ratio "$ietf" "$put")"

echo "file: $size_mib MiB of random bytes, $repeat rounds alternating (the order rotates each round);" \
    "MB = 10^6 bytes; curl: wall time from its start to its exit; tus: the upload as tuspy timed it (creation" \
    "request to the last append's answer), and below it the Python client's wall time"
echo "| client | median MB/s | range |"
echo "|---|---:|---:|"
echo "| tus: tuspy, $chunk_mib MiB chunks, to a media upload URL | $tus | $(range "${tus_rates[@]}") |"
echo "| the same tus runs, the Python client's wall time (start, imports, upload) | $tus_wall |" \
    "$(range "${tus_wall_rates[@]}") |"
echo "| tus: curl, the same $chunk_mib MiB chunks as PATCHes on one connection, each streamed from a file |" \
    "$tus_curl | $(range "${tus_curl_rates[@]}") |"
echo "| IETF draft, interop version 6: curl, the whole file in the creation request | $ietf |" \
    "$(range "${ietf_rates[@]}") |"
echo "| S3 PUT: curl -T, SigV4, UNSIGNED-PAYLOAD | $put | $(range "${put_rates[@]}") |"
echo "tus / PUT: $tus_ratio (target >= $target: $(verdict "$tus_ratio"))"
echo "IETF / PUT: $ietf_ratio (target >= $target: $(verdict "$ietf_ratio"))"
echo "tus client wall time / PUT: $tus_wall_ratio (not the target's measure: it holds the client's start)"
echo "tus with curl / PUT: $tus_curl_ratio (the server's side of tus, without tuspy's reading of each chunk)"
echo "the tus client's start (Python, requests and tuspy imported) took ${startup} s, inside each client wall time"

[ "$(verdict "$tus_ratio")" = met ] && [ "$(verdict "$ietf_ratio")" = met ]
