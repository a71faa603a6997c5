#!/usr/bin/env python3
"""Clients of Ferry's resumable upload resource, for the interop tests.

tus: tuspy (PyPI), a client no one here wrote, for creation, chunked appends and resumption from its URL store; the
`requests` library (tuspy's own dependency) for what tuspy does not send (creation-with-upload, a wrong checksum,
termination, concatenation).

IETF: a scripted client on a raw socket that sends exactly what the draft's examples send, so that the 104 interim
response and each header are seen as they are on the wire (http.client would take a 104 for the final answer).

Every command prints one JSON object on its last line.
"""

import argparse
import base64
import hashlib
import json
import os
import socket
import sys
import time
from urllib.parse import urlsplit

import requests

TUS = {"Tus-Resumable": "1.0.0"}


def emit(result):
    print(json.dumps(result), flush=True)


# ----------------------------------------------------------------------------------------------------------- tus --


def tus_upload(args):
    from tusclient import client as tus_client
    from tusclient.storage import filestorage

    tus = tus_client.TusClient(args.endpoint)
    options = dict(chunk_size=args.chunk, retries=args.retries, retry_delay=1)
    if args.metadata:
        options["metadata"] = json.loads(args.metadata)
    if args.store:
        options["store_url"] = True
        options["url_storage"] = filestorage.FileStorage(args.store)
    if args.url:
        options["url"] = args.url
    if args.checksum:
        options["upload_checksum"] = True
    # The upload's own time, from the creation request (made by `uploader`) to the last append's answer.
    begun = time.monotonic()
    uploader = tus.uploader(args.file, **options)
    started_at = uploader.offset
    print("started %d %s" % (started_at, uploader.url), flush=True)
    size = os.path.getsize(args.file)
    while uploader.offset < size:
        uploader.upload_chunk()
        print("offset %d" % uploader.offset, flush=True)
        if args.pause:
            time.sleep(args.pause)
    emit({"url": uploader.url, "offset": uploader.offset, "resumedFrom": started_at,
          "seconds": time.monotonic() - begun})


def tus_scenarios(args):
    """Creation-with-upload, a wrong checksum, termination, deferred length and concatenation, against a creation URL
    (a media upload URL) and checked by reading the upload's state back."""
    out = {}
    creation = args.endpoint
    data = os.urandom(300_000)

    # OPTIONS: discovery.
    r = requests.options(creation)
    out["options"] = {"status": r.status_code, "extensions": r.headers.get("Tus-Extension", ""),
                      "checksums": r.headers.get("Tus-Checksum-Algorithm", ""), "version": r.headers.get("Tus-Version")}

    # Creation with upload: the first 100 000 bytes in the POST.
    r = requests.post(creation, data=data[:100_000], headers={
        **TUS, "Upload-Length": str(len(data)), "Content-Type": "application/offset+octet-stream",
        "Upload-Metadata": "filename " + base64.b64encode(b"clip.mp4").decode() + ",filetype "
        + base64.b64encode(b"video/mp4").decode()})
    url = r.headers.get("Location")
    out["creationWithUpload"] = {"status": r.status_code, "offset": r.headers.get("Upload-Offset"),
                                 "expires": r.headers.get("Upload-Expires"), "location": url}

    # A chunk whose checksum does not match: 460, and the offset stays.
    wrong = base64.b64encode(hashlib.sha1(b"not these bytes").digest()).decode()
    r = requests.patch(url, data=data[100_000:200_000], headers={
        **TUS, "Upload-Offset": "100000", "Content-Type": "application/offset+octet-stream",
        "Upload-Checksum": "sha1 " + wrong})
    head = requests.head(url, headers=TUS)
    out["checksumMismatch"] = {"status": r.status_code, "offsetAfter": head.headers.get("Upload-Offset")}

    # The right checksum (md5, then crc32): accepted.
    right = base64.b64encode(hashlib.md5(data[100_000:200_000]).digest()).decode()
    r = requests.patch(url, data=data[100_000:200_000], headers={
        **TUS, "Upload-Offset": "100000", "Content-Type": "application/offset+octet-stream",
        "Upload-Checksum": "md5 " + right})
    out["checksumMatch"] = {"status": r.status_code, "offset": r.headers.get("Upload-Offset")}

    # A wrong offset: 409.
    r = requests.patch(url, data=b"x", headers={
        **TUS, "Upload-Offset": "5", "Content-Type": "application/offset+octet-stream"})
    out["wrongOffset"] = {"status": r.status_code}

    import zlib
    crc = base64.b64encode(zlib.crc32(data[200_000:]).to_bytes(4, "big")).decode()
    r = requests.patch(url, data=data[200_000:], headers={
        **TUS, "Upload-Offset": "200000", "Content-Type": "application/offset+octet-stream",
        "Upload-Checksum": "crc32 " + crc})
    head = requests.head(url, headers=TUS)
    out["completed"] = {"status": r.status_code, "offset": r.headers.get("Upload-Offset"), "etag": r.headers.get("ETag"),
                        "headLength": head.headers.get("Upload-Length"), "headMetadata": head.headers.get("Upload-Metadata")}
    out["sha256"] = hashlib.sha256(data).hexdigest()

    # Without Tus-Resumable: 412.
    r = requests.head(url)
    out["noVersion"] = {"status": r.status_code, "tusVersion": r.headers.get("Tus-Version"),
                        "tusResumable": r.headers.get("Tus-Resumable")}
    emit(out)


