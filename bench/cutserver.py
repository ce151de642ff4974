#!/usr/bin/env python3
"""cutserver: an HTTP/1.1 server of one file for bench/run's http family (issue 38) that cuts
the connection every N bytes of body it has sent, counted across connections: the "download
cut every 100 MiB" row. It answers Range (`bytes=N-`, `bytes=N-M`) with 206 and honours
If-Range against its strong ETag (from the file's size and mtime); the body goes out with
sendfile, so the server costs about what nginx does. A cut closes with an RST (SO_LINGER 0),
the way a dropped connection looks to a client. --cut-every 0 never cuts (the uncut
reference, same server).

    cutserver.py FILE --cut-every BYTES    prints its port on stdout, serves until killed
"""
import argparse
import os
import socket
import struct
import sys
import threading


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("file")
    ap.add_argument("--cut-every", type=int, default=0, help="bytes of body between two cuts (0: never)")
    args = ap.parse_args()
    size = os.path.getsize(args.file)
    st = os.stat(args.file)
    etag = f'"{st.st_size:x}-{st.st_mtime_ns:x}"'
    lock = threading.Lock()
    sent_total = [0]  # body bytes sent, all connections

    def budget(want):
        """How much of `want` this answer may send before the next cut, and whether it cuts."""
        if not args.cut_every:
            return want, False
        with lock:
            left = args.cut_every - sent_total[0] % args.cut_every
            n = min(want, left)
            sent_total[0] += n
            return n, n == left and n < want

    def serve(conn):
        with conn:
            head = b""
            while b"\r\n\r\n" not in head:
                got = conn.recv(65536)
                if not got:
                    return
                head += got
            lines = head.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")
            hdr = {k.strip().lower(): v.strip() for k, v in (ln.split(":", 1) for ln in lines[1:] if ":" in ln)}
            start, end = 0, size
            status = "200 OK"
            rng = hdr.get("range", "")
            if rng.startswith("bytes=") and hdr.get("if-range", etag) == etag:
                a, b = rng[6:].split("-", 1)
                start = int(a)
                end = min(int(b) + 1, size) if b else size
                if start >= size:
                    conn.sendall(f"HTTP/1.1 416 Range Not Satisfiable\r\nContent-Range: bytes */{size}\r\n"
                                 "Content-Length: 0\r\nConnection: close\r\n\r\n".encode())
                    return
                status = "206 Partial Content"
            out = (f"HTTP/1.1 {status}\r\nServer: cutserver\r\nETag: {etag}\r\nAccept-Ranges: bytes\r\n"
                   f"Content-Length: {end - start}\r\nConnection: close\r\n")
            if status.startswith("206"):
                out += f"Content-Range: bytes {start}-{end - 1}/{size}\r\n"
            conn.sendall((out + "\r\n").encode())
            n, cut = budget(end - start)
            with open(args.file, "rb") as f:
                off, stop = start, start + n
                while off < stop:
                    try:
                        k = os.sendfile(conn.fileno(), f.fileno(), off, stop - off)
                    except OSError:
                        return
                    if k == 0:
                        break
                    off += k
            if cut:
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            else:
                conn.shutdown(socket.SHUT_WR)
                try:
                    while conn.recv(65536):
                        pass
                except OSError:
                    pass

    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", 0))
    ls.listen(128)
    print(ls.getsockname()[1], flush=True)
    while True:
        conn, _ = ls.accept()
        threading.Thread(target=serve, args=(conn,), daemon=True).start()


if __name__ == "__main__":
    sys.exit(main())
