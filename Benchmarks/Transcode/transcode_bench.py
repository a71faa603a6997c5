#!/usr/bin/env python3
"""Media pipeline benchmark for `ferry serve`.

1. Pipeline against hand: a generated clip (default 60 s of 1080p30 with sound) is uploaded with `ferry upload --wait
   --json` to a release `ferry serve` (one media worker, debug log); the time from the upload's `completed` event to
   its `processed` event is the pipeline's (probe, cover, ladder, HLS packaging, measuring each output, storing every
   file, publishing). The server's debug log names every ffmpeg and ffprobe command it ran; the same commands are then
   replayed by hand from a shell script (each job's copy of the source, the same arguments), and timed. Overhead =
   pipeline / hand - 1 (target <= 5 %).
2. Ladder in one process against one process per definition: the pipeline's ladder command (decode once, split), and
   one ffmpeg per definition built from the same output arguments, each decoding the source again.
3. Uploads while a transcode runs: `ferry upload --bucket` of a random file (default 1 GiB), idle, then one after
   another for as long as the server processes the clip, then idle again; ratio = busy / idle MB/s (target >= 0.7),
   idle being the median of the rounds before and after the busy ones (the disk is not the same after a hundred
   uploads, so idle rounds at both ends take that drift out of the ratio), and the clip's processing time under those
   uploads against idle (target <= 3x).
4. Time to first playable: from the upload's `completed` event to the first status with `Playable` (the first stream
   published while the ladder is still made), against the time to complete (target <= 25 %).

Run through run.sh. Everything happens on 127.0.0.1 and in one temporary directory, deleted at the end (unless
--keep). MB = 10^6 bytes.
"""

import argparse
import json
import os
import re
import resource
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from bench_common import HOST, MB, MIB, log, start_server, stop_server  # noqa: E402

ACCESS_KEY = "FKIABENCHTRANSCODE"
SECRET_KEY = "bench-transcode-secret-0123456789"


def make_clip(path, seconds):
    """A 1080p30 test pattern with a tone, H.264 + AAC, as a phone would upload it."""
    subprocess.run(
        ["ffmpeg", "-hide_banner", "-loglevel", "error", "-y",
         "-f", "lavfi", "-i", f"testsrc2=size=1920x1080:rate=30:duration={seconds}",
         "-f", "lavfi", "-i", f"sine=frequency=440:sample_rate=48000:duration={seconds}",
         "-c:v", "libx264", "-preset", "veryfast", "-b:v", "8M", "-pix_fmt", "yuv420p", "-c:a", "aac", "-b:a", "128k",
         "-shortest", path], check=True)


def ferry_env(endpoint):
    return dict(os.environ, FERRY_ENDPOINT=endpoint, FERRY_ACCESS_KEY_ID=ACCESS_KEY, FERRY_SECRET_ACCESS_KEY=SECRET_KEY)


