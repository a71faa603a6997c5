#!/usr/bin/env python3
"""Follows a video's HLS playlists through Ferry's playback addresses with the Python m3u8 package.

    playback_check.py MASTER_URL --token TOKEN
    playback_check.py MASTER_URL --key PRIVATE_KEY.pem --kid KEY_ID --video VIDEO_ID [--algorithm ES256]

With --key, the token is minted here with PyJWT (another JWT library than the server's). The master playlist and
every playlist it names are fetched with the token and parsed by m3u8; every URI in them must carry the token, and
each playlist's init section and first segment are fetched. Prints one JSON line: the playlists parsed, the variants,
the segments counted, and the URIs that lack the token (none expected).
"""
import argparse
import json
import sys
import time
import urllib.parse
import urllib.request

import m3u8


def fetch(url):
    with urllib.request.urlopen(url, timeout=30) as response:
        return response.status, response.read()


def has_token(uri, token):
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(uri).query)
    return query.get("token") == [token]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("master")
    parser.add_argument("--token")
    parser.add_argument("--key")
    parser.add_argument("--kid")
    parser.add_argument("--video")
    parser.add_argument("--algorithm", default="ES256")
    args = parser.parse_args()
    token = args.token
    if token is None:
        import jwt

        with open(args.key) as file:
            private_key = file.read()
        claims = {"sub": args.video, "aud": "v", "exp": int(time.time()) + 300}
        token = jwt.encode(claims, private_key, algorithm=args.algorithm, headers={"kid": args.kid})
    master_url = args.master + ("&" if "?" in args.master else "?") + "token=" + token
    status, body = fetch(master_url)
    master = m3u8.loads(body.decode(), uri=master_url)
    report = {"masterStatus": status, "isVariant": master.is_variant, "playlists": 0, "variants": [],
              "segments": 0, "fetched": 0, "missingToken": []}
    media_uris = [playlist.absolute_uri for playlist in master.playlists]
    media_uris += [media.absolute_uri for media in master.media if media.uri]
    report["variants"] = [playlist.uri.split("?")[0] for playlist in master.playlists]
    for uri in [playlist.uri for playlist in master.playlists] + [media.uri for media in master.media if media.uri]:
        if not has_token(uri, token):
            report["missingToken"].append(uri)
    report["playlists"] = 1
    for uri in media_uris:
        status, body = fetch(uri)
        playlist = m3u8.loads(body.decode(), uri=uri)
        report["playlists"] += 1
        report["segments"] += len(playlist.segments)
        named = [segment.uri for segment in playlist.segments]
        named += [section.uri for section in playlist.segment_map or [] if section.uri]
        report["missingToken"] += [name for name in named if not has_token(name, token)]
        firsts = [section.absolute_uri for section in playlist.segment_map or [] if section.uri]
        firsts += [playlist.segments[0].absolute_uri] if playlist.segments else []
        for first in firsts:
            status, _ = fetch(first)
            if status == 200:
                report["fetched"] += 1
    print(json.dumps(report))


if __name__ == "__main__":
    try:
        main()
    except Exception as error:  # the test reads the reason
        print(json.dumps({"error": repr(error)}))
        sys.exit(1)
