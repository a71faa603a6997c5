#!/usr/bin/env python3
"""Observability overhead: the same file uploaded by `ferry upload` (the engine) to two release `ferry serve` on
127.0.0.1 in one run, one with tracing off and nothing scraping it, the other exporting every span over OTLP/HTTP
(`--otel-endpoint`, to a sink in this script that answers 200 to every export) while a scraper reads its `/metrics`
every second, as Prometheus would. Runs alternate between the two (the order flips every round); the median
throughput of each is reported with their ratio. Target: observed / plain >= 0.97.

Ferry's metrics registry is always on, so both servers count their requests; what the comparison adds on one side is
tracing (a span per request and per catalog and blob call) and scraping.

Run through run.sh (which finds or builds the release binary).
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import bench_common  # noqa: E402
from bench_common import HOST, MB, MIB, log, stop_server  # noqa: E402

BUCKET = "bench"
ACCESS_KEY = "AKIAFERRYBENCH000002"
SECRET_KEY = "ferry-observability-benchmark-secret-01"
TARGET = 0.97


class Sink(BaseHTTPRequestHandler):
    """An OTLP/HTTP endpoint that reads every export and answers 200 with an empty response."""

    exports = 0
    bytes = 0

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        Sink.exports += 1
        Sink.bytes += len(body)
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


def scrape(endpoint, stop, counts):
    while not stop.is_set():
        try:
            with urllib.request.urlopen(endpoint + "/metrics", timeout=5) as reply:
                reply.read()
                counts[0] += 1
        except OSError:
            counts[1] += 1
        stop.wait(1.0)


def make_bucket(endpoint):
    import boto3
    from botocore.config import Config

    client = boto3.client(
        "s3", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id=ACCESS_KEY,
        aws_secret_access_key=SECRET_KEY, config=Config(signature_version="s3v4", s3={"addressing_style": "path"}))
    client.create_bucket(Bucket=BUCKET)
    return client


def upload(binary, path, endpoint, key, work, s3, size):
    records = tempfile.mkdtemp(prefix="records-", dir=work)
    env = dict(os.environ, FERRY_ACCESS_KEY_ID=ACCESS_KEY, FERRY_SECRET_ACCESS_KEY=SECRET_KEY)
    start = time.monotonic()
    subprocess.run(
        [binary, "upload", path, "--endpoint", endpoint, "--bucket", BUCKET, "--key", key, "--record-dir", records,
         "--json"], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    wall = time.monotonic() - start
    if s3.head_object(Bucket=BUCKET, Key=key)["ContentLength"] != size:
        raise RuntimeError(f"{key}: wrong size")
    s3.delete_object(Bucket=BUCKET, Key=key)
    shutil.rmtree(records, ignore_errors=True)
    return size / wall / MB


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bin", required=True, help="ferry executable")
    parser.add_argument("--size-mib", type=int, default=1024, help="size of the file (default 1024)")
    parser.add_argument("--repeat", type=int, default=5, help="uploads to each server (default 5)")
    parser.add_argument("--tmp", default=None, help="parent of the temporary directory (default $TMPDIR or /tmp)")
    options = parser.parse_args()

    work = tempfile.mkdtemp(prefix="ferry-observability-bench-", dir=options.tmp)
    servers = []
    stop = threading.Event()
    try:
        binary = os.path.join(work, "ferry")
        shutil.copy2(options.bin, binary)
        path = os.path.join(work, "file.bin")
        size = options.size_mib * MIB
        with open(path, "wb") as f:
            for _ in range(options.size_mib):
                f.write(os.urandom(MIB))

        sink = ThreadingHTTPServer((HOST, 0), Sink)
        threading.Thread(target=sink.serve_forever, daemon=True).start()
        sink_url = f"http://{HOST}:{sink.server_address[1]}"

        endpoints = {}
        for name, extra in [("plain", []), ("observed", ["--otel-endpoint", sink_url])]:
            process, port = bench_common.start_server(
                binary, os.path.join(work, name), ACCESS_KEY, SECRET_KEY, os.path.join(work, name + ".log"),
                extra_arguments=extra)
            servers.append(process)
            endpoints[name] = f"http://{HOST}:{port}"
        clients = {name: make_bucket(endpoint) for name, endpoint in endpoints.items()}
        scrapes = [0, 0]
        threading.Thread(target=scrape, args=(endpoints["observed"], stop, scrapes), daemon=True).start()

        rates = {"plain": [], "observed": []}
        upload(binary, path, endpoints["plain"], "warm-up", work, clients["plain"], size)
        for round_number in range(options.repeat):
            order = ["plain", "observed"] if round_number % 2 == 0 else ["observed", "plain"]
            for name in order:
                rate = upload(binary, path, endpoints[name], f"{name}-{round_number}", work, clients[name], size)
                rates[name].append(rate)
                log(f"round {round_number + 1}: {name} {rate:.0f} MB/s")
        time.sleep(2)  # the last batch of spans

        plain, observed = statistics.median(rates["plain"]), statistics.median(rates["observed"])
        ratio = observed / plain
        print(f"file: {options.size_mib} MiB, {options.repeat} uploads to each server, alternating")
        print("| server | median MB/s | range |")
        print("|---|---:|---:|")
        for name in ["plain", "observed"]:
            print(f"| {name} | {statistics.median(rates[name]):.0f} | {min(rates[name]):.0f}–{max(rates[name]):.0f} |")
        print(f"observed / plain: {ratio:.3f} (target >= {TARGET}: {'met' if ratio >= TARGET else 'NOT met'})")
        print(f"the observed server exported {Sink.exports} span batches ({Sink.bytes} bytes) and answered "
              f"{scrapes[0]} scrapes ({scrapes[1]} failed)")
        return 0 if ratio >= TARGET and Sink.exports > 0 else 1
    finally:
        stop.set()
        for process in servers:
            stop_server(process)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
