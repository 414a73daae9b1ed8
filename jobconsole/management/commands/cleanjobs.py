"""python manage.py cleanjobs [--task T] [--queue Q] [--state S] [--before WHEN] [--after WHEN] [--dry-run]"""

import re
from argparse import ArgumentParser
from datetime import UTC, datetime, timedelta
from typing import Any

from django.core.management.base import BaseCommand, CommandError
from tqdm import tqdm

from jobconsole import audit
from jobconsole.cleaning import CleanFilter, clean, find_jobs, summarize
from jobconsole.core.states import TERMINAL_STATES, JobState
from jobconsole.engine import get_client

_AGE = re.compile(r"^(\d+(?:\.\d+)?)([smhdw])$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 7 * 86_400}


def parse_when(value: str) -> datetime:
    """An age ("7d", "12h", "30m") meaning that long ago, or an ISO date/time (UTC when no zone is given)."""
    if match := _AGE.match(value.strip()):
        return datetime.now(UTC) - timedelta(seconds=float(match[1]) * _UNITS[match[2]])
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise CommandError(f"not an age like 7d/12h or an ISO date: {value!r}") from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


class Command(BaseCommand):
    help = (
        "Remove jobs (from Redis and the database) by task, queue, state and submission time. "
        "Running jobs are never removed. Defaults to finished states only."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--task", action="append", default=[], help="task name (repeatable)")
        parser.add_argument("--queue", action="append", default=[], help="queue (repeatable)")
        parser.add_argument(
            "--state", action="append", default=[], choices=[s.value for s in JobState],
            help="state (repeatable); default: completed, failed, cancelled, dropped, dead",
        )  # fmt: skip
        parser.add_argument("--before", default=None, help="submitted before: an age (7d, 12h) or ISO time")
        parser.add_argument("--after", default=None, help="submitted at or after: an age or ISO time")
        parser.add_argument("--dry-run", action="store_true", help="only count what would be removed")
        parser.add_argument("--batch-size", type=int, default=500)
        parser.add_argument("--reason", default="", help="kept in the audit log")
        parser.add_argument("--no-progress", action="store_true", help="no progress bar")

    def handle(self, *args: Any, **options: Any) -> None:
        states = [JobState(s) for s in options["state"]] or sorted(TERMINAL_STATES)
        f = CleanFilter(
            tasks=options["task"], queues=options["queue"], states=states,
            before=parse_when(options["before"]) if options["before"] else None,
            after=parse_when(options["after"]) if options["after"] else None,
        )  # fmt: skip
        client = get_client()
        jobs = find_jobs(client, f)
        for key, n in summarize(jobs.values()).items():
            self.stdout.write(f"  {key}: {n}")
        if options["dry_run"]:
            self.stdout.write(f"dry run: {len(jobs)} job(s) would be removed")
            return
        with tqdm(total=len(jobs), unit="job", disable=options["no_progress"], file=self.stderr) as bar:
            report = clean(client, jobs, progress=bar.update, batch=options["batch_size"])
        audit.record(
            None, "clean", actor="manage.py cleanjobs", filter=f.as_dict(), count=report.matched - len(
                report.skipped_running), refused=len(report.skipped_running), reason=options["reason"],
            detail={"deleted_redis": report.deleted_redis, "deleted_db": report.deleted_db},
        )  # fmt: skip
        self.stdout.write(
            f"removed {report.matched - len(report.skipped_running)} job(s): {report.deleted_redis} from Redis, "
            f"{report.deleted_db} database rows; skipped {len(report.skipped_running)} running"
        )
