"""Sidekiq peer adapter: Debian's ruby-sidekiq, worker = the sidekiq CLI, producer = Sidekiq::Client in Ruby.

Run with any python that has redis-py (run_peers.py uses the project's venv); see _common.py for the CLI and
method, bench/peers/sidekiq_bench.rb for the Ruby side.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from typing import Any

if __name__ == "__main__":  # delegate so that the harness imports us by name, as the Python peers
    from _common import main

    sys.exit(main("sidekiq_bench"))

from _common import ForeignProducer

CONCURRENCY = 10  # Sidekiq's default
WORKER_ARGS = ["-r", "./sidekiq_bench.rb", "-c", str(CONCURRENCY)]
SIDEKIQ = shutil.which("sidekiq") or "sidekiq"

producer = ForeignProducer(["ruby", "sidekiq_bench.rb", "produce"], "sidekiq")


def version() -> str:
    out = subprocess.run(
        ["ruby", "-e", 'require "sidekiq"; print Sidekiq::VERSION, " (Ruby ", RUBY_VERSION, ")"'],
        capture_output=True,
        text=True,
    )
    return out.stdout.strip() or "unknown"


def worker_commands(workers: int) -> list[list[str]]:
    return [[SIDEKIQ, *WORKER_ARGS] for _ in range(workers)]


def config(workers: int) -> dict[str, Any]:
    return {
        "worker_cmd": f"{workers} x sidekiq {' '.join(WORKER_ARGS)}",
        "producer": "BenchJob.perform_async(params), one call a job (Sidekiq::Client, ruby-redis)",
        "fetch": "BasicFetch: BRPOP with a 2 s timeout (default)",
        "log_level": "WARN (Sidekiq.logger.level; INFO logs every job)",
        "results": "none (Sidekiq keeps no results)",
    }


PEER = producer.peer(
    "sidekiq",
    version(),
    "Sidekiq::Client.push_bulk per 1000 jobs (one LPUSH of all of them)",
    worker_commands=worker_commands,
    config=config,
)
