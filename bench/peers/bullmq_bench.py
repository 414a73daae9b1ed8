"""BullMQ peer adapter: npm's bullmq (bench/node/, installed in var/bench/node), worker = a Node process holding
one Worker of concurrency 10, producer = Queue.add in Node.

Run with any python that has redis-py (run_peers.py uses the project's venv); see _common.py for the CLI and
method, bench/peers/bullmq_bench.js for the Node side.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

if __name__ == "__main__":  # delegate so that the harness imports us by name, as the Python peers
    from _common import main

    sys.exit(main("bullmq_bench"))

from _common import PEERS_DIR, ForeignProducer

NODE_MODULES = PEERS_DIR.parent.parent / "var" / "bench" / "node" / "node_modules"
os.environ["NODE_PATH"] = str(NODE_MODULES)  # the workers inherit it with the rest of the environment
WORKER_ARGV = ["node", "bullmq_bench.js", "worker"]

producer = ForeignProducer(["node", "bullmq_bench.js", "produce"], "bullmq")


def version() -> str:
    package = json.loads((NODE_MODULES / "bullmq" / "package.json").read_text())
    node = subprocess.run(["node", "--version"], capture_output=True, text=True).stdout.strip()
    return f"{package['version']} (Node {node.lstrip('v')})"


def worker_commands(workers: int) -> list[list[str]]:
    return [WORKER_ARGV for _ in range(workers)]


def config(workers: int) -> dict[str, Any]:
    return {
        "worker_cmd": f"{workers} x node bullmq_bench.js worker (new Worker('bench', processor, {{concurrency: 10}}))",
        "producer": "await queue.add('noop', params), one call a job",
        "retention": "BullMQ's defaults (completed jobs kept: no removeOnComplete)",
        "log_level": "none (BullMQ logs nothing per job)",
    }


PEER = producer.peer(
    "bullmq",
    version() if Path(NODE_MODULES / "bullmq").exists() else "not installed",
    "queue.addBulk per 1000 jobs (one MULTI of their scripts)",
    worker_commands=worker_commands,
    config=config,
)
