"""The private redis-server of `make run` (when REDIS_URL is not set): port 6388 or a free one, AOF on."""

import socket
from pathlib import Path

EMBEDDED_REDIS_PORT = 6388


def port_free(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) != 0


def pick_port() -> int:
    if port_free(EMBEDDED_REDIS_PORT):
        return EMBEDDED_REDIS_PORT
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def command(binary: str, port: int, directory: Path) -> list[str]:
    return [binary, "--port", str(port), "--bind", "127.0.0.1", "--protected-mode", "yes",
            "--dir", str(directory), "--appendonly", "yes", "--appendfsync", "everysec",
            "--save", "", "--maxmemory-policy", "noeviction"]  # fmt: skip
