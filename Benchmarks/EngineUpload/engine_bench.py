#!/usr/bin/env python3
"""Client-side upload benchmark: Ferry's resumable upload engine (`ferry upload`) against `aws s3 cp` and one
`curl -T` PUT to a presigned URL, all uploading the same random file to a release `ferry serve` on 127.0.0.1.

Run through run.sh (which finds or builds the release binary). For each client it records wall time, throughput,
the client's CPU seconds (user + system) and peak RSS from GNU time, the server's CPU seconds over the same
interval, and the CPU the rest of the machine used meanwhile (other work sharing the cores shows up there). Every
client runs --repeat times, interleaved; before each run the script waits for the machine to be idle, a run during
which other processes used more than --max-other of the CPU is retried and not counted, and the clean run with the
median wall time is reported. The engine runs with its defaults (parts start at 5 MiB and grow up to 16 MiB on a fast
link) and with fixed 5 MiB parts (`--part-size 5MiB`, the defaults before parts adapted). A final run uploads a
larger file both ways to show that peak RSS does not grow with the file. A private copy of the binary is run, so a rebuild meanwhile cannot mix two builds.

MB = 10^6 bytes, MiB = 2^20 bytes. Everything lives in one temporary directory that is deleted at the end.
"""

import argparse
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import bench_common  # noqa: E402
from bench_common import HOST, MB, MIB, cpu_seconds, log, status_kib, stop_server, system_cpu_seconds  # noqa: E402
BUCKET = "bench"
ACCESS_KEY = "AKIAFERRYBENCH000001"
SECRET_KEY = "ferry-engine-benchmark-secret-key-000001"
TIME_BIN = "/usr/bin/time"

# Targets from the brief.
TARGET_VS_AWSCLI = 3.0
TARGET_VS_CURL = 0.9
TARGET_RSS_MIB = 150


# --- machine and process accounting -------------------------------------------------------------------------------


def machine_description():
    model = "unknown"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    mem_kib = 0
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                mem_kib = int(line.split()[1])
    return {
        "cpus": os.cpu_count(),
        "cpu_model": model,
        "memory_gib": mem_kib / (1 << 20),
        "kernel": platform.release(),
    }


def tool_version(argv):
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        return (out.stdout + out.stderr).strip().splitlines()[0]
    except Exception as error:  # noqa: BLE001 - only informational
        return f"unknown ({error})"


