"""boto3 against a running `ferry serve`: every check prints `PASS <name>`; any failure raises (exit code 1).

Environment: FERRY_ENDPOINT, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, WORK_DIR.
"""
import base64
import hashlib
import os
import sys
import time
import urllib.error
import urllib.request

import boto3
import botocore.httpchecksum
from boto3.s3.transfer import TransferConfig
from botocore.compat import urlparse
from botocore.config import Config
from botocore.exceptions import ClientError

ENDPOINT = os.environ["FERRY_ENDPOINT"]
WORK = os.environ["WORK_DIR"]
BUCKET = "boto3-interop"
MiB = 1024 * 1024


def client(secret=None, **config):
    return boto3.client(
        "s3",
        endpoint_url=ENDPOINT,
        region_name="us-east-1",
        aws_access_key_id=os.environ["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=secret or os.environ["AWS_SECRET_ACCESS_KEY"],
        config=Config(signature_version="s3v4", s3={"addressing_style": "path"}, retries={"max_attempts": 1}, **config),
    )


def passed(name):
    print("PASS", name, flush=True)


def expect_error(code, fn):
    try:
        fn()
    except ClientError as error:
        actual = error.response["Error"]["Code"]
        assert actual == code, f"expected {code}, got {actual}"
        return
    raise AssertionError(f"expected {code}, got success")


s3 = client()
s3.create_bucket(Bucket=BUCKET)

# upload_file with a TransferConfig: a multipart upload in 5 MiB parts, 4 at a time.
path = os.path.join(WORK, "boto3-20m.bin")
with open(path, "wb") as f:
    f.write(os.urandom(20 * MiB + 12345))
config = TransferConfig(multipart_threshold=5 * MiB, multipart_chunksize=5 * MiB, max_concurrency=4)
s3.upload_file(path, BUCKET, "transfer/big.bin", Config=config)
head = s3.head_object(Bucket=BUCKET, Key="transfer/big.bin")
assert head["ContentLength"] == 20 * MiB + 12345
assert head["ETag"].strip('"').endswith("-5"), head["ETag"]
back = os.path.join(WORK, "boto3-20m.back")
s3.download_file(BUCKET, "transfer/big.bin", back, Config=config)
assert open(back, "rb").read() == open(path, "rb").read()
passed("upload_file with TransferConfig, download_file, bytes equal")

# A presigned GET from generate_presigned_url with s3v4.
url = s3.generate_presigned_url("get_object", Params={"Bucket": BUCKET, "Key": "transfer/big.bin"}, ExpiresIn=300)
with urllib.request.urlopen(url) as response:
    assert response.read() == open(path, "rb").read()
passed("presigned GET")

# Each checksum algorithm: botocore computes it, the server verifies and stores it, and returns it with
# ChecksumMode=ENABLED (botocore validates the body against it on GET).
body = os.urandom(300_000)
for algorithm in ["CRC32", "CRC32C", "CRC64NVME", "SHA1", "SHA256"]:
    key = f"checksum/{algorithm}"
    put = s3.put_object(Bucket=BUCKET, Key=key, Body=body, ChecksumAlgorithm=algorithm)
    sent = put["Checksum" + algorithm]
    head = s3.head_object(Bucket=BUCKET, Key=key, ChecksumMode="ENABLED")
    assert head["Checksum" + algorithm] == sent, (algorithm, head)
    got = s3.get_object(Bucket=BUCKET, Key=key, ChecksumMode="ENABLED")
    assert got["Body"].read() == body
    if algorithm == "SHA256":
        assert base64.b64decode(sent) == hashlib.sha256(body).digest()
    passed(f"checksum {algorithm}")

# The same algorithms on a multipart upload through the transfer manager (composite or full-object checksums).
for algorithm in ["CRC32", "CRC32C", "CRC64NVME", "SHA256"]:
    key = f"checksum-multipart/{algorithm}"
    s3.upload_file(path, BUCKET, key, Config=config, ExtraArgs={"ChecksumAlgorithm": algorithm})
    head = s3.head_object(Bucket=BUCKET, Key=key, ChecksumMode="ENABLED")
    assert head.get("Checksum" + algorithm), head
    passed(f"multipart checksum {algorithm}")

# aws-chunked with a trailing checksum, as botocore sends it over TLS (STREAMING-UNSIGNED-PAYLOAD-TRAILER):
# botocore only chooses trailers for https URLs, so let it believe this loopback URL is one.
real_urlparse = botocore.httpchecksum.urlparse
botocore.httpchecksum.urlparse = lambda u: real_urlparse(u)._replace(scheme="https")
try:
    seen = {}

    def capture(request, **kwargs):
        seen["sha"] = request.headers.get("X-Amz-Content-SHA256")
        seen["encoding"] = request.headers.get("Content-Encoding")

    trailer_client = client()
    trailer_client.meta.events.register("before-send.s3.PutObject", capture)
    for algorithm in ["CRC32", "CRC32C", "CRC64NVME", "SHA256"]:
        key = f"trailer/{algorithm}"
        put = trailer_client.put_object(Bucket=BUCKET, Key=key, Body=open(path, "rb"), ChecksumAlgorithm=algorithm)
        sha = seen["sha"].decode() if isinstance(seen["sha"], bytes) else seen["sha"]
        assert sha == "STREAMING-UNSIGNED-PAYLOAD-TRAILER", seen
        head = s3.head_object(Bucket=BUCKET, Key=key, ChecksumMode="ENABLED")
        assert head["Checksum" + algorithm] == put["Checksum" + algorithm]
        assert s3.get_object(Bucket=BUCKET, Key=key)["Body"].read() == open(path, "rb").read()
        passed(f"aws-chunked trailer {algorithm}")
finally:
    botocore.httpchecksum.urlparse = real_urlparse

# A wrong Content-MD5 is BadDigest, and nothing is stored.
expect_error(
    "BadDigest",
    lambda: s3.put_object(Bucket=BUCKET, Key="bad-md5", Body=b"payload", ContentMD5=base64.b64encode(b"0" * 16).decode()),
)
expect_error("404", lambda: s3.head_object(Bucket=BUCKET, Key="bad-md5"))
passed("wrong Content-MD5 is BadDigest")

# A signature made with the wrong secret is SignatureDoesNotMatch.
expect_error("SignatureDoesNotMatch", lambda: client(secret="not-the-secret").list_objects_v2(Bucket=BUCKET))
passed("tampered signature is SignatureDoesNotMatch")

# An expired presigned URL is AccessDenied.
url = s3.generate_presigned_url("get_object", Params={"Bucket": BUCKET, "Key": "transfer/big.bin"}, ExpiresIn=1)
time.sleep(2.5)
try:
    urllib.request.urlopen(url)
    raise AssertionError("expired URL was accepted")
except urllib.error.HTTPError as error:
    assert error.code == 403, error.code
    assert b"<Code>AccessDenied</Code>" in error.read()
passed("expired presigned URL is AccessDenied")

# Listing with a paginator, and delete.
keys = [o["Key"] for page in s3.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, PaginationConfig={"PageSize": 3}) for o in page.get("Contents", [])]
assert "transfer/big.bin" in keys and keys == sorted(keys), keys
s3.delete_object(Bucket=BUCKET, Key="transfer/big.bin")
expect_error("404", lambda: s3.head_object(Bucket=BUCKET, Key="transfer/big.bin"))
passed("paginated listing and delete")

