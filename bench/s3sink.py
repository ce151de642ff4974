#!/usr/bin/env python3
"""bench/s3sink.py: an S3 server on loopback that costs (almost) nothing a byte, so that the
s3 family's rows measure the clients, not the server. Two modes:

    s3sink.py            the 10x multipart upload's sink (peak RSS row): uploads of any bucket
                         and key are answered as S3 answers them, every body byte is read and
                         checked to be zero, nothing is kept; each completed upload (or single
                         PUT) prints `done BYTES` (`done bad` when a body held a non-zero byte
                         or ended short)
    s3sink.py --root DIR the fast server: GET/HEAD serve DIR/BUCKET/KEY with os.sendfile
                         (`Range: bytes=a-b` answered 206 with Content-Range; ETag,
                         Last-Modified, `If-Match`), ListObjectsV2 (and v1) list the files under
                         DIR/BUCKET with their ETag; PUT and UploadPart splice the body into
                         /dev/null and keep only 4 KiB windows of it (the first, the last and
                         two at random offsets of every body) as SHA-256; the object's windows,
                         at their offsets in the object, are `GET /_sink/BUCKET/KEY` (JSON
                         {"size": N, "windows": [[offset, length, sha256], ...]}), which the
                         bench row checks against its data; DELETE of a key forgets it

Both print the port first, then serve until killed. HTTP/1.1 keep-alive, one thread per
connection; no signature is checked (the tool's own signing is what the bench charges it for).
ETags carry a dash (multipart style), so that no client takes them for an MD5 of the body."""
import argparse
import email.utils
import fcntl
import hashlib
import http.server
import json
import os
import random
import sys
import threading
import time
import urllib.parse
import uuid
from xml.sax.saxutils import escape

ZEROS = bytes(1 << 20)
WINDOW = 4096
PIPE_SIZE = 1 << 20
F_SETPIPE_SZ = 1031


def etag_of(st):
    return f"\"{st.st_size:x}{st.st_mtime_ns:x}-1\""


