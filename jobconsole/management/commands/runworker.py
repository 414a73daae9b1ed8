"""python manage.py runworker --queues a,b | --role R --concurrency N [--max-tasks M] [--burst]

Queues: those given with --queues, in claim order, or the queues of a worker role (--role: core/roles.py, set with
Jobbers' POST /jobbers/queues/<role>); by default every registered task's queue (each installed app's tasks.py and
TASK_MODULES) and the QUEUES of a Jobconsole backend in Django's TASKS setting, except the system queue. The system
queue (`jobconsole.system`: bulk operations) is served besides, always, by a small worker of its own in a thread of
this process (BULK.CONCURRENCY threads), so a bulk operation neither waits behind the backlog of the other queues (a
worker claims its queues in order, later ones only with slots to spare) nor takes their slots. --no-system-worker
leaves it out.
"""

import threading
from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from jobconsole.bulk.system import SYSTEM_QUEUE
from jobconsole.checks import TAG
from jobconsole.conf import bulk_config, get_config, mirror_config, periodic_config, retention
from jobconsole.core import Worker, default_registry
from jobconsole.core.errors import InvalidJob
from jobconsole.core.roles import Roles, check_name
from jobconsole.db_connections import task_hooks
from jobconsole.django_backend import served_queues
from jobconsole.engine import define_flow_control, get_redis
from jobconsole.logs import announce_worker, ensure_handler


def parse_queues(raw: str) -> tuple[list[str], dict[str, int] | None]:
    """`a,b` (strict order) or `a:3,b:1` (weights: a weighted order; a queue without one weighs 1)."""
    queues: list[str] = []
    weights: dict[str, int] = {}
    for item in (part.strip() for part in raw.split(",")):
        if not item:
            continue
        name, _, weight = item.partition(":")
        if weight:
            if not weight.isdigit() or int(weight) < 1:
                raise CommandError(f"--queues {item!r}: a weight is a whole number of at least 1 (emails:3)")
            weights[name] = int(weight)
        queues.append(name)
    return queues, weights or None


