"""python manage.py runmirror: the database mirror alone (plus the outbox relay and database retention)."""

from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand

from jobconsole.management.heap import freeze_startup_heap
from jobconsole.management.stopping import stop_on_signals
from jobconsole.mirror.service import build_service


class Command(BaseCommand):
    help = "Mirror every queue's job and dead-letter state into the database (leader-locked)."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--batch", type=int, default=None, help="events per transaction")
        parser.add_argument("--burst", action="store_true", help="exit once every stream is applied")

    def handle(self, *args: Any, **options: Any) -> None:
        overrides: dict[str, Any] = {}
        if options["batch"]:
            overrides["batch"] = options["batch"]
        service = build_service(**overrides)
        freeze_startup_heap()
        if options["burst"]:
            service.burst()
            mirror = service.mirror
            self.stdout.write(f"applied {mirror.writer.events_applied} events, resyncs={mirror.resync.count}")
            return
        service.run(stop_on_signals())
