"""Runs Ceph's s3-tests (the copy in s3-tests/, unmodified) against a `ferry serve` started on a free port.

The gate: every test named in expected-pass.txt must pass; the run fails when one of them does not. Tests outside
the list that pass are counted and named, so a newly passing test can be added to the list.

Usage:
    run_s3tests.py --ferry PATH [--python PATH] [--workers N] [--junit FILE] [--only TEST ...] [--show-failures]

    --ferry          the built `ferry` executable
    --python         the Python with the suite's requirements (default: this one)
    --workers        parallel pytest workers against the one server (default: 3)
    --only           run just these tests (names as in expected-pass.txt); default: every test of test_s3.py and
                     test_headers.py
    --show-failures  print why each failing test outside the list failed

Needs a Python with the suite's requirements (s3-tests/requirements.txt) and pytest-xdist; .ci/run makes one.
Exit status: 0 when every expected test passed, 1 otherwise, 2 when the run itself could not happen.
"""

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))
SUITE = os.path.join(HERE, "s3-tests")
EXPECTED = os.path.join(HERE, "expected-pass.txt")
EXCEPTIONS = os.path.join(HERE, "exceptions.txt")
FILES = ["s3tests/functional/test_s3.py", "s3tests/functional/test_headers.py"]
# Tests that expect the account to hold no buckets but their own; they run after the others, one at a time.
SERIAL = {"test_list_buckets_paginated"}

# Seconds the server counts as one lifecycle day, and the suite's lc_debug_interval: the lifecycle expiration tests
# sleep a few of these and expect rules to have applied.
LIFECYCLE_DAY = 5

# Keys of the three users the suite signs as. The main user is the server's root key; alt and tenant are created
# through the media API with full access. Test-only values, used on a loopback server with a throw-away data directory.
MAIN = ("FKIAS3TESTSMAIN00001", "s3tests-main-secret-0123456789abcdefghij")


def read_list(path):
    names = []
    if not os.path.exists(path):
        return names
    with open(path) as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if line:
                names.append(line)
    return names


def start_server(ferry, data_dir, env):
    log = open(os.path.join(os.path.dirname(data_dir), "ferry-serve.log"), "wb")
    process = subprocess.Popen(
        [ferry, "serve", "--data-dir", data_dir, "--port", "0", "--lifecycle-day", str(LIFECYCLE_DAY)],
        stdout=subprocess.PIPE, stderr=log, env=env)
    buffer = b""
    deadline = time.time() + 60
    while time.time() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        buffer += line
        match = re.search(rb"listening on http://127\.0\.0\.1:(\d+)", line)
        if match:
            return process, int(match.group(1))
    process.kill()
    raise RuntimeError("ferry serve did not start: " + buffer.decode(errors="replace"))


