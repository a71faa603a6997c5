#!/usr/bin/env python3
"""Scale-out benchmark: Ferry as a gateway in front of SeaweedFS, and 1, 2 and 3 Ferry nodes behind HAProxy.

1. Gateway overhead: the same random file uploaded by Ferry's engine (`ferry upload`) and by `aws s3 cp`, once through
   a release `ferry serve --store s3://…` backed by SeaweedFS and once straight to SeaweedFS's S3 API, same run,
   interleaved; the ratio Ferry / direct for each client (the target is >= 0.8 for the engine).
2. Small objects: 64 KiB PUTs, then GETs of them, from --workers client processes (boto3) for --seconds each, against
   1, 2 and 3 nodes sharing one PostgreSQL catalog and one SeaweedFS behind HAProxy (deploy/haproxy.cfg). For each
   phase: requests per second, and the CPU seconds each component used (Ferry nodes, SeaweedFS, PostgreSQL, HAProxy,
   the clients), which shows where the machine's cores went. Peak RSS of every node is reported.

Everything runs on 127.0.0.1 in one temporary directory, deleted at the end. MB = 10^6 bytes.
"""

import argparse
import multiprocessing
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from bench_common import HOST, MB, MIB, cpu_seconds, log, status_kib, start_server, stop_server  # noqa: E402

ROOT_KEY = "AKIAFERRYSCALE000001"
ROOT_SECRET = "ferry-scale-out-benchmark-secret-000001"
STORE_KEY = "FERRYBENCHSTORE00001"
STORE_SECRET = "ferry-bench-store-secret-0123456789"
REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


def free_port():
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def wait_http(url, seconds=60, ok=lambda status: True):
    import urllib.error
    import urllib.request

    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if ok(response.status):
                    return
        except urllib.error.HTTPError as error:
            if ok(error.code):
                return
        except Exception:
            pass
        time.sleep(0.3)
    raise RuntimeError(f"{url} did not answer")


def s3_client(endpoint, key, secret):
    import boto3
    from botocore.config import Config

    return boto3.client(
        "s3", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id=key, aws_secret_access_key=secret,
        config=Config(signature_version="s3v4", s3={"addressing_style": "path"}, retries={"max_attempts": 5}))


# --- components ---------------------------------------------------------------------------------------------------


def start_seaweedfs(work):
    data = os.path.join(work, "seaweedfs")
    os.makedirs(data)
    config = os.path.join(work, "s3.json")
    with open(config, "w") as f:
        f.write('{"identities":[{"name":"ferry","credentials":[{"accessKey":"%s","secretKey":"%s"}],'
                '"actions":["Admin","Read","Write","List","Tagging"]}]}' % (STORE_KEY, STORE_SECRET))
    ports = [free_port() for _ in range(8)]
    process = subprocess.Popen(
        ["weed", "server", f"-dir={data}", f"-ip={HOST}", f"-ip.bind={HOST}", "-master.telemetry=false",
         f"-master.port={ports[0]}", f"-master.port.grpc={ports[1]}", f"-volume.port={ports[2]}",
         f"-volume.port.grpc={ports[3]}", f"-filer.port={ports[4]}", f"-filer.port.grpc={ports[5]}", "-s3",
         f"-s3.port={ports[6]}", f"-s3.port.grpc={ports[7]}", "-s3.port.iceberg=0", "-s3.port.lance=0",
         f"-s3.config={config}", "-master.volumeSizeLimitMB=256", "-volume.max=0"],
        stdout=open(os.path.join(work, "weed.log"), "wb"), stderr=subprocess.STDOUT)
    endpoint = f"http://{HOST}:{ports[6]}"
    client = s3_client(endpoint, STORE_KEY, STORE_SECRET)
    deadline = time.time() + 90
    while True:
        try:
            client.create_bucket(Bucket="ready")
        except client.exceptions.BucketAlreadyOwnedByYou:
            pass
        except Exception:
            if time.time() > deadline:
                raise RuntimeError("SeaweedFS did not start")
            time.sleep(0.5)
            continue
        try:
            client.put_object(Bucket="ready", Key="probe", Body=b"ok")
            break
        except Exception:
            if time.time() > deadline:
                raise RuntimeError("SeaweedFS does not store objects")
            time.sleep(0.5)
    return process, endpoint


