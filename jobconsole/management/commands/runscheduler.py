"""python manage.py runscheduler: the periodic scheduler alone (any number may run; each slot fires once)."""

from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand

from jobconsole.management.stopping import stop_on_signals
from jobconsole.periodic import build_scheduler


class Command(BaseCommand):
    help = "Fire periodic jobs (settings and database schedules); leader-locked, each slot exactly once."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--interval", type=float, default=None, help="seconds between passes")

    def handle(self, *args: Any, **options: Any) -> None:
        stop = stop_on_signals()
        scheduler = build_scheduler()
        if options["interval"] is not None:
            scheduler.interval = options["interval"]
        scheduler.run(stop)
