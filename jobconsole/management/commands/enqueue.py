"""python manage.py enqueue examples.echo '{"x": 1}' [--count N] [--priority high] [--delay 5] ..."""

import json
from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from jobconsole.core import EnqueueResult, JobQueueError, JobSpec, RedisFull
from jobconsole.engine import get_client


class Command(BaseCommand):
    help = "Enqueue a job (or --count copies, in bulk) and print its id."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("task", help="registered task name, e.g. examples.echo")
        parser.add_argument("params", nargs="?", default="{}", help="parameters as a JSON object")
        parser.add_argument("--id", default=None, help="client-supplied ULID (idempotent)")
        parser.add_argument("--queue", default=None)
        parser.add_argument("--priority", default=None, help="integer (lower first) or high/normal/low")
        parser.add_argument("--delay", type=float, default=None, help="seconds")
        parser.add_argument("--max-retries", type=int, default=None)
        parser.add_argument("--unique-key", default=None)
        parser.add_argument(
            "--unique-until",
            choices=["end", "start"],
            default=None,
            help="hold the unique key until the job ends (end) or starts",
        )
        parser.add_argument("--group", default=None, help="a concurrency group other than the task's ('' for none)")
        parser.add_argument("--run-at", default=None, help="an ISO 8601 time with its zone, e.g. 2030-01-31T09:00:00Z")
        parser.add_argument("--count", type=int, default=1, help="enqueue this many copies in bulk")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            params = json.loads(options["params"])
        except json.JSONDecodeError as exc:
            raise CommandError(f"params are not valid JSON: {exc}") from exc
        priority = options["priority"]
        if priority is not None and priority.lstrip("-").isdigit():
            priority = int(priority)
        spec = JobSpec(
            task=options["task"], params=params, id=options["id"], queue=options["queue"], priority=priority,
            delay=options["delay"], max_retries=options["max_retries"], unique_key=options["unique_key"],
            unique_until=options["unique_until"], group=options["group"], run_at=options["run_at"],
        )  # fmt: skip
        if options["count"] > 1 and options["id"]:
            raise CommandError("--id names one job; it cannot be combined with --count")
        try:
            results = get_client().enqueue_many([spec] * options["count"])
        except RedisFull as full:  # print the jobs that went in before Redis filled up, then the error
            self._print(full.accepted)
            raise CommandError(str(full)) from full
        except JobQueueError as exc:
            raise CommandError(str(exc)) from exc
        self._print(results)

    def _print(self, results: list[EnqueueResult]) -> None:
        for r in results:
            self.stdout.write(f"{r.id} {r.status} {r.state} queue={r.queue}")
