#!/usr/bin/env python3
"""bench/wsrelay.py: a TCP-over-WebSocket tunnel in Python's `websockets` (asyncio), the peer
of zerocat's `relay tcp-listen: ws://` and `relay ws-listen: tcp:` in bench/run's ops family
(bench/lib/ops.py). One connection, then it exits (as `relay --once`).

    wsrelay.py client LISTEN_PORT WS_URL   accepts one TCP client on 127.0.0.1:LISTEN_PORT (0:
                                           any; the port is printed), connects to WS_URL
    wsrelay.py server TCP_PORT             listens for one WebSocket client on 127.0.0.1:0
                                           (the port is printed), connects to 127.0.0.1:TCP_PORT

Each TCP read (up to 256 KiB) is one binary message; each message is written to TCP as it
comes. A TCP EOF closes the WebSocket (code 1000), which the other half turns into a TCP
half-close (shutdown SHUT_WR); the halves end when both directions did."""
import asyncio
import sys

import websockets

READ = 256 << 10


async def tcp_to_ws(reader, ws):
    while True:
        data = await reader.read(READ)
        if not data:
            break
        await ws.send(data)
    await ws.close()


async def ws_to_tcp(ws, writer):
    try:
        async for message in ws:
            writer.write(message if isinstance(message, bytes) else message.encode())
            await writer.drain()
    except websockets.ConnectionClosed:
        pass
    if writer.can_write_eof():
        writer.write_eof()
    await writer.drain()


async def client(listen_port, url):
    done = asyncio.get_running_loop().create_future()

    async def one(reader, writer):
        async with websockets.connect(url, max_size=None, compression=None) as ws:
            await asyncio.gather(tcp_to_ws(reader, ws), ws_to_tcp(ws, writer))
        writer.close()
        if not done.done():
            done.set_result(None)

    server = await asyncio.start_server(one, "127.0.0.1", listen_port)
    print(server.sockets[0].getsockname()[1], flush=True)
    await done
    server.close()


async def server(tcp_port):
    done = asyncio.get_running_loop().create_future()

    async def one(ws):
        reader, writer = await asyncio.open_connection("127.0.0.1", tcp_port)
        await asyncio.gather(ws_to_tcp(ws, writer), tcp_to_ws(reader, ws))
        writer.close()
        if not done.done():
            done.set_result(None)

    async with websockets.serve(one, "127.0.0.1", 0, max_size=None, compression=None) as srv:
        print(srv.sockets[0].getsockname()[1], flush=True)
        await done


if __name__ == "__main__":
    if sys.argv[1] == "client":
        asyncio.run(client(int(sys.argv[2]), sys.argv[3]))
    else:
        asyncio.run(server(int(sys.argv[2])))
