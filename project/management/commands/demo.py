"""python manage.py demo [--rate 3] [--duration S] [--count N] [--seed N]: the demo load of `make run DEMO=1`."""

import signal
from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.db import DatabaseError

from jobconsole.engine import get_client
from project.demo import MIX, QUEUES, DemoLoad

# Periodic jobs for the Schedules page (database rows, editable in the admin), made once.
DEMO_SCHEDULES: dict[str, dict[str, Any]] = {
    "shop-digest": {"task": "examples.send_digest", "params": {"to": "ops@example.com", "period": "daily"},
                    "cron": "0 7 * * *", "timezone": "Europe/Paris"},
    "inventory-sync": {"task": "examples.sync_inventory", "params": {"sku": "SKU-ALL"}, "every_seconds": 300,
                       "misfire": "run_once"},
}  # fmt: skip


class Command(BaseCommand):
    help = "Keep enqueueing a realistic mix of the example tasks (fast, slow, failing, flaky, scheduled, unique)."
    requires_system_checks = []  # it needs Redis only

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--rate", type=float, default=3.0, help="jobs a second, on average (default 3)")
        parser.add_argument("--duration", type=float, default=0.0, help="stop after this many seconds")
        parser.add_argument("--count", type=int, default=0, help="stop after this many jobs")
        parser.add_argument("--max-backlog", type=int, default=200, help="waiting jobs a queue may hold (200)")
        parser.add_argument(
            "--burst-every", type=float, default=60.0, help="seconds between newsletter bursts (0: none)"
        )
        parser.add_argument("--burst-size", type=int, default=100, help="newsletters in a burst (100)")
        parser.add_argument("--seed", type=int, default=None, help="for a repeatable sequence of jobs")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            load = DemoLoad(
                get_client(), rate=options["rate"], max_backlog=options["max_backlog"],
                burst_every=options["burst_every"], burst_size=options["burst_size"], seed=options["seed"],
            )  # fmt: skip
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        stopping = False

        def stop(signum: int, frame: object) -> None:
            nonlocal stopping
            stopping = True

        self._schedules()
        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        self.stdout.write(
            f"demo: about {options['rate']:g} jobs a second of {len(MIX)} kinds onto {', '.join(QUEUES)} "
            f"(at most {options['max_backlog']} waiting per queue); Ctrl-C stops"
        )
        load.run(duration=options["duration"], count=options["count"], stop=lambda: stopping)
        self.stdout.write(f"demo: stopped; {load.summary()}")

    def _schedules(self) -> None:
        """The demo's periodic schedules, when the database is there (the load itself needs Redis only)."""
        from jobconsole.models import PeriodicSchedule

        try:
            for name, fields in DEMO_SCHEDULES.items():
                PeriodicSchedule.objects.get_or_create(name=name, defaults=fields)
        except DatabaseError as exc:
            self.stderr.write(f"demo: no periodic schedules ({exc})")