class Command(BaseCommand):
    help = (
        "Run a worker: claims jobs from the given queues (default: every registered task's queue), and serves the "
        "system queue (bulk operations) with a worker thread of its own."
    )
    # Redis is all it needs: Django's system checks open the database (a JSONField check), and a locked or
    # unreachable database must not keep it from starting. Its own settings checks need no database.
    requires_system_checks = [TAG]

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument(
            "--queues", default="",
            help="comma-separated queues, claimed in this order; with weights (a:3,b:1) in a weighted random "
            "order drawn at each claim instead",
        )  # fmt: skip
        parser.add_argument("--role", default="", help="serve the queues of this worker role instead of --queues")
        parser.add_argument("--concurrency", type=int, default=None, help="jobs run at once (threads)")
        parser.add_argument("--max-tasks", type=int, default=None, help="exit after this many jobs")
        parser.add_argument("--burst", action="store_true", help="exit when there is nothing to do")
        parser.add_argument("--no-maintenance", action="store_true", help="do not run the recoverer here")
        parser.add_argument("--no-mirror", action="store_true", help="do not run the database mirror here")
        parser.add_argument(
            "--no-scheduler", action="store_true", help="do not run the periodic scheduler here (nor in --burst)"
        )
        parser.add_argument("--name", default=None, help="worker id (default host:pid:random)")
        parser.add_argument(
            "--no-system-worker", action="store_true", help=f"do not serve the system queue {SYSTEM_QUEUE} here"
        )

    def role_queues(self, role: str) -> list[str]:
        if not role:
            return []
        try:
            check_name(role, "role")
        except InvalidJob as exc:
            raise CommandError(str(exc)) from None
        queues = Roles(get_redis()).queues(role)
        if not queues:
            raise CommandError(f"role {role!r} has no queues: set them with POST /jobbers/queues/{role}")
        return queues

    def handle(self, *args: Any, **options: Any) -> None:
        if options["role"] and options["queues"]:
            raise CommandError("give --queues or --role, not both")
        config = get_config()
        ensure_handler(config["LOG_LEVEL"])  # a project without LOGGING still sees starts and failures
        queues, weights = parse_queues(options["queues"])
        queues = (
            queues
            or self.role_queues(options["role"])
            or sorted(({t.queue for t in default_registry.all()} | served_queues()) - {SYSTEM_QUEUE})
        )
        if not queues:
            raise CommandError(
                "no queues: pass --queues or register tasks (a tasks.py in an installed app, "
                "or JOBCONSOLE['TASK_MODULES'])"
            )
        try:
            worker = Worker(
                get_redis(),
                queues,
                default_registry,
                concurrency=options["concurrency"] or config["WORKER_CONCURRENCY"],
                max_tasks=options["max_tasks"],
                burst=options["burst"],
                maintenance=not options["no_maintenance"],
                events_maxlen=config["EVENTS_MAXLEN"],
                retention=retention(),
                shutdown_grace=config["SHUTDOWN_GRACE"],
                name=options["name"],
                queue_weights=weights,
                host=config["HOST_ID"] or None,
                hooks=task_hooks(),  # a stale database connection is replaced around each task
                expiry=config["WORKER_EXPIRY"],
            )
            system = None
            if not options["no_system_worker"] and not options["burst"] and options["max_tasks"] is None:
                system = Worker(
                    get_redis(), [SYSTEM_QUEUE], default_registry, concurrency=bulk_config()["CONCURRENCY"],
                    maintenance=False, events_maxlen=config["EVENTS_MAXLEN"], retention=retention(),
                    shutdown_grace=config["SHUTDOWN_GRACE"], name=f"{worker.id}:system", host=worker.host,
                    hooks=task_hooks(), expiry=config["WORKER_EXPIRY"],
                )  # fmt: skip
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        define_flow_control()
        # The database mirror runs next to the worker, in a thread; a Redis lock makes one process among
        # all the workers the mirror's leader. (The engine itself never imports Django.)
        stop_mirror = threading.Event()
        mirror_thread: threading.Thread | None = None
        if not options["no_mirror"] and mirror_config()["IN_WORKER"]:
            from jobconsole.mirror.service import build_service

            service = build_service(name=worker.id)  # the mirror and its leader's chores, in one thread
            mirror_thread = threading.Thread(target=service.run, args=(stop_mirror,), name="jc-mirror", daemon=True)
            mirror_thread.start()
        # The periodic scheduler too: a lock makes one process its leader, and each slot fires once whatever
        # the lock does (core/periodic.py). A burst worker is a one-off and fires nothing.
        scheduler_thread: threading.Thread | None = None
        if not options["no_scheduler"] and not options["burst"] and periodic_config()["IN_WORKER"]:
            from jobconsole.periodic import build_scheduler

            scheduler = build_scheduler()
            scheduler_thread = threading.Thread(
                target=scheduler.run, args=(stop_mirror,), name="jc-scheduler", daemon=True
            )
            scheduler_thread.start()
        system_thread: threading.Thread | None = None
        if system is not None:
            system_thread = threading.Thread(target=system.run, name="jc-system-worker", daemon=True)
            system_thread.start()
        announce_worker(
            worker.id, queues, worker.concurrency, config["REDIS_URL"],
            [f"system_queue={SYSTEM_QUEUE}"] * (system is not None) + ["mirror=thread"] * (mirror_thread is not None)
            + ["scheduler=thread"] * (scheduler_thread is not None) + ["burst"] * options["burst"],
        )  # fmt: skip
        worker.install_signal_handlers()
        try:
            worker.run()
        finally:
            if system is not None and system_thread is not None:
                system.request_stop()  # an operation under way is given back, to go on elsewhere
                system_thread.join(timeout=config["SHUTDOWN_GRACE"] + 5)
            stop_mirror.set()
            if mirror_thread is not None:
                mirror_thread.join(timeout=10)
            if scheduler_thread is not None:
                scheduler_thread.join(timeout=10)
