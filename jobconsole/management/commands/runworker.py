"""python manage.py runworker --queues a,b | --role R --concurrency N [--max-tasks M] [--burst]

Queues: those given with --queues, in claim order, or the queues of a worker role (--role: core/roles.py, set with
Jobbers' POST /jobbers/queues/<role>); by default every registered task's queue (each installed app's tasks.py and
TASK_MODULES) and the QUEUES of a Jobconsole backend in Django's TASKS setting, except the system queue. The system
queue (`jobconsole.system`: bulk operations) is served besides, always, by a small worker of its own in a thread of
this process (BULK.CONCURRENCY threads), so a bulk operation neither waits behind the backlog of the other queues (a
worker claims its queues in order, later ones only with slots to spare) nor takes their slots. --no-system-worker
leaves it out.

Processes: one process runs one core's worth of Python. --processes N (auto: one per core) makes this process a
supervisor of N worker processes (management/processes.py); the first of them serves the system queue and runs the
periodic scheduler. The database mirror runs in a process of its own beside them, and so it does beside a single
worker process too, unless --no-mirror (or MIRROR.IN_WORKER off) leaves it to `runmirror`; a one-off worker
(--burst, --max-tasks) of one process keeps it in a thread.
"""

import logging
import os
import secrets
import signal
import threading
from argparse import ArgumentParser
from collections.abc import Callable
from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.db import connections as db_connections

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
from jobconsole.management.heap import freeze_startup_heap
from jobconsole.management.processes import MIRROR, WORKER, Child, Lifeline, Supervisor, parse_processes

