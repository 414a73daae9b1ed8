"""`runworker --processes N`: a supervisor that forks the worker processes (and the mirror's), starts again one
that dies, and stops them together.

The supervisor does no job work and holds no Redis or database connection when it forks (the caller closes
Django's first; it opens no thread), so every child opens its own. A child listens on a lifeline, a pipe from
the supervisor: `s` asks it to stop gracefully (as SIGTERM asks a lone worker), `q` to quit at once, and the
end of the pipe (the supervisor killed, even with SIGKILL) makes it stop gracefully instead of running on as an
orphan, then leave after a grace period whatever its jobs do. Children ignore SIGINT: a terminal's Ctrl-C reaches
the whole process group, and the supervisor alone orders the stop (worker processes first, the mirror's last, so
that it mirrors their final events). A worker child that exits with code 0 stopped by itself (an operator's stop
from the console, --burst, --max-tasks) and is not started again; one that dies otherwise is, after a backoff.
"""

import logging
import os
import select
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from types import FrameType

log = logging.getLogger("jobconsole.runworker")

QUIT_AFTER_GRACE_S = 5.0  # past the shutdown grace, a child whose supervisor is gone leaves anyway
STOP_MARGIN_S = 10.0  # past the shutdown grace, the supervisor kills a child that has not stopped
WORKER, MIRROR = 0, 1  # stop order: the workers first, the mirror last


def cpu_count() -> int:
    """The cores this process may run on (its affinity, not the host's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def parse_processes(raw: str) -> int:
    """`--processes`: a whole number of at least 1, or `auto` for the cores."""
    if raw.strip().lower() == "auto":
        return cpu_count()
    if not raw.strip().isdigit() or int(raw) < 1:
        raise ValueError(f"--processes {raw!r}: give a whole number of at least 1, or auto for the cores")
    return int(raw)


class Lifeline:
    """The child's end of the pipe from its supervisor."""

    def __init__(self, fd: int) -> None:
        self._fd = fd

    def watch(self, on_stop: Callable[[], None], grace_s: float) -> None:
        """Call `on_stop` (from a thread of its own) when the supervisor asks for a stop or is gone."""
        threading.Thread(target=self._read, args=(on_stop, grace_s), name="jc-lifeline", daemon=True).start()

    def _read(self, on_stop: Callable[[], None], grace_s: float) -> None:
        while True:
            try:
                message = os.read(self._fd, 1)
            except InterruptedError:
                continue
            if message == b"q":
                log.warning("pid=%d told to quit at once by the supervisor", os.getpid())
                quit_now(1)
            on_stop()
            if message == b"":  # the supervisor is gone: no one else will stop this process
                log.warning("pid=%d supervisor gone: stopping, leaving within %.0f s", os.getpid(), grace_s)
                time.sleep(grace_s + QUIT_AFTER_GRACE_S)
                log.warning("pid=%d still running %.0f s after its supervisor left: quitting", os.getpid(), grace_s)
                quit_now(1)


def quit_now(code: int) -> None:
    """Leave the forked child without running the parent's clean-up (its atexit, its finally blocks)."""
    for handler in logging.getLogger().handlers + log.handlers:
        handler.flush()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


@dataclass
class Backoff:
    """Delays between starts of a child that keeps dying: 1 s doubling to 30, back to 1 after a minute up."""

    upcoming: float = 1.0

    def delay_after(self, uptime: float) -> float:
        if uptime >= 60.0:
            self.upcoming = 1.0
        delay = self.upcoming
        self.upcoming = min(30.0, delay * 2)
        return delay


@dataclass
class Child:
    """One supervised process: `body` runs in it (given its lifeline and which start this is) and returns its
    exit code."""

    label: str  # worker-1, worker-2, ..., mirror
    body: Callable[[Lifeline, int], int]
    stop_order: int
    pid: int | None = None
    lifeline: int | None = None  # the supervisor's (write) end
    starts: int = 0
    started_at: float = 0.0
    restart_at: float | None = None
    finished: bool = False  # a worker that stopped by itself (exit code 0): not started again
    backoff: Backoff = field(default_factory=Backoff)


def describe(status: int) -> str:
    if os.WIFSIGNALED(status):
        return f"was killed by {signal.Signals(os.WTERMSIG(status)).name}"
    return f"exited with code {os.waitstatus_to_exitcode(status)}"


