"""python manage.py runrecoverer: the maintenance loop alone (recover, promote, retention)."""

import signal
import threading
from argparse import ArgumentParser
from types import FrameType
from typing import Any

from django.core.management.base import BaseCommand

from jobconsole.conf import get_config
from jobconsole.core.maintenance import Maintenance
from jobconsole.engine import get_redis, retention


class Command(BaseCommand):
    help = "Recover jobs whose worker died, promote due jobs, enforce retention (leader-locked)."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--interval", type=float, default=1.0, help="seconds between passes")

    def handle(self, *args: Any, **options: Any) -> None:
        stop = threading.Event()

        def on_signal(signum: int, frame: FrameType | None) -> None:
            stop.set()

        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)
        Maintenance(
            get_redis(), events_maxlen=get_config()["EVENTS_MAXLEN"], retention=retention(),
            interval=options["interval"],
        ).run(stop)  # fmt: skip