def tus_signed(args):
    """Termination, deferred length and concatenation on uploads created at a signed creation URL's Location
    (`--url`s given by the test, which signs the creations)."""
    out = {}
    urls = args.url.split(",")

    # Termination: the upload answers 404 afterwards.
    victim = urls[0]
    requests.patch(victim, data=b"a" * 1000, headers={
        **TUS, "Upload-Offset": "0", "Content-Type": "application/offset+octet-stream"})
    r = requests.delete(victim, headers=TUS)
    head = requests.head(victim, headers=TUS)
    out["termination"] = {"status": r.status_code, "headAfter": head.status_code}

    # Deferred length: the length comes with the last append.
    deferred = urls[1]
    head = requests.head(deferred, headers=TUS)
    first = requests.patch(deferred, data=b"b" * 1000, headers={
        **TUS, "Upload-Offset": "0", "Content-Type": "application/offset+octet-stream"})
    last = requests.patch(deferred, data=b"c" * 500, headers={
        **TUS, "Upload-Offset": "1000", "Upload-Length": "1500", "Content-Type": "application/offset+octet-stream"})
    out["deferred"] = {"deferHeader": head.headers.get("Upload-Defer-Length"), "first": first.status_code,
                       "last": last.status_code, "etag": last.headers.get("ETag")}
    emit(out)


def tus_concat(args):
    """Three partial uploads at the creation URL, then the final upload."""
    creation = args.endpoint
    pieces = [os.urandom(70_000 + 1000 * i) for i in range(3)]
    partials = []
    for piece in pieces:
        r = requests.post(creation, headers={**TUS, "Upload-Length": str(len(piece)), "Upload-Concat": "partial"})
        url = r.headers["Location"]
        requests.patch(url, data=piece, headers={
            **TUS, "Upload-Offset": "0", "Content-Type": "application/offset+octet-stream"})
        partials.append(url)
    # A final upload naming an unfinished partial is refused.
    r = requests.post(creation, headers={**TUS, "Upload-Length": "10", "Upload-Concat": "partial"})
    unfinished = r.headers["Location"]
    refused = requests.post(creation, headers={**TUS, "Upload-Concat": "final;" + " ".join(partials + [unfinished])})
    r = requests.post(creation, headers={**TUS, "Upload-Concat": "final;" + " ".join(partials)})
    head = requests.head(r.headers.get("Location", creation), headers=TUS)
    emit({"unfinishedStatus": refused.status_code, "status": r.status_code, "etag": r.headers.get("ETag"),
          "headConcat": head.headers.get("Upload-Concat"), "headOffset": head.headers.get("Upload-Offset"),
          "sha256": hashlib.sha256(b"".join(pieces)).hexdigest(), "size": sum(len(p) for p in pieces)})


# ---------------------------------------------------------------------------------------------------------- IETF --


