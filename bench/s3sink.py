#!/usr/bin/env python3
"""bench/s3sink.py: an S3 server on loopback that keeps nothing, for the s3 family's
10x-size multipart upload (peak RSS): uploads of any bucket and key are answered as S3
answers them (CreateMultipartUpload, UploadPart, CompleteMultipartUpload, AbortMultipartUpload,
PutObject), every body byte is read and checked to be zero, and nothing is written.

    s3sink.py            prints its port, then serves until killed; each completed
                         upload (or single PUT) prints `done BYTES` (0 bytes and `bad` when
                         a body held a non-zero byte or ended short)

No signature is checked (the tool's own signing is what the bench charges it for)."""
import http.server
import sys
import threading
import uuid

ZEROS = bytes(1 << 20)


class Sink(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    uploads = {}  # upload id -> bytes received (-1: a bad byte)
    objects = {}  # path -> bytes of the last upload completed there (for a HEAD after it)
    lock = threading.Lock()

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

    def answer(self, status, body=b"", headers=()):
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def query(self):
        q = {}
        if "?" in self.path:
            for kv in self.path.split("?", 1)[1].split("&"):
                k, _, v = kv.partition("=")
                q[k] = v
        return q

    def do_POST(self):
        q = self.query()
        body = self.rfile.read(int(self.headers.get("content-length") or 0))
        if "uploads" in q:
            uid = uuid.uuid4().hex
            with self.lock:
                self.uploads[uid] = 0
            xml = (f"<?xml version=\"1.0\" encoding=\"UTF-8\"?><InitiateMultipartUploadResult>"
                   f"<Bucket>b</Bucket><Key>k</Key><UploadId>{uid}</UploadId></InitiateMultipartUploadResult>")
            return self.answer(200, xml.encode(), [("Content-Type", "application/xml")])
        uid = q.get("uploadId")
        with self.lock:
            total = self.uploads.pop(uid, None)
        if total is None:
            return self.answer(404, b"<Error><Code>NoSuchUpload</Code></Error>")
        del body
        self.done(total)
        xml = ("<?xml version=\"1.0\" encoding=\"UTF-8\"?><CompleteMultipartUploadResult>"
               "<Bucket>b</Bucket><Key>k</Key><ETag>\"sink-1\"</ETag></CompleteMultipartUploadResult>")
        return self.answer(200, xml.encode(), [("Content-Type", "application/xml")])

    def do_PUT(self):
        q = self.query()
        got = self.drain()
        uid = q.get("uploadId")
        if uid is not None:
            with self.lock:
                if uid not in self.uploads:
                    return self.answer(404, b"<Error><Code>NoSuchUpload</Code></Error>")
                if got < 0 or self.uploads[uid] < 0:
                    self.uploads[uid] = -1
                else:
                    self.uploads[uid] += got
        else:
            self.done(got)
        self.answer(200, headers=[("ETag", f"\"{uuid.uuid4().hex}\"")])

    def done(self, total):
        """An object is complete: `done BYTES` (or `done bad`) on stdout."""
        self.objects[self.path.split("?", 1)[0]] = max(total, 0)
        print("done", total if total >= 0 else "bad", flush=True)

    def do_DELETE(self):
        with self.lock:
            self.uploads.pop(self.query().get("uploadId"), None)
        self.answer(204)

    def do_HEAD(self):
        """The size of what was completed at the path (rclone checks it after an upload);
        a multipart-style ETag, which no peer takes for an MD5."""
        size = self.objects.get(self.path.split("?", 1)[0])
        if size is None:
            return self.answer(404)
        self.send_response(200)
        for k, v in (("Content-Length", str(size)), ("ETag", "\"sink-1\""),
                     ("Last-Modified", "Thu, 26 Nov 2026 00:00:00 GMT")):
            self.send_header(k, v)
        self.end_headers()

    def do_GET(self):
        self.answer(404, b"<Error><Code>NoSuchKey</Code></Error>")


def main():
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Sink)
    srv.daemon_threads = True
    print(srv.server_address[1], flush=True)
    srv.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
