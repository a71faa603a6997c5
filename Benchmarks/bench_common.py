"""What the benchmark scripts share: logging, /proc accounting, and starting and stopping a `ferry serve`."""

import os
import re
import signal
import subprocess
import sys
import threading
import time

MIB = 1 << 20
MB = 1e6
HOST = "127.0.0.1"
CLK_TCK = os.sysconf("SC_CLK_TCK")


def log(message):
    print(message, file=sys.stderr, flush=True)


def status_kib(pid, field):
    """A `kB` field of /proc/PID/status (VmRSS, VmHWM), in KiB, or None once the process is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except (FileNotFoundError, ProcessLookupError):
        return None
    return None


def cpu_seconds(pid):
    """(user, system) CPU seconds of a process (its own threads, not children) from /proc/PID/stat."""
    with open(f"/proc/{pid}/stat") as f:
        stat = f.read()
    fields = stat[stat.rindex(")") + 2 :].split()  # fields after "pid (comm) "; utime is field 14 overall
    return int(fields[11]) / CLK_TCK, int(fields[12]) / CLK_TCK


def system_cpu_seconds():
    """(busy, iowait) CPU seconds of the whole machine, summed over all CPUs, from /proc/stat."""
    with open("/proc/stat") as f:
        values = [int(v) for v in f.readline().split()[1:]]
    # user nice system idle iowait irq softirq steal (guest time is already inside user)
    idle, iowait = values[3], values[4]
    total = sum(values[:8])
    return (total - idle - iowait) / CLK_TCK, iowait / CLK_TCK


def start_server(binary, data_directory, access_key, secret_key, log_path, extra_arguments=()):
    """Starts `ferry serve` on 127.0.0.1 with a free port and the given root key; returns (process, port)."""
    env = dict(os.environ, FERRY_ACCESS_KEY_ID=access_key, FERRY_SECRET_ACCESS_KEY=secret_key)
    server_log = open(log_path, "wb")
    process = subprocess.Popen(
        [binary, "serve", "--data-dir", data_directory, "--host", HOST, "--port", "0", *extra_arguments],
        stdout=subprocess.PIPE, stderr=server_log, env=env)
    pattern = re.compile(r"ferry serve listening on http://127\.0\.0\.1:(\d+)")
    deadline = time.time() + 60
    port = None
    while time.time() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        match = pattern.search(line.decode(errors="replace"))
        if match:
            port = int(match.group(1))
            break
    if port is None:
        process.kill()
        process.wait()
        raise RuntimeError(f"ferry serve did not report a port; see {log_path}")
    # Keep draining stdout so the server never blocks on a full pipe.
    threading.Thread(target=lambda: [None for _ in process.stdout], daemon=True).start()
    return process, port


def stop_server(process):
    """SIGTERM, then SIGKILL after 30 s; returns the exit status."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            log("ferry serve did not stop within 30 s of SIGTERM; killing it")
            process.kill()
            process.wait()
    return process.returncode
