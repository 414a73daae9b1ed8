"""python manage.py runmirror: the database mirror alone (plus the outbox relay and database retention)."""

import os
from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand

from jobconsole.management.stopping import stop_on_signals
from jobconsole.mirror.loop import build_mirror


class Command(BaseCommand):
    help = "Mirror every queue's job and dead-letter state into the database (leader-locked)."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--batch", type=int, default=None, help="events per transaction")
        parser.add_argument("--burst", action="store_true", help="exit once every stream is applied")

    def handle(self, *args: Any, **options: Any) -> None:
        overrides: dict[str, Any] = {}
        if options["batch"]:
            overrides["batch"] = options["batch"]
        mirror = build_mirror(**overrides)
        fault = os.environ.get("JOBCONSOLE_MIRROR_FAULT", "")
        if fault:
            mirror.fault = _fault_hook(fault)
        if options["burst"]:
            try:
                mirror.drain()
                mirror.run_periodic()
            finally:
                mirror.release()
            self.stdout.write(f"applied {mirror.events_applied} events, resyncs={mirror.resyncs}")
            return
        stop = stop_on_signals()
        mirror.run(stop)


def _fault_hook(spec: str) -> Any:
    """Test hook, JOBCONSOLE_MIRROR_FAULT="<before_commit|after_commit>:<n>": the process exits at once
    (no cleanup, like SIGKILL) at that point of its n-th batch."""
    point, _, n = spec.partition(":")
    seen = {"count": 0}

    def hook(at: str) -> None:
        if at != point:
            return
        seen["count"] += 1
        if seen["count"] >= int(n or 1):
            os._exit(137)  # mid-transaction (before_commit) or between commit and XACK (after_commit)

    return hook