def upload_and_wait(binary, endpoint, path, on_event=None):
    """`ferry upload PATH --wait --json`; returns [(monotonic time, event)]."""
    process = subprocess.Popen(
        [binary, "upload", path, "--wait", "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env=ferry_env(endpoint))
    events = []
    for line in process.stdout:
        now = time.monotonic()
        try:
            event = json.loads(line)
        except ValueError:
            continue
        events.append((now, event))
        if on_event:
            on_event(event)
    if process.wait() != 0:
        raise RuntimeError("ferry upload --wait failed: " + process.stderr.read().decode(errors="replace"))
    return events


def pipeline_seconds(events):
    """Seconds from the upload's `completed` event to the `processed` one."""
    completed = next(t for t, e in events if e.get("event") == "completed")
    processed = next(t for t, e in events if e.get("event") == "processed")
    return processed - completed


def first_playable_seconds(events):
    """Seconds from the upload's `completed` event to the first status that says the video plays (`Playable`), or
    None when it never did before `processed`."""
    completed = next(t for t, e in events if e.get("event") == "completed")
    playable = next((t for t, e in events if e.get("event") == "processing" and e.get("Playable")), None)
    return None if playable is None else playable - completed


def follow_in_background(binary, endpoint, path, title):
    """`ferry upload PATH --wait --json` in the background: (process, events list filled as lines arrive, reader
    thread)."""
    process = subprocess.Popen(
        [binary, "upload", path, "--title", title, "--wait", "--json"], stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL, env=ferry_env(endpoint))
    events = []

    def read():
        for line in process.stdout:
            try:
                events.append((time.monotonic(), json.loads(line)))
            except ValueError:
                continue

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    return process, events, reader


def recorded_commands(log_path):
    """[(tool, [arguments])] of every media tool the server ran, in order, from its debug log."""
    commands = []
    decoder = json.JSONDecoder()
    with open(log_path, errors="replace") as f:
        for line in f:
            if "media tool started" not in line or "ferry.arguments=" not in line:
                continue
            arguments, _ = decoder.raw_decode(line, line.index("ferry.arguments=") + len("ferry.arguments="))
            tool = re.search(r"ferry\.tool=(\S+)", line)
            if tool:
                commands.append((tool.group(1), arguments))
    return commands


def replay_script(commands, data_directory, source, directory):
    """A shell script running `commands` by hand: each job's directory becomes directory/jobN, holding a copy of the
    source as the pipeline's jobs do."""
    work = os.path.join(data_directory, "media-work")
    jobs = {}
    lines = ["set -euo pipefail"]
    for tool, arguments in commands:
        rewritten = []
        for argument in arguments:
            for job in re.findall(re.escape(work) + r"/(job_[0-9a-f]+)", argument):
                if job not in jobs:
                    target = os.path.join(directory, f"job{len(jobs)}")
                    jobs[job] = target
                    extension = os.path.splitext(source)[1]
                    lines.append(f"mkdir -p {shlex.quote(target)}/out")
                    lines.append(f"cp {shlex.quote(source)} {shlex.quote(target)}/source{extension}")
            rewritten.append(re.sub(re.escape(work) + r"/(job_[0-9a-f]+)", lambda m: jobs[m.group(1)], argument))
        if "-hls_segment_filename" in rewritten:
            lines.append(f"mkdir -p {shlex.quote(os.path.dirname(rewritten[-1]))}")
        lines.append(" ".join(shlex.quote(part) for part in [tool, *rewritten]) + " > /dev/null")
    return "\n".join(lines) + "\n"


def timed(command):
    """Wall seconds and children's CPU seconds of a command."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    subprocess.run(command, check=True)
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def split_ladder(tool, arguments, directory):
    """From the ladder command (one process, split), one command per definition encoding from the source again."""
    graph = arguments[arguments.index("-filter_complex") + 1]
    scales = re.findall(r"(scale=\d+:\d+,setsar=1)", graph)
    first_output = arguments.index("-map")
    head = [a for a in arguments[:first_output] if a not in ("-filter_complex", graph)]
    if "-progress" in head:
        position = head.index("-progress")
        del head[position:position + 2]
    outputs, current = [], []
    for argument in arguments[first_output:]:
        current.append(argument)
        if argument.endswith(".mp4") or argument.endswith(".m4a"):
            outputs.append(current)
            current = []
    commands = []
    for index, output in enumerate(outputs):
        body = ["[v0]" if a.startswith("[v") else a for a in output]
        body[-1] = os.path.join(directory, f"single{index}.mp4")
        commands.append([tool, *head, "-filter_complex", f"[0:v:0]{scales[index]}[v0]", *body])
    return commands


def plain_upload(binary, endpoint, path, key):
    """MB/s of `ferry upload PATH --bucket bench --key KEY`."""
    size = os.path.getsize(path)
    start = time.monotonic()
    subprocess.run(
        [binary, "upload", path, "--bucket", "bench", "--key", key, "--json"], check=True, stdout=subprocess.DEVNULL,
        env=ferry_env(endpoint))
    return size / MB / (time.monotonic() - start)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bin", required=True)
    parser.add_argument("--seconds", type=int, default=60, help="length of the generated 1080p clip")
    parser.add_argument("--upload-mib", type=int, default=1024, help="size of the plain upload")
    parser.add_argument("--rounds", type=int, default=3, help="plain uploads idle and while transcoding")
    parser.add_argument("--keep", action="store_true")
    options = parser.parse_args()

    root = tempfile.mkdtemp(prefix="ferry-bench-transcode-")
    try:
        clip = os.path.join(root, "clip.mp4")
        log(f"making a {options.seconds} s 1080p clip ...")
        make_clip(clip, options.seconds)
        data = os.path.join(root, "data")
        server, port = start_server(
            options.bin, data, ACCESS_KEY, SECRET_KEY, os.path.join(root, "server.log"),
            ["--log-level", "debug", "--media-workers", "1"])
        endpoint = f"http://{HOST}:{port}"
        try:
            log("pipeline: upload, then processing to Normal ...")
            events = upload_and_wait(options.bin, endpoint, clip)
            pipeline = pipeline_seconds(events)
            renditions = next(e for _, e in events if e.get("event") == "processed")["PlayInfoList"]
            commands = recorded_commands(os.path.join(root, "server.log"))

            log(f"by hand: the same {len(commands)} commands from a shell script ...")
            hand_directory = os.path.join(root, "hand")
            os.makedirs(hand_directory)
            script = os.path.join(root, "hand.sh")
            with open(script, "w") as f:
                f.write(replay_script(commands, data, clip, hand_directory))
            # At the priority the server gives its tools (nice 10, SCHED_IDLE), so both run the same work alike.
            priority = ["chrt", "--idle", "0", "nice", "-n", "10"] if shutil.which("chrt") else ["nice", "-n", "10"]
            hand_wall, hand_cpu = timed([*priority, "bash", script])

            ladder = next((c for c in commands if "-filter_complex" in c[1] and "split" in c[1][c[1].index("-filter_complex") + 1]), None)
            one_wall = one_cpu = many_wall = many_cpu = None
            if ladder:
                log("ladder: one process against one per definition ...")
                # The ladder's job directory becomes ladder/ (its source, out/ and progress file inside).
                ladder_directory = os.path.join(root, "ladder")
                os.makedirs(os.path.join(ladder_directory, "out"))
                tool, arguments = ladder
                work = re.escape(os.path.join(data, "media-work")) + r"/job_[0-9a-f]+"
                single = [re.sub(work, ladder_directory, a) for a in arguments]
                source_argument = single[single.index("-i") + 1]
                shutil.copy(clip, source_argument)
                one_wall, one_cpu = timed([tool, *single])
                many_wall = many_cpu = 0.0
                for command in split_ladder(tool, single, ladder_directory):
                    wall, cpu = timed(command)
                    many_wall += wall
                    many_cpu += cpu

            log("uploads idle and while a transcode runs ...")
            big = os.path.join(root, "big.bin")
            with open(big, "wb") as f:
                for _ in range(options.upload_mib):
                    f.write(os.urandom(MIB))
            subprocess.run([options.bin, "upload", big, "--bucket", "bench", "--key", "warm-up", "--json"], check=True,
                           stdout=subprocess.DEVNULL, env=ferry_env(endpoint))
            idle = [plain_upload(options.bin, endpoint, big, "idle") for n in range(options.rounds)]
            # Saturating uploads: one after another for as long as the clip is processed.
            busy = []
            busy_jobs = []
            for n in range(options.rounds):
                background, background_events, reader = follow_in_background(options.bin, endpoint, clip, f"busy-{n}")
                while not any(e.get("Status") == "Transcoding" for _, e in background_events) and background.poll() is None:
                    time.sleep(0.05)
                while background.poll() is None:
                    rate = plain_upload(options.bin, endpoint, big, "busy")
                    busy.append((rate, background.poll() is None))
                background.wait()
                reader.join()
                busy_jobs.append(pipeline_seconds(background_events))
            idle_after = [plain_upload(options.bin, endpoint, big, "idle") for n in range(options.rounds)]
        finally:
            stop_server(server)

        idle_before = idle
        idle = idle_before + idle_after
        idle_rate = statistics.median(idle)
        busy_rate = statistics.median(rate for rate, _ in busy)
        print()
        print(f"clip: {options.seconds} s 1920x1080 30 fps H.264 + AAC, {os.path.getsize(clip) / MB:.1f} MB; renditions: "
              + ", ".join(sorted({r['Definition'] for r in renditions})))
        print()
        print("| measurement | result |")
        print("|---|---|")
        first = first_playable_seconds(events)
        print(f"| pipeline, upload complete → Normal (time to complete) | {pipeline:.1f} s |")
        if first is None:
            print("| upload complete → first playable | not playable before Normal |")
        else:
            print(f"| upload complete → first playable (Playable while Transcoding) | {first:.1f} s, "
                  f"{first / pipeline * 100:.0f} % of the time to complete (target ≤ 25 %) |")
        print(f"| the same {len(commands)} ffmpeg/ffprobe commands by hand (shell script, nice 10, SCHED_IDLE) | {hand_wall:.1f} s wall, {hand_cpu:.1f} CPU-s |")
        print(f"| pipeline overhead (pipeline / hand − 1) | {(pipeline / hand_wall - 1) * 100:+.1f} % (target ≤ 5 %) |")
        if one_wall is not None:
            print(f"| ladder in one ffmpeg (decode once, split) | {one_wall:.1f} s wall, {one_cpu:.1f} CPU-s |")
            print(f"| one ffmpeg per definition | {many_wall:.1f} s wall, {many_cpu:.1f} CPU-s |")
            print(f"| one process / per definition | {one_wall / many_wall:.2f}× wall, {one_cpu / many_cpu:.2f}× CPU |")
        print(f"| ferry upload of {options.upload_mib} MiB, idle (median of {len(idle)}: {len(idle_before)} before the busy "
              f"uploads, {len(idle_after)} after) | {idle_rate:.0f} MB/s (before: {', '.join(f'{r:.0f}' for r in idle_before)}; "
              f"after: {', '.join(f'{r:.0f}' for r in idle_after)}) |")
        print(f"| the same, one after another while a transcode runs (median of {len(busy)}) | {busy_rate:.0f} MB/s ({', '.join(f'{r:.0f}' + ('' if s else '*') for r, s in busy)}; * the transcode ended during it) |")
        print(f"| uploads busy / idle | {busy_rate / idle_rate:.2f} (target ≥ 0.7) |")
        busy_job = statistics.median(busy_jobs)
        print(f"| the clip's processing under those uploads (median of {len(busy_jobs)}) | {busy_job:.1f} s ({', '.join(f'{j:.1f}' for j in busy_jobs)}) |")
        print(f"| processing under load / idle | {busy_job / pipeline:.2f}× (target ≤ 3×) |")
    finally:
        if options.keep:
            log(f"kept {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