log = logging.getLogger("jobconsole.runworker")


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
        parser.add_argument(
            "--processes", default="1",
            help="worker processes, under a supervisor that restarts one that dies (auto: one per core)",
        )  # fmt: skip
        parser.add_argument(
            "--name", default=None, help="worker id (default host:pid:random; with --processes N, <name>-1...)"
        )
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
        connection = get_redis()
        try:
            queues = Roles(connection).queues(role)
        finally:
            connection.close()  # a supervisor forks next, and its children must not share this socket
        if not queues:
            raise CommandError(f"role {role!r} has no queues: set them with POST /jobbers/queues/{role}")
        return queues

    def handle(self, *args: Any, **options: Any) -> None:
        if options["role"] and options["queues"]:
            raise CommandError("give --queues or --role, not both")
        try:
            processes = parse_processes(options["processes"])
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        if options["concurrency"] is not None and options["concurrency"] < 1:  # else each process would fail alone
            raise CommandError("--concurrency must be at least 1")
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
        mirror = not options["no_mirror"] and mirror_config()["IN_WORKER"]
        one_off = options["burst"] or options["max_tasks"] is not None
        if processes == 1 and (not mirror or one_off):
            # One worker process and no mirror process to run beside it: no supervisor either. (A one-off
            # worker keeps the mirror in a thread.)
            worker, system = self.build(options, queues, weights, name=options["name"], system=True)
            worker.install_signal_handlers()
            self.serve(worker, system, queues, mirror=mirror, scheduler=True, burst=options["burst"])
            return
        self.supervise(options, queues, weights, processes, mirror)

    def build(
        self,
        options: dict[str, Any],
        queues: list[str],
        weights: dict[str, int] | None,
        *,
        name: str | None,
        system: bool,
    ) -> tuple[Worker, Worker | None]:
        """The worker, and the system queue's beside it (unless left out)."""
        config = get_config()
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
                name=name,
                queue_weights=weights,
                host=config["HOST_ID"] or None,
                hooks=task_hooks(),  # a stale database connection is replaced around each task
                expiry=config["WORKER_EXPIRY"],
            )
            system_worker = None
            if system and not options["no_system_worker"] and not options["burst"] and options["max_tasks"] is None:
                system_worker = Worker(
                    get_redis(), [SYSTEM_QUEUE], default_registry, concurrency=bulk_config()["CONCURRENCY"],
                    maintenance=False, events_maxlen=config["EVENTS_MAXLEN"], retention=retention(),
                    shutdown_grace=config["SHUTDOWN_GRACE"], name=f"{worker.id}:system", host=worker.host,
                    hooks=task_hooks(), expiry=config["WORKER_EXPIRY"],
                )  # fmt: skip
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        return worker, system_worker

    def serve(
        self, worker: Worker, system: Worker | None, queues: list[str], *, mirror: bool, scheduler: bool, burst: bool
    ) -> None:
        """Run the worker until it stops, with the system queue's worker, the mirror and the periodic scheduler in
        threads beside it (those asked for)."""
        config = get_config()
        define_flow_control()
        # The database mirror in a thread: a Redis lock makes one process among all the workers the mirror's
        # leader. (The engine itself never imports Django.)
        stop_mirror = threading.Event()
        mirror_thread: threading.Thread | None = None
        if mirror:
            from jobconsole.mirror.service import build_service

            service = build_service(name=worker.id)  # the mirror and its leader's chores, in one thread
            mirror_thread = threading.Thread(target=service.run, args=(stop_mirror,), name="jc-mirror", daemon=True)
            mirror_thread.start()
        # The periodic scheduler too: a lock makes one process its leader, and each slot fires once whatever
        # the lock does (core/periodic.py). A burst worker is a one-off and fires nothing.
        scheduler_thread: threading.Thread | None = None
        if scheduler and not burst and periodic_config()["IN_WORKER"]:
            from jobconsole.periodic import build_scheduler

            periodic = build_scheduler()
            scheduler_thread = threading.Thread(
                target=periodic.run, args=(stop_mirror,), name="jc-scheduler", daemon=True
            )
            scheduler_thread.start()
        system_thread: threading.Thread | None = None
        if system is not None:
            system_thread = threading.Thread(target=system.run, name="jc-system-worker", daemon=True)
            system_thread.start()
        announce_worker(
            worker.id, queues, worker.concurrency, config["REDIS_URL"],
            [f"system_queue={SYSTEM_QUEUE}"] * (system is not None) + ["mirror=thread"] * (mirror_thread is not None)
            + ["scheduler=thread"] * (scheduler_thread is not None) + ["burst"] * burst,
        )  # fmt: skip
        freeze_startup_heap()
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

    def supervise(
        self,
        options: dict[str, Any],
        queues: list[str],
        weights: dict[str, int] | None,
        processes: int,
        mirror: bool,
    ) -> None:
        """Fork the worker processes (and the mirror's) and keep them up (management/processes.py)."""
        grace = get_config()["SHUTDOWN_GRACE"]

        def worker_body(slot: int) -> Callable[[Lifeline, int], int]:
            def body(lifeline: Lifeline, start: int) -> int:
                # The first process serves the system queue and runs the periodic scheduler, as a lone worker
                # does: one per runworker, however many processes.
                worker, system = self.build(
                    options, queues, weights, name=child_name(options["name"], slot, processes, start),
                    system=slot == 1,
                )  # fmt: skip

                def stop(*_: object) -> None:
                    worker.request_stop()

                signal.signal(signal.SIGTERM, stop)  # a repeated SIGTERM stops no harder (see processes.py)
                lifeline.watch(stop, grace)
                self.serve(worker, system, queues, mirror=False, scheduler=slot == 1, burst=options["burst"])
                return 0

            return body

        def mirror_body(lifeline: Lifeline, start: int) -> int:
            from jobconsole.mirror.service import build_service

            signal.signal(signal.SIGTERM, signal.SIG_IGN)  # stopped by the supervisor, after the workers
            stop = threading.Event()
            lifeline.watch(stop.set, grace)
            log.info("runworker mirror process started pid=%d", os.getpid())
            service = build_service()
            freeze_startup_heap()
            service.run(stop)
            return 0

        children = [Child(f"worker-{slot}", worker_body(slot), WORKER) for slot in range(1, processes + 1)]
        if mirror:
            children.append(Child("mirror", mirror_body, MIRROR))
        log.info(
            "runworker supervisor started pid=%d processes=%d queues=%s%s",
            os.getpid(), processes, ",".join(queues), " mirror=process" * mirror,
        )  # fmt: skip
        Supervisor(children, grace_s=grace, before_fork=db_connections.close_all).run()


def child_name(name: str | None, slot: int, processes: int, start: int) -> str | None:
    """A worker process's id from --name: the name itself for one process, `<name>-<slot>` for more; a restarted
    process adds a random suffix, so the console shows the dead one gone and the new one beside it. Without
    --name, each process takes the default (host:pid:random)."""
    if name is None:
        return None
    base = name if processes == 1 else f"{name}-{slot}"
    return base if start == 1 else f"{base}:{secrets.token_hex(2)}"
