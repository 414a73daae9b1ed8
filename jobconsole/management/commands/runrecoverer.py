"""python manage.py runrecoverer: the maintenance loop alone (recover, promote, retention)."""

from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand

from jobconsole.checks import TAG
from jobconsole.conf import get_config, retention
from jobconsole.core.maintenance import Maintenance
from jobconsole.engine import get_redis
from jobconsole.management.stopping import stop_on_signals


class Command(BaseCommand):
    help = "Recover jobs whose worker died, promote due jobs, enforce retention (leader-locked)."
    # Redis is all it needs: Django's system checks open the database (a JSONField check), and a locked or
    # unreachable database must not keep it from starting. Its own settings checks need no database.
    requires_system_checks = [TAG]

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--interval", type=float, default=1.0, help="seconds between passes")

    def handle(self, *args: Any, **options: Any) -> None:
        stop = stop_on_signals()
        Maintenance(
            get_redis(), events_maxlen=get_config()["EVENTS_MAXLEN"], retention=retention(),
            interval=options["interval"], worker_expiry=get_config()["WORKER_EXPIRY"],
        ).run(stop)  # fmt: skip
