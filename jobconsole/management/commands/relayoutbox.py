"""python manage.py relayoutbox [--once] [--interval S] [--older-than S]

Publishes outbox entries that were committed but never published (their process died after the commit).
The mirror leader does this too (JOBCONSOLE["MIRROR"]["RELAY_EVERY"]); this command runs it on its own."""

from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand

from jobconsole import outbox
from jobconsole.management.stopping import stop_on_signals


class Command(BaseCommand):
    help = "Publish committed but unpublished transactional-enqueue entries to Redis."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--once", action="store_true", help="one pass, then exit")
        parser.add_argument("--interval", type=float, default=2.0, help="seconds between passes")
        parser.add_argument("--older-than", type=float, default=None, help="only entries committed this long ago")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["once"]:
            total = 0
            while sent := outbox.relay(older_than=options["older_than"]):
                total += sent
            self.stdout.write(f"published {total}")
            return
        stop = stop_on_signals()
        while not stop.is_set():
            try:
                outbox.relay(older_than=options["older_than"])
            except Exception:  # noqa: BLE001 - a failed pass is logged and retried
                self.stderr.write("relay pass failed; retrying")
            stop.wait(options["interval"])