class Exchange:
    """One request on a fresh connection; every response read, 1xx included, with its headers."""

    def __init__(self, url, method, headers, body=b"", send_body_slowly=None):
        parts = urlsplit(url)
        self.responses = []
        sock = socket.create_connection((parts.hostname, parts.port), timeout=60)
        target = parts.path + (("?" + parts.query) if parts.query else "")
        lines = ["%s %s HTTP/1.1" % (method, target), "Host: %s" % parts.netloc]
        for name, value in headers:
            lines.append("%s: %s" % (name, value))
        # A request with Transfer-Encoding: chunked sends its body as one chunk, its length announced by nothing else.
        chunked = any(name.lower() == "transfer-encoding" for name, _ in headers)
        if not chunked and (body or method in ("POST", "PUT", "PATCH")):
            lines.append("Content-Length: %d" % len(body))
        lines.append("Connection: close")
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        sock.sendall(b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body) if chunked else body)
        data = b""
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
        sock.close()
        self._parse(data, method == "HEAD")

    def _parse(self, data, head):
        while data:
            end = data.find(b"\r\n\r\n")
            if end < 0:
                break
            lines = data[:end].decode("latin-1").split("\r\n")
            status = int(lines[0].split(" ")[1])
            headers = {}
            for line in lines[1:]:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
            data = data[end + 4:]
            body = b""
            if status >= 200:
                length = int(headers.get("content-length", "0") or 0)
                if head or status in (204, 304):
                    length = 0
                if headers.get("transfer-encoding", "").lower() == "chunked":
                    while True:
                        size_end = data.find(b"\r\n")
                        size = int(data[:size_end], 16)
                        data = data[size_end + 2:]
                        body += data[:size]
                        data = data[size + 2:]
                        if size == 0:
                            break
                else:
                    body, data = data[:length], data[length:]
            self.responses.append({"status": status, "headers": headers, "body": body.decode("utf-8", "replace")})
            if status >= 200:
                break

    @property
    def final(self):
        return self.responses[-1]

    @property
    def interim(self):
        return [r for r in self.responses if r["status"] < 200]


def ietf_flags(version, complete):
    if version >= 5:
        return [("Upload-Complete", "?1" if complete else "?0")]
    return [("Upload-Incomplete", "?0" if complete else "?1")]


def ietf_complete(version, headers):
    if version >= 5:
        return headers.get("upload-complete")
    return headers.get("upload-incomplete")