class Supervisor:
    def __init__(self, children: list[Child], *, grace_s: float, before_fork: Callable[[], None]) -> None:
        self.children = children
        self.grace_s = grace_s  # the workers' shutdown grace
        self._before_fork = before_fork  # closes the connections a child must not share
        self.signals = 0
        self._wake_read, self._wake_write = os.pipe()

    def run(self) -> int:
        """Start the children and keep them up until a stop signal, or until every worker stopped by itself."""
        if threading.active_count() > 1:  # a fork copies only the forking thread: the others' state would be lost
            names = [t.name for t in threading.enumerate() if t is not threading.current_thread()]
            log.warning("supervisor pid=%d forks beside running threads %s", os.getpid(), names)
        os.set_blocking(self._wake_write, False)
        signal.set_wakeup_fd(self._wake_write)  # a signal (SIGCHLD too) ends the wait of the loop below
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, self._on_signal)
        signal.signal(signal.SIGCHLD, lambda signum, frame: None)
        for child in self.children:
            self._start(child)
        while not self.signals and not all(c.finished for c in self.children if c.stop_order == WORKER):
            self._reap(stopping=False)
            self._start_due()
            self._wait(self._next_wait())
        self._stop_all()
        return 0

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self.signals += 1
        if self.signals == 1:
            log.warning(
                "supervisor pid=%d %s: stopping the workers, then the mirror (again: they quit at once)",
                os.getpid(),
                signal.Signals(signum).name,
            )
        else:
            log.warning("supervisor pid=%d second signal: every process quits at once", os.getpid())

    def _start(self, child: Child) -> None:
        child.starts += 1
        read_end, write_end = os.pipe()
        self._before_fork()
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # the child: never returns into the supervisor's code
            code = 1
            try:
                os.close(write_end)
                self._enter_child()
                code = child.body(Lifeline(read_end), child.starts)
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else 1
            except Exception:  # noqa: BLE001 - shown, and the exit code says it failed: started again
                traceback.print_exc()
            finally:
                quit_now(code)  # whatever happened, the child never goes on in the supervisor's code
        os.close(read_end)
        child.pid, child.lifeline = pid, write_end
        child.started_at, child.restart_at = time.monotonic(), None
        log.info("supervisor pid=%d started %s: pid %d", os.getpid(), child.label, pid)

    def _enter_child(self) -> None:
        """Drop what belongs to the supervisor: its signal handling and every pipe end but our own lifeline's."""
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # the supervisor orders the stop (see the module's doc)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.close(self._wake_read)
        os.close(self._wake_write)
        for other in self.children:
            if other.lifeline is not None:
                os.close(other.lifeline)  # else a sibling's end of file would never come
        self.children = []

    def _wait(self, timeout: float) -> None:
        """Sleep until a signal or `timeout`."""
        try:
            ready, _, _ = select.select([self._wake_read], [], [], max(0.0, timeout))
        except InterruptedError:
            return
        if ready:
            os.read(self._wake_read, 512)

    def _next_wait(self) -> float:
        due = [c.restart_at for c in self.children if c.restart_at is not None]
        return min([1.0, *(at - time.monotonic() for at in due)])

    def _reap(self, *, stopping: bool) -> None:
        """Collect every child that exited; schedule its next start unless stopping or it finished."""
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            child = next((c for c in self.children if c.pid == pid), None)
            if child is None:
                continue
            assert child.lifeline is not None
            os.close(child.lifeline)
            child.pid, child.lifeline = None, None
            uptime = time.monotonic() - child.started_at
            how = f"{child.label} (pid {pid}) {describe(status)} after {uptime:.1f} s up"
            if stopping:
                log.info("supervisor: %s", how)
            elif child.stop_order == WORKER and os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0:
                child.finished = True
                log.warning("supervisor: %s: it stopped by itself, and is not started again", how)
            else:
                delay = child.backoff.delay_after(uptime)
                child.restart_at = time.monotonic() + delay
                log.warning("supervisor: %s; starting it again in %g s", how, delay)

    def _start_due(self) -> None:
        now = time.monotonic()
        for child in self.children:
            if child.pid is None and child.restart_at is not None and now >= child.restart_at:
                self._start(child)

    def _tell(self, child: Child, message: bytes) -> None:
        if child.lifeline is not None:
            try:
                os.write(child.lifeline, message)
            except BrokenPipeError:  # it exited; the reaping will see to it
                pass

    def _stop_all(self) -> None:
        """Stop the workers (and wait for them), then the mirror; a second signal makes them quit at once, and
        one that outlasts the grace is killed."""
        for order in sorted({c.stop_order for c in self.children}):
            group = [c for c in self.children if c.stop_order == order]
            told_quit = False
            for child in group:
                child.restart_at = None
                self._tell(child, b"s")
            deadline = time.monotonic() + self.grace_s + STOP_MARGIN_S
            while any(c.pid is not None for c in group):
                if self.signals > 1 and not told_quit:
                    told_quit = True
                    for child in group:
                        self._tell(child, b"q")
                if time.monotonic() > deadline:
                    for child in group:
                        if child.pid is not None:
                            log.warning("supervisor: %s (pid %d) still running: killing it", child.label, child.pid)
                            os.kill(child.pid, signal.SIGKILL)
                    deadline = float("inf")
                self._wait(0.2)
                self._reap(stopping=True)
        log.info("supervisor pid=%d stopped", os.getpid())