def start_postgres(work):
    binaries = None
    for version in sorted(os.listdir("/usr/lib/postgresql"), key=int, reverse=True) if os.path.isdir("/usr/lib/postgresql") else []:
        if os.path.exists(f"/usr/lib/postgresql/{version}/bin/initdb"):
            binaries = f"/usr/lib/postgresql/{version}/bin"
            break
    if binaries is None:
        raise RuntimeError("PostgreSQL is not installed (apt-get install postgresql)")
    directory = os.path.join(work, "pg")
    os.makedirs(directory)
    os.chmod(work, 0o755)  # the postgres account must reach its directory
    prefix = []
    if os.getuid() == 0:
        shutil.chown(directory, "postgres")
        prefix = ["runuser", "-u", "postgres", "--"]
    subprocess.run(prefix + [f"{binaries}/initdb", "-D", f"{directory}/data", "-U", "ferry", "--auth=trust",
                             "--no-sync"], check=True, stdout=subprocess.DEVNULL)
    port = free_port()
    options = f"-p {port} -k {directory} -c listen_addresses={HOST} -c max_connections=300"
    subprocess.run(prefix + [f"{binaries}/pg_ctl", "-D", f"{directory}/data", "-l", f"{directory}/log", "-o", options,
                             "-w", "start"], check=True, stdout=subprocess.DEVNULL)
    subprocess.run(prefix + [f"{binaries}/createdb", "-h", HOST, "-p", str(port), "-U", "ferry", "ferry"], check=True)

    def stop():
        subprocess.run(prefix + [f"{binaries}/pg_ctl", "-D", f"{directory}/data", "-m", "immediate", "stop"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    with open(f"{directory}/data/postmaster.pid") as f:
        pid = int(f.readline())
    return pid, f"postgres://ferry@{HOST}:{port}/ferry", stop


def start_haproxy(work, node_ports):
    with open(os.path.join(REPO, "deploy", "haproxy.cfg")) as f:
        template = f.read().splitlines()
    port, stats = free_port(), free_port()
    lines, section, written = [], "", False
    for line in template:
        stripped = line.strip()
        if line and not line.startswith(" ") and not stripped.startswith("#"):
            section = stripped
        if stripped.startswith("bind "):
            lines.append(f"    bind {HOST}:{stats if section.startswith('listen stats') else port}")
        elif stripped.startswith("server "):
            if not written:
                written = True
                lines += [f"    server node{i + 1} {HOST}:{p} check inter 1s fall 2 rise 1" for i, p in enumerate(node_ports)]
        else:
            lines.append(line)
    config = os.path.join(work, f"haproxy-{len(node_ports)}.cfg")
    with open(config, "w") as f:
        f.write("\n".join(lines) + "\n")
    process = subprocess.Popen(["haproxy", "-f", config, "-db"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    endpoint = f"http://{HOST}:{port}"
    wait_http(endpoint + "/_ferry/health", ok=lambda status: status == 200)
    return process, endpoint


def process_cpu(pids):
    total = 0.0
    for pid in pids:
        try:
            user, system = cpu_seconds(pid)
            total += user + system
        except (FileNotFoundError, ProcessLookupError):
            pass
    return total


def postgres_cpu(postmaster):
    """CPU seconds of the postmaster and its backends (children)."""
    pids = [postmaster]
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    stat = f.read()
                if int(stat[stat.rindex(")") + 2:].split()[1]) == postmaster:
                    pids.append(int(entry))
            except (FileNotFoundError, ProcessLookupError, ValueError):
                pass
    return process_cpu(pids)


# --- 1. gateway overhead ------------------------------------------------------------------------------------------


def timed(argv, env):
    start = time.monotonic()
    subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL)
    return time.monotonic() - start


def gateway_overhead(args, work, seaweed_endpoint):
    path = os.path.join(work, "big.bin")
    with open(path, "wb") as f:
        for _ in range(args.size_mib):
            f.write(os.urandom(MIB))
    size = args.size_mib * MIB
    data = os.path.join(work, "gateway")
    server, port = start_server(
        args.bin, data, ROOT_KEY, ROOT_SECRET, os.path.join(work, "gateway.log"),
        ["--store", "s3://ferry-gateway/", "--store-endpoint", seaweed_endpoint])
    ferry = f"http://{HOST}:{port}"
    s3_client(ferry, ROOT_KEY, ROOT_SECRET).create_bucket(Bucket="bench")
    s3_client(seaweed_endpoint, STORE_KEY, STORE_SECRET).create_bucket(Bucket="bench")
    aws = [sys.executable, shutil.which("aws")]
    base = dict(os.environ, AWS_DEFAULT_REGION="us-east-1", AWS_CONFIG_FILE=os.path.join(work, "none"),
                AWS_SHARED_CREDENTIALS_FILE=os.path.join(work, "none"))
    targets = {"ferry": (ferry, ROOT_KEY, ROOT_SECRET), "direct": (seaweed_endpoint, STORE_KEY, STORE_SECRET)}
    results = {}
    for round_ in range(args.repeat):
        for client in ("engine", "awscli"):
            for target, (endpoint, key, secret) in targets.items():
                name = f"{client}-{target}-{round_}"
                if client == "engine":
                    argv = [args.bin, "upload", path, "--endpoint", endpoint, "--bucket", "bench", "--key", name,
                            "--record-dir", tempfile.mkdtemp(dir=work), "--json"]
                    env = dict(base, FERRY_ACCESS_KEY_ID=key, FERRY_SECRET_ACCESS_KEY=secret)
                else:
                    argv = aws + ["s3", "cp", path, f"s3://bench/{name}", "--endpoint-url", endpoint, "--no-progress",
                                  "--only-show-errors"]
                    env = dict(base, AWS_ACCESS_KEY_ID=key, AWS_SECRET_ACCESS_KEY=secret)
                seconds = timed(argv, env)
                results.setdefault((client, target), []).append(size / seconds / MB)
                log(f"  {name}: {size / seconds / MB:.0f} MB/s")
    gateway_rss = status_kib(server.pid, "VmHWM")
    stop_server(server)
    os.remove(path)
    return results, gateway_rss


# --- 2. small objects ---------------------------------------------------------------------------------------------


def small_worker(endpoint, worker, seconds, mode, count_queue, stored):
    """PUTs (keys w<worker>/0, 1, … up to 2000, then over again) or GETs of the keys the same worker stored."""
    client = s3_client(endpoint, ROOT_KEY, ROOT_SECRET)
    body = os.urandom(64 * 1024)
    done = 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        key = f"w{worker}/{done % (2000 if mode == 'put' else max(1, min(stored, 2000)))}"
        if mode == "put":
            client.put_object(Bucket="small", Key=key, Body=body)
        else:
            client.get_object(Bucket="small", Key=key)["Body"].read()
        done += 1
    count_queue.put((worker, done))


def small_objects(args, endpoint, components):
    results = {}
    stored = {}
    for mode in ("put", "get"):
        queue = multiprocessing.Queue()
        before = {name: measure() for name, measure in components.items()}
        workers = [multiprocessing.Process(target=small_worker,
                                           args=(endpoint, w, args.seconds, mode, queue, stored.get(w, 0)))
                   for w in range(args.workers)]
        start = time.monotonic()
        client_cpu_before = os.times()
        for worker in workers:
            worker.start()
        counts = dict(queue.get() for _ in workers)
        total = sum(counts.values())
        if mode == "put":
            stored = counts
        for worker in workers:
            worker.join()
        elapsed = time.monotonic() - start
        after = {name: measure() for name, measure in components.items()}
        times = os.times()
        client_cpu = (times.children_user - client_cpu_before.children_user) + (
            times.children_system - client_cpu_before.children_system)
        cpu = {name: after[name] - before[name] for name in components}
        cpu["clients"] = client_cpu
        results[mode] = (total / elapsed, cpu, elapsed)
    return results


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bin", required=True)
    parser.add_argument("--size-mib", type=int, default=1024, help="0 skips the gateway overhead part")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--workers", type=int, default=6)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--nodes", default="1,2,3")
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="ferry-scaleout-")
    os.environ["FERRY_STORE_ACCESS_KEY_ID"] = STORE_KEY
    os.environ["FERRY_STORE_SECRET_ACCESS_KEY"] = STORE_SECRET
    seaweed, seaweed_endpoint = start_seaweedfs(work)
    stop_postgres = None
    try:
        overhead, gateway_rss = {}, None
        if args.size_mib > 0:
            log(f"SeaweedFS at {seaweed_endpoint}; gateway overhead with {args.size_mib} MiB, {args.repeat} rounds")
            overhead, gateway_rss = gateway_overhead(args, work, seaweed_endpoint)
        postmaster, catalog, stop_postgres = start_postgres(work)
        rows = []
        for count in [int(n) for n in args.nodes.split(",")]:
            nodes = []
            for index in range(count):
                process, port = start_server(
                    args.bin, os.path.join(work, f"n{count}-{index}"), ROOT_KEY, ROOT_SECRET,
                    os.path.join(work, f"n{count}-{index}.log"),
                    ["--store", "s3://ferry-cluster/", "--store-endpoint", seaweed_endpoint, "--catalog", catalog])
                nodes.append((process, port))
            proxy, endpoint = start_haproxy(work, [port for _, port in nodes])
            try:
                s3_client(endpoint, ROOT_KEY, ROOT_SECRET).create_bucket(Bucket="small")
            except Exception:
                pass
            components = {
                "ferry": lambda: process_cpu([p.pid for p, _ in nodes]),
                "seaweedfs": lambda: process_cpu([seaweed.pid]),
                "postgres": lambda: postgres_cpu(postmaster),
                "haproxy": lambda: process_cpu([proxy.pid]),
            }
            log(f"small objects with {count} node(s) ...")
            result = small_objects(args, endpoint, components)
            rss = [status_kib(p.pid, "VmHWM") for p, _ in nodes]
            rows.append((count, result, rss))
            proxy.kill()
            proxy.wait()
            for process, _ in nodes:
                stop_server(process)
    finally:
        if stop_postgres:
            stop_postgres()
        seaweed.kill()
        seaweed.wait()
        shutil.rmtree(work, ignore_errors=True)

    if overhead:
        print(f"\n## Gateway overhead: {args.size_mib} MiB, median of {args.repeat} (MB/s)\n")
        print("| client | through Ferry | straight to SeaweedFS | Ferry / direct |")
        print("|---|---|---|---|")
        for client in ("engine", "awscli"):
            ferry = statistics.median(overhead[(client, "ferry")])
            direct = statistics.median(overhead[(client, "direct")])
            print(f"| {client} | {ferry:.0f} | {direct:.0f} | {ferry / direct:.2f} |")
        print(f"\nGateway node peak RSS: {gateway_rss / 1024:.0f} MiB")
    print(f"\n## 64 KiB objects, {args.workers} boto3 client processes, {args.seconds:.0f} s per phase\n")
    print("| nodes | PUT/s | GET/s | CPU-s per 1000 PUTs: ferry / seaweedfs / postgres / haproxy / clients | node peak RSS (MiB) |")
    print("|---|---|---|---|---|")
    for count, result, rss in rows:
        put_rate, put_cpu, put_elapsed = result["put"]
        get_rate, _, _ = result["get"]
        per = 1000 / (put_rate * put_elapsed)
        shares = " / ".join(f"{put_cpu[name] * per:.2f}" for name in ("ferry", "seaweedfs", "postgres", "haproxy", "clients"))
        print(f"| {count} | {put_rate:.0f} | {get_rate:.0f} | {shares} | {', '.join(f'{r / 1024:.0f}' for r in rss)} |")


if __name__ == "__main__":
    main()