# A browser upload: a POST policy made by boto3's generate_presigned_post (SigV4), sent as a browser sends the form.
post = s3.generate_presigned_post(
    BUCKET, "browser/${filename}",
    Fields={"Content-Type": "video/mp4", "success_action_status": "201"},
    Conditions=[["starts-with", "$key", "browser/"], ["content-length-range", 1, 1_000_000],
                {"Content-Type": "video/mp4"}, {"success_action_status": "201"}],
    ExpiresIn=300)
boundary = "----ferry-boto3-form"
form = b""
for name, value in post["fields"].items():
    form += f"--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n{value}\r\n".encode()
clip = os.urandom(70_000)
form += f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"clip.mp4\"\r\nContent-Type: video/mp4\r\n\r\n".encode()
form += clip + f"\r\n--{boundary}--\r\n".encode()
request = urllib.request.Request(post["url"], data=form, method="POST",
                                 headers={"Content-Type": f"multipart/form-data; boundary={boundary}"})
with urllib.request.urlopen(request) as response:
    assert response.status == 201, response.status
    assert b"<Key>browser/clip.mp4</Key>" in response.read()
got = s3.get_object(Bucket=BUCKET, Key="browser/clip.mp4")
assert got["Body"].read() == clip and got["ContentType"] == "video/mp4"
passed("presigned POST policy upload")

# copy_object keeps or replaces metadata; delete_objects removes a batch, reporting each key.
s3.put_object(Bucket=BUCKET, Key="copy/source", Body=b"copy me", Metadata={"a": "1"}, Tagging="t=1")
s3.copy_object(Bucket=BUCKET, Key="copy/kept", CopySource={"Bucket": BUCKET, "Key": "copy/source"})
assert s3.head_object(Bucket=BUCKET, Key="copy/kept")["Metadata"] == {"a": "1"}
s3.copy_object(Bucket=BUCKET, Key="copy/replaced", CopySource=f"{BUCKET}/copy/source",
               MetadataDirective="REPLACE", Metadata={"b": "2"})
assert s3.head_object(Bucket=BUCKET, Key="copy/replaced")["Metadata"] == {"b": "2"}
assert s3.get_object_tagging(Bucket=BUCKET, Key="copy/kept")["TagSet"] == [{"Key": "t", "Value": "1"}]
deleted = s3.delete_objects(Bucket=BUCKET, Delete={"Objects": [{"Key": k} for k in ["copy/source", "copy/kept", "copy/replaced"]]})
assert sorted(d["Key"] for d in deleted["Deleted"]) == ["copy/kept", "copy/replaced", "copy/source"], deleted
assert s3.list_objects_v2(Bucket=BUCKET, Prefix="copy/").get("KeyCount") == 0
passed("copy_object and delete_objects")