def ietf_scenarios(args):
    """For one interop version: creation with the first half (104 with Location, 201 incomplete), offset retrieval,
    an append at the wrong offset (409 with the right one), the rest with completion (the final response), and
    cancellation of a second upload."""
    version = args.version
    data = os.urandom(args.size)
    half = len(data) // 2
    base = [("Upload-Draft-Interop-Version", str(version))]
    out = {"version": version, "sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}

    creation = Exchange(args.endpoint, "POST", base + ietf_flags(version, False) + [("Content-Type", "video/mp4")],
                        data[:half])
    interim = creation.interim
    location = creation.final["headers"].get("location")
    out["creation"] = {
        "interim": [r["status"] for r in interim],
        "interimLocation": interim[0]["headers"].get("location") if interim else None,
        "interimVersion": interim[0]["headers"].get("upload-draft-interop-version") if interim else None,
        "interimLimit": interim[0]["headers"].get("upload-limit") if interim else None,
        "limit": creation.final["headers"].get("upload-limit"),
        "status": creation.final["status"], "location": location,
        "offset": creation.final["headers"].get("upload-offset"),
        "complete": ietf_complete(version, creation.final["headers"])}

    head = Exchange(location, "HEAD", base)
    out["offsetRetrieval"] = {"status": head.final["status"], "offset": head.final["headers"].get("upload-offset"),
                              "complete": ietf_complete(version, head.final["headers"]),
                              "cacheControl": head.final["headers"].get("cache-control")}

    append_type = [("Content-Type", "application/partial-upload")] if version >= 6 else []
    wrong = Exchange(location, "PATCH", base + ietf_flags(version, True) + append_type + [("Upload-Offset", "1")],
                     data[1:])
    out["wrongOffset"] = {"status": wrong.final["status"], "offset": wrong.final["headers"].get("upload-offset"),
                          "contentType": wrong.final["headers"].get("content-type"), "problem": problem(wrong)}

    offset = int(out["offsetRetrieval"]["offset"] or 0)
    append = Exchange(location, "PATCH",
                      base + ietf_flags(version, True) + append_type + [("Upload-Offset", str(offset))], data[offset:])
    out["append"] = {"status": append.final["status"], "offset": append.final["headers"].get("upload-offset"),
                     "complete": ietf_complete(version, append.final["headers"]),
                     "etag": append.final["headers"].get("etag"), "body": append.final["body"]}

    after = Exchange(location, "HEAD", base)
    out["afterCompletion"] = {"status": after.final["status"], "complete": ietf_complete(version, after.final["headers"])}

    second = Exchange(later(args), "POST", base + ietf_flags(version, False), b"y" * 1000)
    second_location = second.final["headers"].get("location")
    cancel = Exchange(second_location, "DELETE", base)
    gone = Exchange(second_location, "HEAD", base)
    out["cancellation"] = {"status": cancel.final["status"], "headAfter": gone.final["status"]}

    bad = Exchange(location, "HEAD", [("Upload-Draft-Interop-Version", "4")])
    out["unknownVersion"] = {"status": bad.final["status"]}
    emit(out)


def problem(exchange):
    """The problem details (RFC 9457) of an answer sent as application/problem+json, else None."""
    if exchange.final["headers"].get("content-type") != "application/problem+json":
        return None
    return json.loads(exchange.final["body"])


def ietf_upload(args):
    """One IETF upload of a whole file in its creation request (as URLSession sends it), then resumption until
    complete if the connection was cut; for the benchmark and the kill tests."""
    version = args.version
    base = [("Upload-Draft-Interop-Version", str(version))]
    with open(args.file, "rb") as f:
        data = f.read()
    creation = Exchange(args.endpoint, "POST", base + ietf_flags(version, True), data)
    out = {"status": creation.final["status"], "etag": creation.final["headers"].get("etag"),
           "interim": [r["status"] for r in creation.interim]}
    location = creation.interim[0]["headers"].get("location") if creation.interim else None
    if creation.final["status"] >= 300 and location:
        # Where a refused creation leaves the upload its 104 named: offset retrieval, then cancellation.
        head = Exchange(location, "HEAD", base)
        out["finalNamesIt"] = creation.final["headers"].get("location") == location
        out["headAfter"] = head.final["status"]
        out["headOffset"] = head.final["headers"].get("upload-offset")
        out["cancel"] = Exchange(location, "DELETE", base).final["status"]
    emit(out)


def later(args):
    """The creation URL of an upload after the first: the next --later (a video's URL takes one upload, its source),
    else --endpoint."""
    return args.later.pop(0) if args.later else args.endpoint


def ietf_edges(args):
    """The draft's corners: an upload whose offset reaches its length stays incomplete until a request declares it
    complete (here an empty append); lengths indicated on appends must agree and are recorded; a creation refused
    after its 104 (a body past the declared length) leaves no upload at the 104's location."""
    version = args.version
    base = [("Upload-Draft-Interop-Version", str(version))]
    append_type = [("Content-Type", "application/partial-upload")] if version >= 6 else []
    out = {}

    creation = Exchange(args.endpoint, "POST", base + ietf_flags(version, False) + [("Upload-Length", "6")], b"abcdef")
    location = creation.final["headers"].get("location")
    head = Exchange(location, "HEAD", base)
    declare = Exchange(location, "PATCH", base + ietf_flags(version, True) + append_type + [("Upload-Offset", "6")])
    # More to an upload completed already: refused, and the answer says the upload is complete.
    more = Exchange(location, "PATCH", base + ietf_flags(version, False) + append_type + [("Upload-Offset", "6")], b"g")
    out["undeclared"] = {"creation": creation.final["status"],
                         "headComplete": ietf_complete(version, head.final["headers"]),
                         "headOffset": head.final["headers"].get("upload-offset"),
                         "declare": declare.final["status"], "declareBody": declare.final["body"],
                         "more": more.final["status"], "moreComplete": ietf_complete(version, more.final["headers"])}

    second = Exchange(later(args), "POST", base + ietf_flags(version, False) + [("Upload-Length", "10")],
                      b"1234")
    conflicting = Exchange(second.final["headers"].get("location"), "PATCH",
                           base + ietf_flags(version, False) + append_type + [("Upload-Offset", "4"), ("Upload-Length", "99")],
                           b"56")
    third = Exchange(later(args), "POST", base + ietf_flags(version, False), b"1234")
    third_location = third.final["headers"].get("location")
    recorded = Exchange(third_location, "PATCH",
                        base + ietf_flags(version, False) + append_type + [("Upload-Offset", "4"), ("Upload-Length", "8")],
                        b"56")
    third_head = Exchange(third_location, "HEAD", base)
    # An append that does not say whether it completes the upload is refused (from version 5), nothing of it kept.
    unflagged = Exchange(third_location, "PATCH", base + append_type + [("Upload-Offset", "6")], b"78")
    unflagged_head = Exchange(third_location, "HEAD", base)
    # Offsets are structured-field integers: at most 15 digits, parameters allowed (and ignored).
    digits = Exchange(third_location, "PATCH",
                      base + ietf_flags(version, False) + append_type + [("Upload-Offset", "0000000000000006")], b"78")
    parameterized = Exchange(third_location, "PATCH",
                             base + ietf_flags(version, False) + append_type + [("Upload-Offset", "6;note=1")], b"78")
    parameterized_head = Exchange(third_location, "HEAD", base)
    out["lengths"] = {"conflicting": conflicting.final["status"], "conflictingProblem": problem(conflicting),
                      "conflictingComplete": ietf_complete(version, conflicting.final["headers"]),
                      "recorded": recorded.final["status"],
                      "headLength": third_head.final["headers"].get("upload-length"),
                      "unflagged": unflagged.final["status"],
                      "offsetAfterUnflagged": unflagged_head.final["headers"].get("upload-offset"),
                      "completeAfterUnflagged": ietf_complete(version, unflagged_head.final["headers"]),
                      "sixteenDigits": digits.final["status"], "parameterized": parameterized.final["status"],
                      "offsetAfterParameterized": parameterized_head.final["headers"].get("upload-offset")}

    # A body that passes the length it declares: seen only as it arrives (chunked), the upload the 104 named ends;
    # announced by Content-Length, refused before anything is made.
    refused = Exchange(later(args), "POST",
                       base + ietf_flags(version, False) + [("Upload-Length", "10"), ("Transfer-Encoding", "chunked")],
                       b"x" * 20)
    interim = refused.interim
    refused_location = interim[0]["headers"].get("location") if interim else None
    after = Exchange(refused_location, "HEAD", base) if refused_location else None
    announced = Exchange(later(args), "POST", base + ietf_flags(version, False) + [("Upload-Length", "10")], b"x" * 20)
    out["refusedCreation"] = {"interim": [r["status"] for r in interim], "status": refused.final["status"],
                              "headAfter": after.final["status"] if after else None,
                              "announcedInterim": [r["status"] for r in announced.interim],
                              "announcedStatus": announced.final["status"],
                              "announcedComplete": ietf_complete(version, announced.final["headers"])}
    emit(out)


def main():
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("tus-upload")
    p.add_argument("--endpoint", required=True)
    p.add_argument("--file", required=True)
    p.add_argument("--chunk", type=int, default=sys.maxsize)
    p.add_argument("--retries", type=int, default=0)
    p.add_argument("--metadata")
    p.add_argument("--store")
    p.add_argument("--url")
    p.add_argument("--checksum", action="store_true")
    p.add_argument("--pause", type=float, default=0)
    p.set_defaults(run=tus_upload)
    p = sub.add_parser("tus-scenarios")
    p.add_argument("--endpoint", required=True)
    p.set_defaults(run=tus_scenarios)
    p = sub.add_parser("tus-signed")
    p.add_argument("--url", required=True)
    p.set_defaults(run=tus_signed)
    p = sub.add_parser("tus-concat")
    p.add_argument("--endpoint", required=True)
    p.set_defaults(run=tus_concat)
    p = sub.add_parser("ietf-scenarios")
    p.add_argument("--endpoint", required=True)
    p.add_argument("--later", action="append", default=[])
    p.add_argument("--version", type=int, required=True)
    p.add_argument("--size", type=int, default=200_000)
    p.set_defaults(run=ietf_scenarios)
    p = sub.add_parser("ietf-edges")
    p.add_argument("--endpoint", required=True)
    p.add_argument("--later", action="append", default=[])
    p.add_argument("--version", type=int, required=True)
    p.set_defaults(run=ietf_edges)
    p = sub.add_parser("ietf-upload")
    p.add_argument("--endpoint", required=True)
    p.add_argument("--file", required=True)
    p.add_argument("--version", type=int, default=6)
    p.set_defaults(run=ietf_upload)
    args = parser.parse_args()
    args.run(args)


if __name__ == "__main__":
    main()
