#!/usr/bin/env python3
"""Ingest benchmark for `ferry serve`: one large presigned PUT, concurrent multipart uploads and many small PUTs at
once (250 of 4 MiB: memory per connection), against the disk's own fsync'd write rate, with the server's peak RSS
sampled throughout.

Run through run.sh (which finds or builds the release binary). Everything happens on 127.0.0.1 and in one temporary
directory that is deleted at the end (unless --keep). MB = 10^6 bytes, MiB = 2^20 bytes.
"""

import argparse
import hashlib
import os
import re
import resource
import secrets
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from bench_common import CLK_TCK, HOST, MB, MIB, cpu_seconds, log, start_server, status_kib, stop_server, system_cpu_seconds  # noqa: E402


# --- measurements of the server process ---------------------------------------------------------------------------


def thread_cpu_seconds(pid):
    """{tid: (thread name, user+system CPU seconds)} of every thread of a process."""
    threads = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                stat = f.read()
        except FileNotFoundError:
            continue
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2 :].split()
        threads[tid] = (name, (int(fields[11]) + int(fields[12])) / CLK_TCK)
    return threads


class RSSSampler(threading.Thread):
    """Samples VmRSS every `interval` seconds and keeps the peak per phase."""

    def __init__(self, pid, interval):
        super().__init__(daemon=True)
        self.pid = pid
        self.interval = interval
        self.phase = "idle"
        self.peaks = {}
        self.samples = {}
        self.stop_event = threading.Event()

    def run(self):
        while not self.stop_event.is_set():
            kib = status_kib(self.pid, "VmRSS")
            if kib is None:
                return
            phase = self.phase
            self.peaks[phase] = max(self.peaks.get(phase, 0), kib)
            self.samples[phase] = self.samples.get(phase, 0) + 1
            self.stop_event.wait(self.interval)

    def stop(self):
        self.stop_event.set()
        self.join()


class Profiler:
    """Optional `perf record` of the server during one phase; writes a flat report by symbol."""

    def __init__(self, enabled, pid, directory, report_directory):
        self.enabled = enabled
        self.pid = pid
        self.directory = directory
        self.report_directory = report_directory
        self.process = None

    def start(self, name):
        if not self.enabled:
            return
        self.name = name
        self.data = os.path.join(self.directory, f"perf-{name}.data")
        self.process = subprocess.Popen(
            ["perf", "record", "-F", "499", "-p", str(self.pid), "-o", self.data],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.5)  # let perf attach

    def stop(self):
        if not self.enabled or self.process is None:
            return
        self.process.send_signal(signal.SIGINT)
        self.process.wait(timeout=60)
        report = subprocess.run(
            ["perf", "report", "--stdio", "--no-children", "--sort", "dso,symbol", "--percent-limit", "0.5",
             "-i", self.data],
            capture_output=True, text=True)
        path = os.path.join(self.report_directory, f"perf-{self.name}.txt")
        with open(path, "w") as f:
            f.write(report.stdout)
        log(f"perf profile of the server during {self.name}: {path}")
        self.process = None


# --- inputs --------------------------------------------------------------------------------------------------------


def make_random_file(path, size, part_size):
    """Writes `size` random bytes; returns (md5 hex of the whole file, list of md5 digests per `part_size` part)."""
    whole = hashlib.md5()
    parts = []
    with open(path, "wb") as f:
        written = 0
        while written < size:
            n = min(part_size, size - written)
            block = os.urandom(n)
            f.write(block)
            whole.update(block)
            parts.append(hashlib.md5(block).digest())
            written += n
        f.flush()
        os.fsync(f.fileno())
    return whole.hexdigest(), parts


def multipart_etag(part_digests):
    return hashlib.md5(b"".join(part_digests)).hexdigest() + f"-{len(part_digests)}"


# --- phases --------------------------------------------------------------------------------------------------------


