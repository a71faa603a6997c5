#!/usr/bin/env python3
"""Download benchmark: many clients fetching one large object at full speed, from a release `ferry serve` and from
SeaweedFS's S3 API (the peer), same run, rounds interleaved.

Each round starts --clients curl processes at once, each downloading the --size-mib object through a presigned URL to
/dev/null; the round's rate is the bytes of every download over the round's wall time. Throughout, each server's RSS
is sampled: its peak during the rounds, and what it still holds --settle seconds after the last round (memory a
server keeps after a burst of downloads is memory the next burst of uploads cannot have). Every download must answer
200 with the object's size, or the run fails.

Everything runs on 127.0.0.1 in one temporary directory, deleted at the end. MB = 10^6 bytes, MiB = 2^20 bytes.
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "ScaleOut"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "ServerIngest"))
from bench_common import MB, MIB, log, start_server, status_kib, stop_server  # noqa: E402
from ingest_bench import RSSSampler  # noqa: E402
from scaleout_bench import STORE_KEY, STORE_SECRET, s3_client, start_seaweedfs  # noqa: E402

ROOT_KEY = "AKIAFERRYEGRESS00001"
ROOT_SECRET = "ferry-egress-benchmark-secret-00000001"


def download_round(url, clients, size):
    """Starts `clients` curl downloads of `url` at once; returns the round's MB/s. Fails unless every one got the
    whole object."""
    started = time.monotonic()
    processes = [
        subprocess.Popen(["curl", "-sS", "-o", "/dev/null", "-w", "%{http_code} %{size_download}", url],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for _ in range(clients)]
    outcomes = [process.communicate() for process in processes]
    elapsed = time.monotonic() - started
    for out, err in outcomes:
        status, _, received = out.decode().partition(" ")
        if status != "200" or int(received or 0) != size:
            raise RuntimeError(f"a download answered {status} with {received} bytes: {err.decode().strip()}")
    return clients * size / elapsed / MB


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bin", required=True, help="the ferry executable")
    parser.add_argument("--size-mib", type=int, default=64, help="object size (default 64)")
    parser.add_argument("--clients", type=int, default=20, help="concurrent downloads per round (default 20)")
    parser.add_argument("--rounds", type=int, default=6, help="rounds per server (default 6)")
    parser.add_argument("--settle", type=float, default=5, help="seconds after the last round before RSS is read")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = parser.parse_args()

    work = tempfile.mkdtemp(prefix="ferry-egress-")
    size = args.size_mib * MIB
    source = os.path.join(work, "object.bin")
    with open(source, "wb") as f:
        for _ in range(args.size_mib):
            f.write(os.urandom(MIB))
    ferry = seaweed = None
    try:
        seaweed, seaweed_endpoint = start_seaweedfs(work)
        ferry, port = start_server(args.bin, os.path.join(work, "ferry-data"), ROOT_KEY, ROOT_SECRET,
                                   os.path.join(work, "ferry.log"))
        targets = {
            "ferry": (ferry.pid, s3_client(f"http://127.0.0.1:{port}", ROOT_KEY, ROOT_SECRET)),
            "seaweedfs": (seaweed.pid, s3_client(seaweed_endpoint, STORE_KEY, STORE_SECRET)),
        }
        urls = {}
        for name, (_, client) in targets.items():
            client.create_bucket(Bucket="egress")
            client.upload_file(source, "egress", "object.bin")
            urls[name] = client.generate_presigned_url(
                "get_object", Params={"Bucket": "egress", "Key": "object.bin"}, ExpiresIn=3600)
        before = {name: status_kib(pid, "VmRSS") for name, (pid, _) in targets.items()}
        samplers = {name: RSSSampler(pid, 0.05) for name, (pid, _) in targets.items()}
        for sampler in samplers.values():
            sampler.start()
        rates = {name: [] for name in targets}
        log(f"{args.rounds} rounds of {args.clients} concurrent {args.size_mib} MiB downloads per server, interleaved")
        for round_number in range(args.rounds):
            for name in (targets if round_number % 2 == 0 else reversed(list(targets))):
                rates[name].append(download_round(urls[name], args.clients, size))
                log(f"  round {round_number + 1} {name}: {rates[name][-1]:.0f} MB/s")
        time.sleep(args.settle)
        after = {name: status_kib(pid, "VmRSS") for name, (pid, _) in targets.items()}
        for sampler in samplers.values():
            sampler.stop()

        print(f"\n{args.clients} concurrent downloads of a {args.size_mib} MiB object, {args.rounds} rounds per server "
              f"(presigned GET, curl)\n")
        print("| server | MB/s median | MB/s range | RSS before (MiB) | peak RSS (MiB) | RSS after (MiB) |")
        print("|---|---|---|---|---|---|")
        for name in targets:
            print(f"| {name} | {statistics.median(rates[name]):.0f} | {min(rates[name]):.0f}–{max(rates[name]):.0f} | "
                  f"{before[name] / 1024:.0f} | {max(samplers[name].peaks.values()) / 1024:.0f} | {after[name] / 1024:.0f} |")
        ratio = statistics.median(rates["ferry"]) / statistics.median(rates["seaweedfs"])
        print(f"\nrate ratio ferry / seaweedfs: {ratio:.2f}")
        print(f"RSS held after the rounds, ferry / seaweedfs: {after['ferry'] / after['seaweedfs']:.2f} "
              "(SeaweedFS runs master, volume, filer and S3 gateway in one process)")
    finally:
        if ferry:
            stop_server(ferry)
        if seaweed:
            seaweed.kill()
            seaweed.wait()
        if args.keep:
            log(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