def create_key(ferry, endpoint, env, description):
    env = dict(env, FERRY_ENDPOINT=endpoint)
    out = subprocess.run(
        [ferry, "keys", "create", "--actions", "*", "--description", description],
        env=env, capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        raise RuntimeError("ferry keys create failed: " + out.stderr)
    values = dict(line.split("=", 1) for line in out.stdout.splitlines() if "=" in line)
    return values["FERRY_ACCESS_KEY_ID"], values["FERRY_SECRET_ACCESS_KEY"]


def write_config(path, port, alt, tenant):
    iam = "\n".join(
        f"[{section}]\naccess_key = {key}\nsecret_key = {secret}\nuser_id = {user}\nemail = {user}@example.com\n"
        f"display_name = {user}\n"
        for section, key, secret, user in [
            ("iam", "IAMUNUSED00000000000", "unused-iam-secret", "iam"),
            ("iam root", "IAMROOTUNUSED0000000", "unused-iam-root-secret", "iamroot"),
            ("iam alt root", "IAMALTROOTUNUSED0000", "unused-iam-alt-root-secret", "iamaltroot"),
        ])
    text = f"""[DEFAULT]
host = 127.0.0.1
port = {port}
is_secure = False
ssl_verify = False

[fixtures]
bucket prefix = ferry-{{random}}-

[s3 main]
lc_debug_interval = {LIFECYCLE_DAY}
display_name = ferry
user_id = ferry
email = main@example.com
api_name =
access_key = {MAIN[0]}
secret_key = {MAIN[1]}

[s3 alt]
display_name = ferry
user_id = ferry
email = alt@example.com
access_key = {alt[0]}
secret_key = {alt[1]}

[s3 tenant]
display_name = ferry
user_id = ferry
email = tenant@example.com
tenant = testx
access_key = {tenant[0]}
secret_key = {tenant[1]}

{iam}"""
    with open(path, "w") as f:
        f.write(text)


def all_tests():
    names = []
    for file in FILES:
        with open(os.path.join(SUITE, file)) as f:
            for line in f:
                match = re.match(r"def (test_\w+)\(", line)
                if match:
                    names.append(match.group(1))
    return names


def node_ids(names):
    where = {}
    for file in FILES:
        with open(os.path.join(SUITE, file)) as f:
            for line in f:
                match = re.match(r"def (test_\w+)\(", line)
                if match:
                    where[match.group(1)] = file
    # A parametrized test is named test_x[params]; it lives where test_x does.
    unknown = [n for n in names if n.split("[")[0] not in where]
    if unknown:
        raise RuntimeError("not in the suite: " + ", ".join(unknown))
    return [f"{where[n.split('[')[0]]}::{n}" for n in names]


def run_pytest(python, names, conf, workers, junit, env):
    ids = node_ids(names)
    listing = junit + ".args"
    with open(listing, "w") as f:
        f.write("\n".join(ids))
    args = [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--junitxml", junit, "-rN"]
    if workers > 1:
        args += ["-n", str(workers), "--dist", "load"]
    args += ["@" + listing]
    env = dict(env, S3TEST_CONF=conf)
    return subprocess.run(args, cwd=SUITE, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def results(junit):
    outcome = {}
    detail = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        name = case.get("name")
        failure = case.find("failure")
        error = case.find("error")
        skipped = case.find("skipped")
        if failure is not None or error is not None:
            node = failure if failure is not None else error
            text = (node.get("message") or "") + "\n" + (node.text or "")
            # An error in teardown after a passing call still counts against the test.
            outcome[name] = "failed"
            detail[name] = text
        elif skipped is not None:
            outcome.setdefault(name, "skipped")
        else:
            outcome.setdefault(name, "passed")
    return outcome, detail


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--ferry", required=True)
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--junit")
    parser.add_argument("--only", nargs="*")
    parser.add_argument("--show-failures", action="store_true")
    options = parser.parse_args()

    expected = read_list(EXPECTED)
    exceptions = read_list(EXCEPTIONS)
    names = options.only or all_tests()

    work = tempfile.mkdtemp(prefix="ferry-s3tests-")
    data = os.path.join(work, "data")
    home = os.path.join(work, "home")
    os.makedirs(home)
    env = dict(os.environ, HOME=home, FERRY_ACCESS_KEY_ID=MAIN[0], FERRY_SECRET_ACCESS_KEY=MAIN[1],
               AWS_CONFIG_FILE=os.path.join(home, "aws-config"), AWS_SHARED_CREDENTIALS_FILE=os.path.join(home, "none"))
    for name in ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "FERRY_ENDPOINT",
                 "FERRY_SESSION_TOKEN", "FERRY_DATA_DIR"]:
        env.pop(name, None)
    server = None
    started = time.time()
    try:
        server, port = start_server(options.ferry, data, env)
        endpoint = f"http://127.0.0.1:{port}"
        alt = create_key(options.ferry, endpoint, env, "s3-tests alt")
        tenant = create_key(options.ferry, endpoint, env, "s3-tests tenant")
        conf = os.path.join(work, "s3tests.conf")
        write_config(conf, port, alt, tenant)
        junit = options.junit or os.path.join(work, "junit.xml")
        parallel = [n for n in names if n.split("[")[0] not in SERIAL]
        serial = [n for n in names if n.split("[")[0] in SERIAL]
        outcome, detail = {}, {}
        for batch, workers, path in [(parallel, options.workers, junit), (serial, 1, junit + ".serial.xml")]:
            if not batch:
                continue
            run = run_pytest(options.python, batch, conf, workers, path, env)
            if not os.path.exists(path):
                print(run.stdout[-4000:])
                print("s3-tests: pytest produced no results", file=sys.stderr)
                return 2
            more, why = results(path)
            outcome.update(more)
            detail.update(why)
    except Exception as error:
        print(f"s3-tests: the run could not happen: {error}", file=sys.stderr)
        return 2
    finally:
        if server is not None:
            server.send_signal(signal.SIGTERM)
            try:
                server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                server.kill()
        if server is not None and server.returncode not in (0, -signal.SIGTERM, None):
            print(f"s3-tests: ferry serve exited with {server.returncode}", file=sys.stderr)

    elapsed = time.time() - started
    passed = sorted(n for n, o in outcome.items() if o == "passed")
    skipped = [n for n, o in outcome.items() if o == "skipped"]
    ran = set(names)
    ran_expected = [n for n in expected if n in ran or n.split("[")[0] in ran]
    missing = [n for n in ran_expected if outcome.get(n) != "passed"]
    newly = [n for n in passed if n not in expected]
    print(f"s3-tests: {len(passed)} passed, {len(outcome) - len(passed) - len(skipped)} failed, {len(skipped)} skipped "
          f"of {len(outcome)} run in {elapsed:.0f} s; {len(ran_expected) - len(missing)} of {len(ran_expected)} "
          f"expected passed")
    exceptions_passing = [n for n in exceptions if outcome.get(n) == "passed"]
    if exceptions_passing:
        print("s3-tests: listed as exceptions but passing now: " + ", ".join(exceptions_passing))
    newly = [n for n in newly if n not in exceptions]
    if newly:
        print(f"s3-tests: {len(newly)} passing tests are not in expected-pass.txt (add them):")
        for name in newly:
            print("  " + name)
    for name in missing:
        print(f"s3-tests: EXPECTED TO PASS, {outcome.get(name, 'not run')}: {name}")
        if name in detail:
            print("    " + "\n    ".join(detail[name].strip().splitlines()[-12:]))
    if options.show_failures:
        for name in sorted(n for n, o in outcome.items() if o == "failed" and n not in expected):
            print(f"--- {name}")
            print("    " + "\n    ".join(detail[name].strip().splitlines()[-8:]))
    if server is not None and server.returncode not in (0, -signal.SIGTERM):
        print("s3-tests: the server did not shut down cleanly; its log:", file=sys.stderr)
        with open(os.path.join(work, "ferry-serve.log"), errors="replace") as f:
            print(f.read()[-4000:], file=sys.stderr)
        return 1
    shutil.rmtree(work, ignore_errors=True)
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