def measure_dd(directory, mib):
    """Runs dd with conv=fdatasync; returns (MB/s, seconds, dd's CPU seconds, dd's summary line)."""
    path = os.path.join(directory, "dd.tmp")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    result = subprocess.run(
        ["dd", "if=/dev/zero", f"of={path}", "bs=1M", f"count={mib}", "conv=fdatasync"],
        capture_output=True, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    os.unlink(path)
    os.sync()
    if result.returncode != 0:
        raise RuntimeError("dd failed: " + result.stderr)
    # e.g. "1073741824 bytes (1.1 GB, 1.0 GiB) copied, 1.51 s, 711 MB/s"
    match = re.search(r"^(\d+) bytes .* copied, ([\d.]+) s, ([\d.]+) (\w?B)/s", result.stderr, re.M)
    if not match:
        raise RuntimeError("cannot parse dd output: " + result.stderr)
    size, seconds = int(match.group(1)), float(match.group(2))
    return size / seconds / MB, seconds, cpu, match.group(0)


class Phase:
    """Wall time, server CPU and client CPU around one measured phase."""

    def __init__(self, name, label, pid, sampler, profiler):
        """`name` names this phase in output and profiles; `label` groups phases for the RSS peaks."""
        self.name, self.label, self.pid, self.sampler, self.profiler = name, label, pid, sampler, profiler

    def __enter__(self):
        self.profiler.start(self.name)
        self.sampler.phase = self.label
        self.cpu0 = cpu_seconds(self.pid)
        self.children0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        self.self0 = resource.getrusage(resource.RUSAGE_SELF)
        self.system0 = system_cpu_seconds()
        self.threads0 = thread_cpu_seconds(self.pid)
        self.t0 = time.perf_counter()
        return self

    def __exit__(self, *exc):
        self.seconds = time.perf_counter() - self.t0
        cpu1 = cpu_seconds(self.pid)
        system1 = system_cpu_seconds()
        threads1 = thread_cpu_seconds(self.pid)
        children1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        self1 = resource.getrusage(resource.RUSAGE_SELF)
        time.sleep(0.15)  # one more RSS sample after the last response
        self.sampler.phase = "after-" + self.label
        self.profiler.stop()
        self.server_user = cpu1[0] - self.cpu0[0]
        self.server_system = cpu1[1] - self.cpu0[1]
        self.client_cpu = (
            (children1.ru_utime + children1.ru_stime - self.children0.ru_utime - self.children0.ru_stime)
            + (self1.ru_utime + self1.ru_stime - self.self0.ru_utime - self.self0.ru_stime))
        # The busiest server threads: one near 100 % of the wall time is the stage that limits the phase.
        deltas = [(cpu - self.threads0.get(tid, (name, 0.0))[1], name, tid) for tid, (name, cpu) in threads1.items()]
        self.busiest_threads = sorted((d for d in deltas if d[0] > 0), reverse=True)[:4]
        self.system_busy = system1[0] - self.system0[0]
        self.iowait = system1[1] - self.system0[1]
        # Whatever else ran meanwhile (kernel threads doing writeback, other users of the machine); roughly, since
        # interrupt time is charged to whichever process it interrupted.
        self.other_cpu = max(0.0, self.system_busy - self.server_user - self.server_system - self.client_cpu)
        return False

    def describe(self):
        server = self.server_user + self.server_system
        return (f"{self.name}: wall {self.seconds:.2f} s; server CPU {server:.2f} s "
                f"(user {self.server_user:.2f}, sys {self.server_system:.2f}; {server / self.seconds:.2f} cores); "
                f"client CPU {self.client_cpu:.2f} s ({self.client_cpu / self.seconds:.2f} cores); "
                f"everything else {self.other_cpu:.2f} s ({self.other_cpu / self.seconds:.2f} cores); "
                f"iowait {self.iowait:.2f} s of {os.cpu_count()} CPUs; busiest server threads: "
                + ", ".join(f"{name}[{tid}] {cpu:.2f} s ({cpu / self.seconds:.0%})"
                            for cpu, name, tid in self.busiest_threads))


def put_with_curl(client, bucket, key, path):
    url = client.generate_presigned_url("put_object", Params={"Bucket": bucket, "Key": key}, ExpiresIn=3600)
    assert url.startswith(f"http://{HOST}:"), url
    result = subprocess.run(
        ["curl", "-sS", "--noproxy", "*", "-T", path, "-o", "/dev/null", "-w", "%{http_code}", url],
        capture_output=True, text=True)
    if result.returncode != 0 or result.stdout.strip() != "200":
        raise RuntimeError(f"curl PUT failed: exit {result.returncode}, HTTP {result.stdout!r}, {result.stderr}")


def many_puts(client, bucket, path, count):
    """`count` presigned PUTs of one file at once, each by its own curl: as many connections sending bodies at once."""
    urls = [client.generate_presigned_url("put_object", Params={"Bucket": bucket, "Key": f"many-{i}"}, ExpiresIn=3600)
            for i in range(count)]
    processes = [subprocess.Popen(["curl", "-sS", "--noproxy", "*", "-T", path, "-o", "/dev/null", "-w", "%{http_code}", url],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for url in urls]
    failed = [(p.returncode, out, err) for p in processes for out, err in [p.communicate()] if out.strip() != "200"]
    if failed:
        raise RuntimeError(f"{len(failed)} of {count} PUTs failed, e.g. {failed[0]}")


def multipart_uploads(client, bucket, paths, chunk, concurrency):
    from boto3.s3.transfer import TransferConfig

    config = TransferConfig(
        multipart_threshold=chunk, multipart_chunksize=chunk, max_concurrency=concurrency, use_threads=True)
    barrier = threading.Barrier(len(paths))
    errors = []

    def upload(index, path):
        barrier.wait()
        try:
            client.upload_file(path, bucket, f"multipart-{index}", Config=config)
        except Exception as error:  # reported after all threads end
            errors.append(error)

    threads = [threading.Thread(target=upload, args=(i, p)) for i, p in enumerate(paths)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]


# --- main ----------------------------------------------------------------------------------------------------------


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bin", required=True, help="path of the ferry executable (release build)")
    parser.add_argument("--tmp", default=os.environ.get("TMPDIR", "/tmp"),
                        help="parent of the temporary directory (its filesystem is the one measured); default $TMPDIR or /tmp")
    parser.add_argument("--runs", type=int, default=3,
                        help="dd and PUT pairs, interleaved (dd, PUT, dd, PUT, ...); the table shows medians (default 3)")
    parser.add_argument("--put-mib", type=int, default=1024, help="size of the single PUT (default 1024)")
    parser.add_argument("--dd-mib", type=int, default=1024, help="size written by dd (default 1024)")
    parser.add_argument("--uploads", type=int, default=8, help="concurrent multipart uploads (default 8)")
    parser.add_argument("--upload-mib", type=int, default=128, help="size of each multipart upload (default 128)")
    parser.add_argument("--chunk-mib", type=int, default=8, help="multipart part size (default 8)")
    parser.add_argument("--part-concurrency", type=int, default=1,
                        help="parts in flight per upload (TransferConfig.max_concurrency, default 1)")
    parser.add_argument("--many", type=int, default=250, help="PUTs sent at once in the many-PUTs phase (default 250)")
    parser.add_argument("--many-mib", type=int, default=4, help="size of each of those PUTs (default 4)")
    parser.add_argument("--sample-ms", type=int, default=100, help="RSS sampling interval (default 100)")
    parser.add_argument("--perf", metavar="DIR",
                        help="also run `perf record` on the server during each phase (adds overhead) and write "
                             "flat profiles perf-put-N.txt and perf-multipart.txt to DIR")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = parser.parse_args()
    if args.runs < 1:
        parser.error("--runs must be at least 1")

    import boto3
    import botocore
    from botocore.config import Config

    # Loopback only: never let a proxy setting route the requests elsewhere.
    os.environ["NO_PROXY"] = os.environ["no_proxy"] = HOST

    work = tempfile.mkdtemp(prefix="ferry-ingest-", dir=args.tmp)
    data_directory = os.path.join(work, "data")
    source_directory = os.path.join(work, "src")
    os.makedirs(source_directory)
    if args.perf:
        os.makedirs(args.perf, exist_ok=True)
    server = None
    sampler = None
    dds, puts = [], []
    try:
        filesystem = subprocess.run(["df", "-P", work], capture_output=True, text=True).stdout.splitlines()[-1].split()[0]
        log(f"working in {work} (filesystem {filesystem})")

        log(f"writing inputs: {args.put_mib} MiB + {args.uploads} x {args.upload_mib} MiB of random bytes ...")
        put_path = os.path.join(source_directory, "put.bin")
        put_md5, _ = make_random_file(put_path, args.put_mib * MIB, 8 * MIB)
        many_path = os.path.join(source_directory, "many.bin")
        many_md5, _ = make_random_file(many_path, args.many_mib * MIB, args.many_mib * MIB)
        upload_paths, upload_etags = [], []
        for index in range(args.uploads):
            path = os.path.join(source_directory, f"part-{index}.bin")
            _, parts = make_random_file(path, args.upload_mib * MIB, args.chunk_mib * MIB)
            upload_paths.append(path)
            upload_etags.append(multipart_etag(parts))
        os.sync()

        access_key = "BENCH" + secrets.token_hex(8).upper()
        secret_key = secrets.token_urlsafe(30)
        server_log = os.path.join(work, "server.log")
        server, port = start_server(args.bin, data_directory, access_key, secret_key, server_log)
        log(f"ferry serve pid {server.pid} listening on {HOST}:{port}")
        sampler = RSSSampler(server.pid, args.sample_ms / 1000)
        sampler.start()
        profiler = Profiler(bool(args.perf), server.pid, work, args.perf)

        client = boto3.client(
            "s3", endpoint_url=f"http://{HOST}:{port}", region_name="us-east-1",
            aws_access_key_id=access_key, aws_secret_access_key=secret_key,
            config=Config(signature_version="s3v4", s3={"addressing_style": "path"},
                          max_pool_connections=max(10, args.uploads * args.part_concurrency + 2, args.many + 2),
                          retries={"max_attempts": 1}))
        bucket = "ingest-bench"
        client.create_bucket(Bucket=bucket)
        time.sleep(0.3)
        idle_rss = status_kib(server.pid, "VmRSS")

        for run in range(1, args.runs + 1):
            # dd writes next to the server's data directory, on the same filesystem, while the server is idle.
            rate, seconds, cpu, line = measure_dd(work, args.dd_mib)
            dds.append((rate, seconds, cpu))
            log(f"dd {run}/{args.runs}: {line} (dd CPU {cpu:.2f} s)")

            with Phase(f"put-{run}", "put", server.pid, sampler, profiler) as put:
                put_with_curl(client, bucket, "put-object", put_path)
            puts.append(put)
            head = client.head_object(Bucket=bucket, Key="put-object")
            if head["ContentLength"] != args.put_mib * MIB or head["ETag"].strip('"') != put_md5:
                raise RuntimeError(f"PUT object mismatch: {head['ContentLength']} bytes, ETag {head['ETag']}")
            log(f"PUT {run}/{args.runs} ({args.put_mib} MiB, curl -T, presigned): "
                f"{args.put_mib * MIB / put.seconds / MB:.0f} MB/s; " + put.describe())
            # Like dd's file, the object is deleted before the next run.
            client.delete_object(Bucket=bucket, Key="put-object")
            os.sync()

        log(f"{args.uploads} concurrent multipart uploads of {args.upload_mib} MiB "
            f"({args.chunk_mib} MiB parts, {args.part_concurrency} in flight each) ...")
        with Phase("multipart", "multipart", server.pid, sampler, profiler) as multipart:
            multipart_uploads(client, bucket, upload_paths, args.chunk_mib * MIB, args.part_concurrency)
        for index, etag in enumerate(upload_etags):
            head = client.head_object(Bucket=bucket, Key=f"multipart-{index}")
            if head["ContentLength"] != args.upload_mib * MIB or head["ETag"].strip('"') != etag:
                raise RuntimeError(f"multipart-{index} mismatch: {head['ContentLength']} bytes, ETag {head['ETag']}")
        log(multipart.describe())

        log(f"{args.many} PUTs of {args.many_mib} MiB at once (curl -T, presigned) ...")
        with Phase("many", "many", server.pid, sampler, profiler) as many:
            many_puts(client, bucket, many_path, args.many)
        for index in range(args.many):
            head = client.head_object(Bucket=bucket, Key=f"many-{index}")
            if head["ContentLength"] != args.many_mib * MIB or head["ETag"].strip('"') != many_md5:
                raise RuntimeError(f"many-{index} mismatch: {head['ContentLength']} bytes, ETag {head['ETag']}")
        log(many.describe())

        hwm = status_kib(server.pid, "VmHWM")
        sampler.stop()
        exit_code = stop_server(server)
        server = None
    finally:
        if sampler is not None:
            sampler.stop()
        if server is not None:
            stop_server(server)
        if args.keep:
            log(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)

    put_bytes = args.put_mib * MIB
    multipart_bytes = args.uploads * args.upload_mib * MIB
    dd_rates = [rate for rate, _, _ in dds]
    put_rates = [put_bytes / put.seconds / MB for put in puts]
    dd_rate = statistics.median(dd_rates)
    put_rate = statistics.median(put_rates)
    multipart_rate = multipart_bytes / multipart.seconds / MB
    peak_put = max(sampler.peaks.get("put", 0), sampler.peaks.get("after-put", 0)) / 1024
    peak_multipart = max(sampler.peaks.get("multipart", 0), sampler.peaks.get("after-multipart", 0)) / 1024
    many_rate = args.many * args.many_mib * MIB / many.seconds / MB
    peak_many = max(sampler.peaks.get("many", 0), sampler.peaks.get("after-many", 0)) / 1024
    # Each connection sending a body holds the block it fills (1 MiB) and what it has read ahead; a few more MiB
    # are shared by all (the blocks being hashed and written, at most 64).
    many_limit = 3 * args.many + 100
    rss_limit = 200
    of_runs = f", median of {args.runs}" if args.runs > 1 else ""

    def verdict(*checks):
        failed = [name for name, ok in checks if not ok]
        return "yes" if not failed else "no (" + ", ".join(failed) + ")"

    rows = [
        ("Measurement", "MB/s", "x dd", "Peak server RSS", "Target", "Met"),
        (f"disk: dd {args.dd_mib} MiB, conv=fdatasync{of_runs}", f"{dd_rate:.0f}", "1.00", "-", "reference", "-"),
        (f"PUT {args.put_mib} MiB, curl -T presigned{of_runs}", f"{put_rate:.0f}", f"{put_rate / dd_rate:.2f}",
         f"{peak_put:.1f} MiB", f">= 0.70x dd, RSS < {rss_limit} MiB",
         verdict(("rate", put_rate >= 0.7 * dd_rate), ("RSS", peak_put < rss_limit))),
        (f"{args.uploads} x {args.upload_mib} MiB multipart, boto3", f"{multipart_rate:.0f}",
         f"{multipart_rate / dd_rate:.2f}", f"{peak_multipart:.1f} MiB", f"RSS < {rss_limit} MiB",
         verdict(("RSS", peak_multipart < rss_limit))),
        (f"{args.many} x {args.many_mib} MiB PUTs at once, curl", f"{many_rate:.0f}", f"{many_rate / dd_rate:.2f}",
         f"{peak_many:.1f} MiB", f"RSS < {many_limit} MiB", verdict(("RSS", peak_many < many_limit))),
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    right = {1, 2, 3}

    def line(row):
        cells = [cell.rjust(widths[i]) if i in right else cell.ljust(widths[i]) for i, cell in enumerate(row)]
        return "| " + " | ".join(cells) + " |"

    print()
    print(line(rows[0]))
    print("|" + "|".join(("-" * (w + 1) + ":") if i in right else ("-" * (w + 2)) for i, w in enumerate(widths)) + "|")
    for row in rows[1:]:
        print(line(row))
    print()
    print("MB = 10^6 bytes. Runs in order (dd, then PUT):")
    for run, ((rate, seconds, cpu), put, put_run_rate) in enumerate(zip(dds, puts, put_rates), 1):
        print(f"  {run}. dd {rate:.0f} MB/s ({seconds:.2f} s, dd CPU {cpu:.2f} s); "
              f"PUT {put_run_rate:.0f} MB/s = {put_run_rate / rate:.2f}x this dd; {put.describe()}")
    print(f"  multipart {multipart_rate:.0f} MB/s; {multipart.describe()}")
    print(f"  many PUTs {many_rate:.0f} MB/s; {many.describe()}")
    print(f"Server RSS: {idle_rss / 1024:.1f} MiB idle after start; peak of {args.sample_ms} ms samples "
          f"{max(peak_put, peak_multipart, peak_many):.1f} MiB ({sampler.samples.get('put', 0)} samples in PUTs, "
          f"{sampler.samples.get('multipart', 0)} in multipart); kernel high-water mark (VmHWM) {hwm / 1024:.1f} MiB. "
          f"Server exit status after SIGTERM: {exit_code}.")
    print(f"boto3 {boto3.__version__}, botocore {botocore.__version__}, "
          f"request_checksum_calculation={client.meta.config.request_checksum_calculation or 'default'}; "
          f"{os.cpu_count()} CPUs; load average at end {open('/proc/loadavg').read().split()[0]}.")


if __name__ == "__main__":
    main()
