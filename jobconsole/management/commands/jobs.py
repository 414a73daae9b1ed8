"""python manage.py jobs show|cancel|requeue|delete|pause|resume|queues ..."""

import json
from argparse import ArgumentParser
from dataclasses import asdict
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from jobconsole.core import JobQueueError, JobState
from jobconsole.core.states import REQUEUEABLE_STATES
from jobconsole.engine import get_client


class Command(BaseCommand):
    help = "Inspect and operate jobs and queues from the shell."

    def add_arguments(self, parser: ArgumentParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True)
        sub.add_parser("queues", help="every queue with its counts")
        for name in ("show", "cancel", "delete"):
            sub.add_parser(name).add_argument("job_id")
        requeueable = "/".join(s.value for s in JobState if s in REQUEUEABLE_STATES)
        requeue = sub.add_parser("requeue", help=f"run a {requeueable} job (again)")
        requeue.add_argument("job_id")
        requeue.add_argument("--reset-attempts", action="store_true")
        for name in ("pause", "resume"):
            sub.add_parser(name).add_argument("queue")

    def handle(self, *args: Any, **options: Any) -> None:
        client = get_client()
        action = options["action"]
        try:
            if action == "queues":
                for queue in client.queues():
                    c = client.counts(queue)
                    counts = " ".join(f"{name}={n}" for name, n in c.by_state().items())
                    self.stdout.write(f"{queue:<24} {'PAUSED ' if c.paused else ''}{counts}")
            elif action == "show":
                job = client.get(options["job_id"])
                data: dict[str, Any] = {k: v for k, v in job.raw.items() if k != "token"}
                data["history"] = [asdict(a) for a in job.history]
                if job.payload_error:  # params or checkpoint written by other hands: say what is wrong
                    data["payload_error"] = job.payload_error
                self.stdout.write(json.dumps(data, indent=2, default=str))
            elif action == "cancel":
                self.stdout.write(client.cancel(options["job_id"]))
            elif action == "requeue":
                client.requeue(options["job_id"], reset_attempts=options["reset_attempts"])
                self.stdout.write("queued")
            elif action == "delete":
                client.delete(options["job_id"])
                self.stdout.write("deleted")
            elif action in ("pause", "resume"):
                changed = getattr(client, action)(options["queue"])
                self.stdout.write(f"{action}d" if changed else f"already {action}d")
        except JobQueueError as exc:
            raise CommandError(str(exc)) from exc