def ferry_description(binary):
    """The binary's build time and, when it sits in a git checkout, the commit (read-only git commands)."""
    built = time.strftime("%Y-%m-%d %H:%M", time.localtime(os.path.getmtime(binary)))
    text = f"{binary}, built {built}"
    try:
        directory = os.path.dirname(os.path.realpath(binary))
        commit = subprocess.run(["git", "-C", directory, "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True)
        if commit.returncode == 0:
            dirty = subprocess.run(["git", "-C", directory, "status", "--porcelain", "--untracked-files=no"],
                                   capture_output=True, text=True).stdout.strip()
            text += f", source tree at commit {commit.stdout.strip()}" + (" with uncommitted changes" if dirty else "")
    except FileNotFoundError:
        pass
    return text


# --- server -------------------------------------------------------------------------------------------------------


def start_server(binary, data_directory, log_path):
    process, port = bench_common.start_server(binary, data_directory, ACCESS_KEY, SECRET_KEY, log_path)
    return process, f"http://{HOST}:{port}"


def s3_client(endpoint):
    import boto3
    from botocore.config import Config

    return boto3.client(
        "s3", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id=ACCESS_KEY,
        aws_secret_access_key=SECRET_KEY,
        config=Config(signature_version="s3v4", s3={"addressing_style": "path"}, retries={"max_attempts": 2}))


# --- clients ------------------------------------------------------------------------------------------------------


class Client:
    """One way of uploading the file: a name, how to build its command, and notes for the table."""

    def __init__(self, name, label, build, group="main"):
        self.name = name
        self.label = label
        self.build = build  # (file, key, context) -> (argv, env)
        self.group = group


def engine_client(name, label, extra, group="main"):
    def build(path, key, ctx):
        record_dir = tempfile.mkdtemp(prefix="records-", dir=ctx["work"])
        argv = [ctx["bin"], "upload", path, "--endpoint", ctx["endpoint"], "--bucket", BUCKET, "--key", key,
                "--record-dir", record_dir, "--json"] + extra
        env = dict(ctx["base_env"], FERRY_ACCESS_KEY_ID=ACCESS_KEY, FERRY_SECRET_ACCESS_KEY=SECRET_KEY)
        return argv, env

    return Client(name, label, build, group)


def awscli_client():
    def build(path, key, ctx):
        # The aws script run by its own interpreter (not through a pyenv shim, whose bash would be counted too).
        argv = ctx["aws"] + ["s3", "cp", path, f"s3://{BUCKET}/{key}", "--endpoint-url", ctx["endpoint"],
                             "--no-progress", "--only-show-errors"]
        env = dict(ctx["base_env"], AWS_ACCESS_KEY_ID=ACCESS_KEY, AWS_SECRET_ACCESS_KEY=SECRET_KEY,
                   AWS_DEFAULT_REGION="us-east-1",
                   # No user configuration: awscli's own defaults (8 MiB chunks, 10 concurrent requests).
                   AWS_CONFIG_FILE=os.path.join(ctx["work"], "aws-config-none"),
                   AWS_SHARED_CREDENTIALS_FILE=os.path.join(ctx["work"], "aws-credentials-none"))
        return argv, env

    return Client("awscli", "aws s3 cp (awscli defaults)", build)


def curl_client():
    def build(path, key, ctx):
        url = ctx["s3"].generate_presigned_url(
            "put_object", Params={"Bucket": BUCKET, "Key": key}, ExpiresIn=3600)
        argv = ["curl", "-sS", "--fail", "-o", os.devnull, "-T", path, url]
        return argv, dict(ctx["base_env"])

    return Client("curl", "curl -T, one presigned PUT", build)


# --- one measured run ---------------------------------------------------------------------------------------------


def run_once(client, path, size, ctx, serial, profile_dir=None):
    key = f"{client.name}-{serial}"
    argv, env = client.build(path, key, ctx)
    server_perf = None
    if profile_dir:
        # Client and server sampled separately; the timings of a profiled run are not reported in the table.
        argv = ["perf", "record", "-F", "499", "-g", "-o", os.path.join(profile_dir, f"client-{client.name}.data"),
                "--"] + argv
        server_perf = subprocess.Popen(
            ["perf", "record", "-F", "499", "-g", "-p", str(ctx["server"].pid), "-o",
             os.path.join(profile_dir, f"server-{client.name}.data")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.5)  # let perf attach
    time_out = os.path.join(ctx["work"], f"time-{serial}.txt")
    out_path = os.path.join(ctx["work"], f"out-{client.name}-{serial}.txt")
    server_pid = ctx["server"].pid
    with open(out_path, "wb") as out:
        server_before = sum(cpu_seconds(server_pid))
        busy_before = system_cpu_seconds()[0]
        start = time.monotonic()
        result = subprocess.run([TIME_BIN, "-f", "%e %U %S %M", "-o", time_out] + argv,
                                stdout=out, stderr=subprocess.STDOUT, env=env)
        wall_clock = time.monotonic() - start
        busy_after = system_cpu_seconds()[0]
        server_after = sum(cpu_seconds(server_pid))
    if server_perf is not None:
        server_perf.send_signal(signal.SIGINT)
        server_perf.wait(timeout=120)
    if result.returncode != 0:
        with open(out_path, errors="replace") as f:
            tail = f.read()[-2000:]
        raise RuntimeError(f"{client.name} exited with {result.returncode}:\n{tail}")
    with open(time_out) as f:
        elapsed, user, system, max_rss_kib = f.read().strip().splitlines()[-1].split()
    head = ctx["s3"].head_object(Bucket=BUCKET, Key=key)
    if head["ContentLength"] != size:
        raise RuntimeError(f"{client.name}: object is {head['ContentLength']} bytes, expected {size}")
    ctx["s3"].delete_object(Bucket=BUCKET, Key=key)
    client_cpu = float(user) + float(system)
    server_cpu = server_after - server_before
    busy = busy_after - busy_before
    return {
        "client": client.name,
        "wall": wall_clock,  # monotonic, finer than GNU time's %e
        "time_elapsed": float(elapsed),
        "mbps": size / wall_clock / MB,
        "client_cpu": client_cpu,
        "client_user": float(user),
        "client_sys": float(system),
        "rss_mib": int(max_rss_kib) / 1024,
        "server_cpu": server_cpu,
        "other_cpu": max(0.0, busy - client_cpu - server_cpu),
        "etag": head.get("ETag", ""),
        "output": out_path,
    }


def wait_for_quiet(limit_seconds):
    """Waits until the machine has been nearly idle (< 0.15 CPUs busy) for two 1.5 s windows in a row, at most
    `limit_seconds`; returns whether it got quiet. Other work on shared cores would otherwise skew the timings."""
    deadline = time.monotonic() + limit_seconds
    quiet_windows = 0
    while True:
        before = system_cpu_seconds()[0]
        time.sleep(1.5)
        busy = (system_cpu_seconds()[0] - before) / 1.5
        quiet_windows = quiet_windows + 1 if busy < 0.15 else 0
        if quiet_windows >= 2:
            return True
        if time.monotonic() > deadline:
            return False


def measure(clients, path, size, ctx, repeat):
    """Runs every client `repeat` times, interleaved; returns {name: [runs]}. A run during which other processes
    used more than ctx["max_other"] of the machine is marked unclean and retried (up to ctx["attempts"] in all)."""
    runs = {c.name: [] for c in clients}
    cpus = os.cpu_count()
    # Unmeasured warm-up runs: on this VM the first process to touch memory that was idle for a while pays for it
    # (the first run of a series took up to 2x longer, in system time), which would fall on whichever client is first.
    for warmup in range(ctx["warmup"]):
        for client in clients:
            warm_page_cache(path)
            run = run_once(client, path, size, ctx, f"warmup-{warmup}")
            log(f"  warm-up {client.name:<18} {run['wall']:7.2f} s  {run['mbps']:7.1f} MB/s (not counted)")
    for round_number in range(repeat):
        for client in clients:
            for attempt in range(ctx["attempts"]):
                warm_page_cache(path)
                if ctx["quiet_wait"] > 0 and not wait_for_quiet(ctx["quiet_wait"]):
                    log(f"  the machine did not get quiet within {ctx['quiet_wait']} s; running anyway")
                run = run_once(client, path, size, ctx, f"{round_number}-{attempt}")
                run["clean"] = run["other_cpu"] <= ctx["max_other"] * run["wall"] * cpus
                runs[client.name].append(run)
                log(f"  round {round_number + 1}/{repeat} {client.name:<18} {run['wall']:7.2f} s  "
                    f"{run['mbps']:7.1f} MB/s  client cpu {run['client_cpu']:6.2f} s  rss {run['rss_mib']:6.1f} MiB  "
                    f"server cpu {run['server_cpu']:6.2f} s  other cpu {run['other_cpu']:5.2f} s"
                    f"{'' if run['clean'] else '  (other work ran: not counted, retrying)' if attempt + 1 < ctx['attempts'] else '  (other work ran)'}")
                if run["clean"]:
                    break
    return runs


def profile(clients, path, size, ctx, directory):
    """One extra run per client under `perf record -g` (client and server), with flat reports by symbol."""
    os.makedirs(directory, exist_ok=True)
    for client in clients:
        warm_page_cache(path)
        log(f"  profiling {client.name} (client and server) ...")
        run_once(client, path, size, ctx, "perf", profile_dir=directory)
        for side in ["client", "server"]:
            data = os.path.join(directory, f"{side}-{client.name}.data")
            for sort, suffix in [("dso,symbol", ""), ("dso", "-dso")]:
                report = subprocess.run(
                    ["perf", "report", "--stdio", "--no-children", "--sort", sort, "--percent-limit", "0.7",
                     "-g", "none", "-i", data], capture_output=True, text=True)
                lines = [re.sub(r"\s{2,}", "  ", line.rstrip())[:240] for line in report.stdout.splitlines()
                         if line.strip() and not line.startswith("#")]
                with open(os.path.join(directory, f"{side}-{client.name}{suffix}.txt"), "w") as f:
                    f.write("\n".join(lines) + "\n")
            os.unlink(data)
    log(f"perf reports in {directory}")


def warm_page_cache(path):
    """Reads the file so every client starts with it in the page cache (nobody pays for disk reads)."""
    with open(path, "rb") as f:
        while f.read(8 * MIB):
            pass


def counted(runs):
    """The clean runs, or all of them when none was clean."""
    clean = [r for r in runs if r.get("clean", True)]
    return clean or runs


def median_run(runs):
    ordered = sorted(counted(runs), key=lambda r: r["wall"])
    return ordered[(len(ordered) - 1) // 2]


# --- output -------------------------------------------------------------------------------------------------------


def make_file(path, mib):
    log(f"writing {mib} MiB of random bytes to {path} ...")
    subprocess.run(["head", "-c", f"{mib}M", "/dev/urandom"], stdout=open(path, "wb"), check=True)
    size = os.path.getsize(path)
    if size != mib * MIB:
        raise RuntimeError(f"{path} is {size} bytes, expected {mib * MIB}")
    return size


def row(label, runs):
    m = median_run(runs)
    used = counted(runs)
    clean = sum(1 for r in runs if r.get("clean", True))
    speeds = [r["mbps"] for r in used]
    spread = f"{min(speeds):.0f}–{max(speeds):.0f}" if len(used) > 1 else "–"
    rss = [r["rss_mib"] for r in used]
    return (f"| {label} | {m['wall']:.2f} | {m['mbps']:.0f} | {spread} | {m['client_cpu']:.2f} "
            f"({m['client_user']:.2f}+{m['client_sys']:.2f}) | {m['rss_mib']:.0f} (max {max(rss):.0f}) | "
            f"{m['server_cpu']:.2f} | {m['other_cpu']:.2f} | {clean}/{len(runs)}"
            f"{'' if clean else ' (none clean: all shown)'} |")


TABLE_HEAD = ("| client | wall s | MB/s | MB/s range | client CPU s (user+sys) | client peak RSS MiB | server CPU s | "
              "other CPU s | clean runs |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|")


def verdict(ok):
    return "met" if ok else "MISSED"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bin", required=True, help="ferry executable")
    parser.add_argument("--size-mib", type=int, default=1024, help="size of the main test file (default 1024)")
    parser.add_argument("--big-mib", default="auto",
                        help="size of the engine-only large-file run in MiB; 'auto' = 4096, less if the disk is "
                             "short; 0 skips it")
    parser.add_argument("--repeat", type=int, default=3, help="runs per client; the median is reported (default 3)")
    parser.add_argument("--explore", action="store_true",
                        help="also run engine variants (checksum none, parallel 1/2/8/16, part sizes) to find limits")
    parser.add_argument("--explore-repeat", type=int, default=2, help="runs per explore variant (default 2)")
    parser.add_argument("--warmup", type=int, default=1,
                        help="unmeasured runs of every client before the measured rounds (default 1)")
    parser.add_argument("--max-other", type=float, default=0.10,
                        help="a run counts only if other processes used at most this fraction of the machine's CPU "
                             "meanwhile (default 0.10)")
    parser.add_argument("--attempts", type=int, default=4, help="tries per client and round to get a clean run")
    parser.add_argument("--quiet-wait", type=float, default=120,
                        help="before each run, wait up to this many seconds for the machine to be idle (0: never)")
    parser.add_argument("--perf", metavar="DIR", default=None,
                        help="after the measured rounds, profile one more run of each main client and the server with "
                             "perf record -g; flat reports go to DIR")
    parser.add_argument("--tmp", default=None, help="parent of the temporary directory (default $TMPDIR or /tmp)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = parser.parse_args()

    for tool in ["curl", "head", TIME_BIN]:
        if not shutil.which(tool):
            raise SystemExit(f"{tool} is required (GNU time: apt-get install -y time)")
    aws_path = shutil.which("aws")
    if not aws_path:
        raise SystemExit("awscli is required: python3 -m pip install awscli")
    # Resolve a pyenv shim to the real script so only awscli's own process is measured.
    try:
        real = subprocess.run(["pyenv", "which", "aws"], capture_output=True, text=True)
        if real.returncode == 0 and real.stdout.strip():
            aws_path = real.stdout.strip()
    except FileNotFoundError:
        pass
    with open(aws_path, "rb") as f:
        first = f.readline().decode(errors="replace")
    aws_argv = [first[2:].strip(), aws_path] if first.startswith("#!") and "python" in first else [aws_path]

    machine = machine_description()
    started = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    load_start = open("/proc/loadavg").read().split()[:3]

    work = tempfile.mkdtemp(prefix="ferry-engine-bench-", dir=args.tmp)
    data = os.path.join(work, "data")
    os.makedirs(data)
    # Run a private copy, so a rebuild of the original during the benchmark cannot mix two builds.
    binary_description = ferry_description(args.bin)
    binary = os.path.join(work, "ferry")
    shutil.copy2(args.bin, binary)
    server = None
    try:
        server, endpoint = start_server(binary, data, os.path.join(work, "server.log"))
        log(f"ferry serve pid {server.pid} at {endpoint}; work dir {work}")
        s3 = s3_client(endpoint)
        s3.create_bucket(Bucket=BUCKET)
        ctx = {"bin": binary, "endpoint": endpoint, "max_other": args.max_other, "attempts": max(1, args.attempts),
               "quiet_wait": args.quiet_wait, "warmup": args.warmup, "work": work, "s3": s3, "server": server, "aws": aws_argv,
               "base_env": {k: v for k, v in os.environ.items()
                            if not k.startswith("AWS_") and not k.startswith("FERRY_")}}

        path = os.path.join(work, "file.bin")
        size = make_file(path, args.size_mib)

        engine_default = engine_client(
            "engine", "ferry upload (defaults: parts 5 MiB growing to 16 MiB, 4 parallel, crc32c)", [])
        engine_tuned = engine_client("engine-5x4", "ferry upload --part-size 5MiB (fixed, parallel 4)",
                                     ["--part-size", "5MiB"])
        clients = [engine_default, engine_tuned, awscli_client(), curl_client()]
        log(f"main comparison: {args.repeat} round(s) of {', '.join(c.name for c in clients)}")
        runs = measure(clients, path, size, ctx, args.repeat)

        if args.perf:
            if not shutil.which("perf"):
                raise SystemExit("--perf needs perf (linux-perf / linux-tools)")
            profile(clients, path, size, ctx, os.path.abspath(args.perf))

        explore_runs = {}
        explore_clients = []
        if args.explore:
            variants = [
                ("crc32c-none", "defaults, --checksum none", ["--checksum", "none"]),
                ("16x4", "--part-size 16MiB (fixed, parallel 4)", ["--part-size", "16MiB"]),
                ("p1", "--parallel 1", ["--parallel", "1"]),
                ("p2", "--parallel 2", ["--parallel", "2"]),
                ("p6", "--parallel 6", ["--parallel", "6"]),
                ("p8", "--parallel 8", ["--parallel", "8"]),
                ("p16", "--parallel 16", ["--parallel", "16"]),
                ("16x8", "--part-size 16MiB --parallel 8", ["--part-size", "16MiB", "--parallel", "8"]),
                ("64x4", "--part-size 64MiB (parallel 4)", ["--part-size", "64MiB"]),
                ("16x8-none", "--part-size 16MiB --parallel 8 --checksum none",
                 ["--part-size", "16MiB", "--parallel", "8", "--checksum", "none"]),
            ]
            explore_clients = [engine_client("x-" + n, "ferry upload " + label, extra, group="explore")
                               for n, label, extra in variants]
            log(f"engine variants: {args.explore_repeat} round(s)")
            explore_runs = measure(explore_clients, path, size, ctx, args.explore_repeat)

        os.unlink(path)

        big_mib = 0
        big_runs = {}
        if args.big_mib == "auto":
            free_mib = shutil.disk_usage(work).free // MIB
            # The file and the server's copy both live on this disk; keep a wide margin.
            big_mib = min(4096, max(0, (free_mib - 8192) // 3 // 1024 * 1024))
        else:
            big_mib = int(args.big_mib)
        if big_mib > 0:
            big_path = os.path.join(work, "big.bin")
            big_size = make_file(big_path, big_mib)
            for client in (engine_default, engine_tuned):
                log(f"large file: {client.name}, {big_mib} MiB")
                warm_page_cache(big_path)
                if args.quiet_wait > 0:
                    wait_for_quiet(args.quiet_wait)
                run = run_once(client, big_path, big_size, ctx, "big-" + client.name)
                log(f"  {run['wall']:.2f} s  {run['mbps']:.1f} MB/s  rss {run['rss_mib']:.1f} MiB")
                big_runs[client.name] = run
            os.unlink(big_path)

        server_rss_peak = status_kib(server.pid, "VmHWM")
        load_end = open("/proc/loadavg").read().split()[:3]
    finally:
        if server is not None:
            stop_server(server)
        if args.keep:
            log(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)

    # --- the table ---
    e = median_run(runs["engine"])
    t = median_run(runs["engine-5x4"])
    a = median_run(runs["awscli"])
    c = median_run(runs["curl"])
    lines = []
    lines.append(f"Client engine upload benchmark — {started}")
    lines.append(f"machine: {machine['cpus']} CPUs ({machine['cpu_model']}), {machine['memory_gib']:.1f} GiB RAM, "
                 f"Linux {machine['kernel']}; load average at start {' '.join(load_start)}, at end {' '.join(load_end)}")
    lines.append(f"ferry: {binary_description}")
    lines.append(f"tools: {tool_version(aws_argv + ['--version'])}; {tool_version(['curl', '--version'])}")
    lines.append(f"file: {size // MIB} MiB of random bytes, in the page cache; server: release `ferry serve` on "
                 f"127.0.0.1, data dir on the same disk; {args.repeat} interleaved round(s) per client, median of the "
                 f"clean runs shown (clean: other processes used ≤ {args.max_other:.0%} of the machine's CPU)")
    lines.append("")
    lines.append(TABLE_HEAD)
    lines.append(row(engine_default.label, runs["engine"]))
    lines.append(row(engine_tuned.label, runs["engine-5x4"]))
    lines.append(row("aws s3 cp (defaults: 8 MiB parts, 10 concurrent)", runs["awscli"]))
    lines.append(row("curl -T to a presigned PUT URL (one request)", runs["curl"]))
    if explore_clients:
        lines.append("")
        lines.append(f"Engine variants ({args.explore_repeat} round(s) each, median):")
        lines.append("")
        lines.append(TABLE_HEAD)
        for client in explore_clients:
            lines.append(row(client.label, explore_runs[client.name]))
    lines.append("")
    lines.append("| ratio | defaults | fixed 5 MiB | target | defaults | fixed 5 MiB |")
    lines.append("|---|---:|---:|---|---|---|")
    ra, rt = e["mbps"] / a["mbps"], t["mbps"] / a["mbps"]
    lines.append(f"| engine / awscli throughput | {ra:.2f}× | {rt:.2f}× | ≥ {TARGET_VS_AWSCLI}× | "
                 f"{verdict(ra >= TARGET_VS_AWSCLI)} | {verdict(rt >= TARGET_VS_AWSCLI)} |")
    rc, rtc = e["mbps"] / c["mbps"], t["mbps"] / c["mbps"]
    lines.append(f"| engine / curl throughput | {rc:.2f}× | {rtc:.2f}× | ≥ {TARGET_VS_CURL}× | "
                 f"{verdict(rc >= TARGET_VS_CURL)} | {verdict(rtc >= TARGET_VS_CURL)} |")
    # RSS does not depend on other work: the highest of every run counts.
    er = max(r["rss_mib"] for r in runs["engine"])
    tr = max(r["rss_mib"] for r in runs["engine-5x4"])
    lines.append(f"| engine peak RSS, {size // MIB} MiB file (highest of all runs) | {er:.0f} MiB | {tr:.0f} MiB | "
                 f"< {TARGET_RSS_MIB} MiB | {verdict(er < TARGET_RSS_MIB)} | {verdict(tr < TARGET_RSS_MIB)} |")
    if big_runs:
        bd, bt = big_runs["engine"], big_runs["engine-5x4"]
        lines.append(f"| engine peak RSS, {big_mib} MiB file (1 run each) | {bd['rss_mib']:.0f} MiB | "
                     f"{bt['rss_mib']:.0f} MiB | < {TARGET_RSS_MIB} MiB | {verdict(bd['rss_mib'] < TARGET_RSS_MIB)} | "
                     f"{verdict(bt['rss_mib'] < TARGET_RSS_MIB)} |")
        for name, run in (("defaults", bd), ("fixed 5 MiB", bt)):
            lines.append(f"  {big_mib} MiB, {name}: {run['wall']:.2f} s, {run['mbps']:.0f} MB/s, client CPU "
                         f"{run['client_cpu']:.2f} s, server CPU {run['server_cpu']:.2f} s, other CPU "
                         f"{run['other_cpu']:.2f} s")
    lines.append("")
    lines.append(f"server peak RSS over the whole run: {server_rss_peak / 1024:.0f} MiB" if server_rss_peak else
                 "server peak RSS: unknown")
    lines.append("client CPU and peak RSS from GNU time (%U %S %M) of the client process; server CPU from "
                 "/proc/PID/stat over the same interval; other CPU = whole-machine busy CPU minus client and server "
                 "(other work on the machine). MB = 10^6 bytes.")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
