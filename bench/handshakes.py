#!/usr/bin/env python3
"""bench/handshakes.py: the tls family's handshake client and its tiny backend.

    handshakes.py echo            listens on 127.0.0.1:0, prints the port, echoes every
                                  connection's bytes back (one thread, non-blocking) until killed
    handshakes.py client PORT N CA
                                  N connections to 127.0.0.1:PORT one after the other, each a
                                  full TLS handshake (a new session: no ticket, no session id
                                  reused), certificate checked against CA for "localhost",
                                  then 16 random bytes out and the same 16 back; prints N
                                  (TCP_NODELAY set, as curl and browsers set it)

Several clients run at once (one process each: a single client is itself the bottleneck,
see NOTEBOOK.md "TLS handshakes per second on `tls-listen`")."""
import os
import selectors
import socket
import ssl
import sys


def echo():
    sel = selectors.DefaultSelector()
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(4096)
    ls.setblocking(False)
    sel.register(ls, selectors.EVENT_READ)
    print(ls.getsockname()[1], flush=True)
    while True:
        for key, _ in sel.select():
            s = key.fileobj
            if s is ls:
                try:
                    c, _ = ls.accept()
                except BlockingIOError:
                    continue
                c.setblocking(False)
                sel.register(c, selectors.EVENT_READ)
                continue
            try:
                data = s.recv(65536)
            except (BlockingIOError, InterruptedError):
                continue
            except OSError:
                data = b""
            if data:
                s.sendall(data)  # 16 bytes into an empty send buffer: never blocks
            else:
                sel.unregister(s)
                s.close()


def client(port, n, ca):
    ctx = ssl.create_default_context(cafile=ca)
    for i in range(n):
        with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
            # as curl and browsers do: without it the 16 bytes wait behind the unacknowledged
            # Finished for the server's delayed ACK (40 ms) when the server sends no ticket
            raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with ctx.wrap_socket(raw, server_hostname="localhost") as s:
                msg = os.urandom(16)
                s.sendall(msg)
                got = b""
                while len(got) < len(msg):
                    chunk = s.recv(len(msg) - len(got))
                    if not chunk:
                        break
                    got += chunk
                if got != msg:
                    sys.exit(f"handshakes.py: connection {i}: sent {msg.hex()}, got back {got.hex()}")
    print(n)


if __name__ == "__main__":
    if sys.argv[1:2] == ["echo"]:
        echo()
    elif sys.argv[1:2] == ["client"] and len(sys.argv) == 5:
        client(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4])
    else:
        sys.exit(__doc__)