class Sink(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    root = None  # --root: the fast server; None: the zeros sink
    uploads = {}  # upload id -> bytes received (-1: a bad byte); --root: {part: (size, windows)}
    objects = {}  # path -> bytes of the last upload completed there; --root: (size, windows)
    lock = threading.Lock()
    devnull = None

    def log_message(self, *a):
        pass

    def drain(self):
        """Reads the body (Content-Length bytes); its length, or -1 if a byte was not zero."""
        left = int(self.headers.get("content-length") or 0)
        got, ok = 0, True
        buf = bytearray(1 << 20)
        view = memoryview(buf)
        while left:
            n = self.rfile.readinto(view[:min(left, len(buf))])
            if not n:
                return -1
            # bytearray against bytes is a memcmp; memoryviews compare item by item (9 s/GiB)
            if (buf if n == len(buf) else buf[:n]) != (ZEROS if n == len(buf) else ZEROS[:n]):
                ok = False
            got += n
            left -= n
        return got if ok else -1

    def skip(self, n, pipe):
        """Consumes n body bytes: what the buffered reader holds, then the rest spliced from
        the socket into /dev/null through `pipe` (no copy into this process)."""
        while n:
            held = self.rfile.peek(1)  # the buffer, or one read when it is empty
            if not held:
                raise ConnectionError("body ended short")
            k = min(len(held), n)
            self.rfile.read(k)
            n -= k
            sock = self.connection.fileno()
            while n:
                got = os.splice(sock, pipe[1], min(n, PIPE_SIZE))
                if not got:
                    raise ConnectionError("body ended short")
                while got:
                    out = os.splice(pipe[0], self.devnull, got)
                    got -= out
                    n -= out

    def sample(self):
        """Reads the body, keeping only windows of it: (size, [(offset, length, sha256)])."""
        if "aws-chunked" in (self.headers.get("content-encoding") or ""):
            raise ValueError("aws-chunked bodies are not decoded here")
        size = int(self.headers.get("content-length") or 0)
        if size <= 2 * WINDOW:
            body = self.rfile.read(size)
            if len(body) != size:
                raise ConnectionError("body ended short")
            return size, [(0, size, hashlib.sha256(body).hexdigest())]
        offs = {0, size - WINDOW, *(random.randrange(size - WINDOW) for _ in range(2))}
        spans = []
        for o in sorted(offs):
            if not spans or o >= spans[-1][0] + spans[-1][1]:
                spans.append((o, WINDOW))
        pipe = os.pipe()
        try:
            fcntl.fcntl(pipe[1], F_SETPIPE_SZ, PIPE_SIZE)
            pos, windows = 0, []
            for o, n in spans:
                self.skip(o - pos, pipe)
                data = self.rfile.read(n)
                if len(data) != n:
                    raise ConnectionError("body ended short")
                windows.append((o, n, hashlib.sha256(data).hexdigest()))
                pos = o + n
            self.skip(size - pos, pipe)
        finally:
            os.close(pipe[0])
            os.close(pipe[1])
        return size, windows

    def answer(self, status, body=b"", headers=()):
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def error(self, status, code):
        self.answer(status, f"<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>{code}</Code></Error>".encode(),
                    [("Content-Type", "application/xml")])

    def split(self):
        """(path without the query, {query key: value})."""
        path, _, query = self.path.partition("?")
        return urllib.parse.unquote(path), dict(urllib.parse.parse_qsl(query, keep_blank_values=True))

    def do_POST(self):
        path, q = self.split()
        body = self.rfile.read(int(self.headers.get("content-length") or 0))
        if "uploads" in q:
            uid = uuid.uuid4().hex
            with self.lock:
                self.uploads[uid] = {} if self.root else 0
            xml = (f"<?xml version=\"1.0\" encoding=\"UTF-8\"?><InitiateMultipartUploadResult>"
                   f"<Bucket>b</Bucket><Key>k</Key><UploadId>{uid}</UploadId></InitiateMultipartUploadResult>")
            return self.answer(200, xml.encode(), [("Content-Type", "application/xml")])
        uid = q.get("uploadId")
        with self.lock:
            total = self.uploads.pop(uid, None)
        if total is None:
            return self.error(404, "NoSuchUpload")
        if self.root:
            # the parts the Complete names, in its order, at the offsets their sizes make
            numbers = [int(n) for n in body.decode().replace("</PartNumber>", "<PartNumber>").split("<PartNumber>")[1::2]]
            size, windows = 0, []
            for n in numbers:
                if n not in total:
                    return self.error(400, "InvalidPart")
                part, w = total[n]
                windows += [(size + o, ln, h) for o, ln, h in w]
                size += part
            with self.lock:
                self.objects[path] = (size, windows)
        else:
            self.done(path, total)
        xml = ("<?xml version=\"1.0\" encoding=\"UTF-8\"?><CompleteMultipartUploadResult>"
               "<Bucket>b</Bucket><Key>k</Key><ETag>\"sink-1\"</ETag></CompleteMultipartUploadResult>")
        return self.answer(200, xml.encode(), [("Content-Type", "application/xml")])

    def do_PUT(self):
        path, q = self.split()
        uid = q.get("uploadId")
        if self.root:
            got = self.sample()
            with self.lock:
                if uid is None:
                    self.objects[path] = got
                elif uid in self.uploads:
                    self.uploads[uid][int(q.get("partNumber") or 0)] = got
                else:
                    return self.error(404, "NoSuchUpload")
            return self.answer(200, headers=[("ETag", f"\"{uuid.uuid4().hex}-1\"")])
        got = self.drain()
        if uid is not None:
            with self.lock:
                if uid not in self.uploads:
                    return self.error(404, "NoSuchUpload")
                if got < 0 or self.uploads[uid] < 0:
                    self.uploads[uid] = -1
                else:
                    self.uploads[uid] += got
        else:
            self.done(path, got)
        self.answer(200, headers=[("ETag", f"\"{uuid.uuid4().hex}-1\"")])

    def done(self, path, total):
        """An object is complete: `done BYTES` (or `done bad`) on stdout."""
        self.objects[path] = max(total, 0)
        print("done", total if total >= 0 else "bad", flush=True)

    def do_DELETE(self):
        path, q = self.split()
        with self.lock:
            if "uploadId" in q:
                self.uploads.pop(q["uploadId"], None)
            else:
                self.objects.pop(path, None)
        self.answer(204)

    def file_of(self, path):
        """The file under --root that a /BUCKET/KEY path names, or None."""
        if not self.root or ".." in path.split("/"):
            return None
        f = os.path.join(self.root, path.lstrip("/"))
        return f if os.path.isfile(f) else None

    def do_HEAD(self):
        self.do_GET()

    def do_GET(self):
        path, q = self.split()
        if path.startswith("/_sink/"):
            got = self.objects.get(path[len("/_sink"):])
            if not isinstance(got, tuple):
                return self.error(404, "NoSuchKey")
            return self.answer(200, json.dumps({"size": got[0], "windows": got[1]}).encode(),
                               [("Content-Type", "application/json")])
        if self.root and "/" not in path.strip("/"):  # /BUCKET or /BUCKET/: a listing
            return self.list_objects(path.strip("/"), q)
        f = self.file_of(path)
        if f is None:
            # what was uploaded here: its size (rclone HEADs an object after its upload)
            got = self.objects.get(path)
            if got is None or self.command != "HEAD":
                return self.error(404, "NoSuchKey")
            size = got[0] if isinstance(got, tuple) else got
            self.send_response(200)
            for k, v in (("Content-Length", str(size)), ("ETag", "\"sink-1\""),
                         ("Last-Modified", "Thu, 26 Nov 2026 00:00:00 GMT")):
                self.send_header(k, v)
            return self.end_headers()
        self.send_object(f)

    def send_object(self, f):
        with open(f, "rb") as src:
            st = os.fstat(src.fileno())
            etag, size = etag_of(st), st.st_size
            match = self.headers.get("if-match")
            if match and match.strip() not in ("*", etag):
                return self.error(412, "PreconditionFailed")
            start, end, status = 0, size, 200
            rng = self.headers.get("range")
            if rng and rng.startswith("bytes=") and "," not in rng:
                a, _, b = rng[6:].partition("-")
                if a:
                    start, end = int(a), min(int(b) + 1, size) if b else size
                elif b:
                    start = max(size - int(b), 0)
                if start >= end:
                    return self.answer(416, headers=[("Content-Range", f"bytes */{size}")])
                status = 206
            self.send_response(status)
            headers = [("Content-Length", str(end - start)), ("ETag", etag), ("Accept-Ranges", "bytes"),
                       ("Last-Modified", email.utils.formatdate(st.st_mtime, usegmt=True)),
                       ("Content-Type", "application/octet-stream")]
            if status == 206:
                headers.append(("Content-Range", f"bytes {start}-{end - 1}/{size}"))
            for k, v in headers:
                self.send_header(k, v)
            self.end_headers()
            if self.command == "HEAD":
                return
            sock, pos = self.connection.fileno(), start
            while pos < end:
                n = os.sendfile(sock, src.fileno(), pos, min(end - pos, 1 << 30))
                if not n:
                    raise ConnectionError("file shrank")
                pos += n

    def list_objects(self, bucket, q):
        """ListObjectsV2 (list-type=2: continuation-token, start-after) or v1 (marker), of
        the files under --root/BUCKET in key order, max-keys (at most 1000) a page; with a
        delimiter, what lies deeper is one CommonPrefixes entry."""
        top = os.path.join(self.root, bucket)
        if not os.path.isdir(top):
            return self.error(404, "NoSuchBucket")
        prefix, delim = q.get("prefix", ""), q.get("delimiter", "")
        v2 = q.get("list-type") == "2"
        after = (q.get("continuation-token") or q.get("start-after", "")) if v2 else q.get("marker", "")
        limit = min(int(q.get("max-keys") or 1000), 1000)
        entries = set()  # (name, is a common prefix)
        for d, _, fs in os.walk(os.path.join(top, os.path.dirname(prefix))):
            for f in fs:
                k = os.path.relpath(os.path.join(d, f), top)
                if f.startswith(".") or not k.startswith(prefix):
                    continue
                cut = k.find(delim, len(prefix)) if delim else -1
                entries.add((k[:cut + len(delim)], True) if cut >= 0 else (k, False))
        entries = sorted(e for e in entries if e[0] > after)
        page, more = entries[:limit], len(entries) > limit
        out = ["<?xml version=\"1.0\" encoding=\"UTF-8\"?>",
               "<ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">",
               f"<Name>{escape(bucket)}</Name><Prefix>{escape(prefix)}</Prefix><MaxKeys>{limit}</MaxKeys>",
               f"<Delimiter>{escape(delim)}</Delimiter>" if delim else "",
               f"<IsTruncated>{'true' if more else 'false'}</IsTruncated>"]
        if v2:
            out.append(f"<KeyCount>{len(page)}</KeyCount>")
            if more:
                out.append(f"<NextContinuationToken>{escape(page[-1][0])}</NextContinuationToken>")
        elif more:
            out.append(f"<NextMarker>{escape(page[-1][0])}</NextMarker>")
        for k, common in page:
            if common:
                out.append(f"<CommonPrefixes><Prefix>{escape(k)}</Prefix></CommonPrefixes>")
                continue
            st = os.stat(os.path.join(top, k))
            iso = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(st.st_mtime))
            out.append(f"<Contents><Key>{escape(k)}</Key><LastModified>{iso}</LastModified>"
                       f"<ETag>{escape(etag_of(st))}</ETag><Size>{st.st_size}</Size>"
                       "<StorageClass>STANDARD</StorageClass></Contents>")
        out.append("</ListBucketResult>")
        self.answer(200, "".join(out).encode(), [("Content-Type", "application/xml")])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", help="serve DIR/BUCKET/KEY; PUTs kept as sampled windows")
    args = ap.parse_args()
    Sink.root = os.path.abspath(args.root) if args.root else None
    Sink.devnull = os.open(os.devnull, os.O_WRONLY)
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Sink)
    srv.daemon_threads = True
    print(srv.server_address[1], flush=True)
    srv.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
