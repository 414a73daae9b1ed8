"""A small TCP proxy on loopback (Toxiproxy-style) that the harness puts between workers and Redis.

Modes: pass (forward), cut (reset every connection with RST and refuse new ones), blackhole (keep
sockets open, forward nothing, so callers hang until their own timeouts), delay (forward each chunk
after a fixed latency). It runs on its own event loop thread; `set_mode` is thread-safe.
"""

import asyncio
import socket
import struct
import threading
from enum import StrEnum


class Mode(StrEnum):
    PASS = "pass"
    CUT = "cut"
    BLACKHOLE = "blackhole"
    DELAY = "delay"


def _reset(writer: asyncio.StreamWriter) -> None:
    """Close with SO_LINGER 0, so the peer gets an RST (a cut cable), not a polite FIN."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:
            pass
    writer.transport.abort()


class Proxy:
    def __init__(self, upstream_port: int, delay: float = 0.3) -> None:
        self.upstream_port = upstream_port
        self.delay = delay
        self.mode = Mode.PASS
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._conns: set[tuple[asyncio.StreamWriter, asyncio.StreamWriter]] = set()
        self._ready = threading.Event()
        self._server: asyncio.Server
        self._thread = threading.Thread(target=self._serve, name="chaos-proxy", daemon=True)

    def start(self) -> "Proxy":
        self._thread.start()
        self._ready.wait(5)
        return self

    def set_mode(self, mode: Mode) -> None:
        asyncio.run_coroutine_threadsafe(self._set_mode(mode), self._loop).result(5)

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop).result(5)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)

    async def _shutdown(self) -> None:
        await self._set_mode(Mode.CUT)
        self._server.close()
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _set_mode(self, mode: Mode) -> None:
        self.mode = mode
        if mode is Mode.CUT:
            for client, upstream in list(self._conns):
                _reset(client)
                _reset(upstream)
            self._conns.clear()

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._server = self._loop.run_until_complete(asyncio.start_server(self._accept, "127.0.0.1", 0))
        self.port = self._server.sockets[0].getsockname()[1]
        self._ready.set()
        self._loop.run_forever()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.mode is Mode.CUT:
            _reset(writer)
            return
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        except OSError:
            _reset(writer)
            return
        pair = (writer, up_writer)
        self._conns.add(pair)
        await asyncio.gather(self._pump(reader, up_writer), self._pump(up_reader, writer), return_exceptions=True)
        self._conns.discard(pair)
        for w in pair:
            w.transport.abort()

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while data := await reader.read(65536):
            while self.mode is Mode.BLACKHOLE:  # hold the bytes: the caller waits as on a dead link
                await asyncio.sleep(0.05)
            if self.mode is Mode.DELAY:
                await asyncio.sleep(self.delay)
            if writer.transport.is_closing():
                return
            writer.write(data)
            await writer.drain()
        writer.transport.abort()  # one side closed: close the other (Redis clients do not half-close)
