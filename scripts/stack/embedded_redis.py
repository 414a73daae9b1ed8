"""The private redis-server of `make run` (when REDIS_URL is not set): port 6388 or a free one, AOF on."""

import re
import socket
from pathlib import Path

EMBEDDED_REDIS_PORT = 6388


def port_free(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) != 0


def pick_port(*, default_first: bool = True) -> int:
    if default_first and port_free(EMBEDDED_REDIS_PORT):
        return EMBEDDED_REDIS_PORT
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def command(binary: str, port: int, directory: Path) -> list[str]:
    return [binary, "--port", str(port), "--bind", "127.0.0.1", "--protected-mode", "yes",
            "--dir", str(directory), "--appendonly", "yes", "--appendfsync", "everysec",
            "--save", "", "--maxmemory-policy", "noeviction"]  # fmt: skip


def serving_pid(port: int) -> int | None:
    """The process id of the redis-server answering on `port` (INFO's process_id), or None while none answers.
    Two stacks starting together may both find 6388 free: only one server binds it, and the other stack must
    not take that one for its own."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2) as conn:
            conn.sendall(b"INFO server\r\n")
            reply = b""
            while b"\r\n" not in reply or len(reply) < _bulk_end(reply):
                chunk = conn.recv(65536)
                if not chunk:
                    break
                reply += chunk
    except OSError:
        return None
    found = re.search(rb"process_id:(\d+)", reply)
    return int(found.group(1)) if found else None


def _bulk_end(reply: bytes) -> int:
    """Where a bulk string reply (`$<length>\\r\\n<data>\\r\\n`) ends; a short error reply ends at its line."""
    header, _, _ = reply.partition(b"\r\n")
    if not header.startswith(b"$"):
        return len(header) + 2
    return len(header) + 2 + int(header[1:]) + 2
