"""Keeps the processes of `make run` up, the way a process supervisor does.

A service that exits is started again after a backoff (1 s, doubling to 30 s; back to 1 s once it had stayed up
a minute), with a log line saying what exited, how, and when it comes back. An essential service (Redis, which
everything else stands on) is not restarted: its exit stops the stack. SIGINT, SIGTERM and SIGHUP stop every
service in its stop order (the demo and workers first, Redis last); a second one kills what is still running.
"""

import ctypes
import os
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

STOP_TIMEOUT_S = 20.0  # a worker finishing an on_shutdown=finish job may need a while


@dataclass
class Backoff:
    """Delays between restarts: `first`, doubling up to `limit`; back to `first` after `stable_after` s up."""

    first: float = 1.0
    limit: float = 30.0
    stable_after: float = 60.0
    upcoming: float = field(init=False)

    def __post_init__(self) -> None:
        self.upcoming = self.first

    def delay_after(self, uptime: float) -> float:
        """The wait before the next start of a process that exited after `uptime` seconds."""
        if uptime >= self.stable_after:
            self.upcoming = self.first
        delay = self.upcoming
        self.upcoming = min(self.limit, self.upcoming * 2)
        return delay


@dataclass
class Service:
    """One supervised process. `command` is called at every start (a restarted worker gets a new name)."""

    name: str
    command: Callable[[], list[str]]
    color: str
    stop_order: int  # services stop in increasing order; equal ones together
    essential: bool = False  # its exit stops the whole stack instead of a restart
    backoff: Backoff = field(default_factory=Backoff)
    proc: "subprocess.Popen[bytes] | None" = None
    started_at: float = 0.0
    restart_at: float | None = None
    restarts: int = 0
    partial: bytes = b""  # the start of a log line whose end has not arrived yet


def describe_exit(returncode: int) -> str:
    if returncode < 0:
        try:
            return f"was killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"was killed by signal {-returncode}"
    return f"exited with code {returncode}"


def stamp() -> str:
    return time.strftime("%H:%M:%S")


def say(message: str) -> None:
    print(f"\033[1m[stack {stamp()}]\033[0m {message}", flush=True)


def _die_with_parent() -> None:
    """Runs in the child before exec: SIGTERM it if the supervisor dies without stopping it (kill -9, a crash)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG; Linux only
    except (OSError, AttributeError):
        pass


class Supervisor:
    def __init__(self, services: list[Service], cwd: Path, env: dict[str, str]) -> None:
        self.services = services
        self.cwd = cwd
        self.env = env
        self.selector = selectors.DefaultSelector()
        self.signals = 0  # stop requests received: the first stops in order, a second kills
        self.exit_code = 0

    # --- starting and watching ------------------------------------------------------------------------

    def start(self, service: Service) -> None:
        # Their own session: Ctrl-C in the terminal reaches only us, and each child gets exactly one SIGTERM.
        proc = subprocess.Popen(
            service.command(), cwd=self.cwd, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            start_new_session=True, preexec_fn=_die_with_parent if sys.platform == "linux" else None,
        )  # fmt: skip
        assert proc.stdout is not None
        os.set_blocking(proc.stdout.fileno(), False)
        self.selector.register(proc.stdout, selectors.EVENT_READ, service)
        service.proc, service.started_at, service.restart_at = proc, time.monotonic(), None

    def run(self) -> int:
        """Start every service and keep them up until a stop signal or an essential service's exit."""
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, self._on_signal)
        for service in self.services:
            if service.proc is None:
                self.start(service)
        while not self.signals and not self.exit_code:
            self.pump(0.2)
            for service in self.services:
                self._check(service)
        self.stop_all()
        return self.exit_code

    def _on_signal(self, signum: int, frame: object) -> None:
        self.signals += 1
        if self.signals == 1:
            order = ", then ".join(dict.fromkeys(s.name.split("-")[0] for s in self._by_stop_order()))
            say(f"{signal.Signals(signum).name}: stopping {order} (again to kill them at once)")
        else:
            say(f"{signal.Signals(signum).name} again: killing what is still running")

    def _check(self, service: Service) -> None:
        proc = service.proc
        if proc is None:
            if service.restart_at is not None and time.monotonic() >= service.restart_at:
                service.restarts += 1
                self.start(service)
                assert service.proc is not None
                say(f"{service.name} started again: pid {service.proc.pid} (restart {service.restarts})")
            return
        if proc.poll() is None:
            return
        self._release(service)
        uptime = time.monotonic() - service.started_at
        how = f"{service.name} (pid {proc.pid}) {describe_exit(proc.returncode)} after {uptime:.1f} s up"
        if service.essential:
            say(f"{how}. Everything else needs it, so the stack stops; its log is above. Start it again: make run")
            self.exit_code = 1
            return
        delay = service.backoff.delay_after(uptime)
        service.restart_at = time.monotonic() + delay
        when = time.strftime("%H:%M:%S", time.localtime(time.time() + delay))
        say(f"{how}; restarting it in {delay:g} s (at {when})")

    def discard(self, service: Service) -> None:
        """Forget a service whose process has exited (its output copied first), as if it had never been added."""
        self._release(service)
        self.services.remove(service)

    def _release(self, service: Service) -> None:
        """Copy the rest of an exited process's output, then forget its pipe."""
        proc = service.proc
        assert proc is not None and proc.stdout is not None
        self._copy(service, proc.stdout.read() or b"", final=True)
        self.selector.unregister(proc.stdout)
        proc.stdout.close()
        service.proc = None

    # --- output ------------------------------------------------------------------------------------------

    def pump(self, timeout: float) -> None:
        """Copy whatever the services wrote, each line prefixed with the service's name, for up to `timeout` s."""
        if not self.selector.get_map():
            time.sleep(timeout)
            return
        try:
            ready = self.selector.select(timeout)
        except InterruptedError:
            return
        for key, _ in ready:
            chunk = key.fileobj.read()  # type: ignore[union-attr]
            if chunk:
                self._copy(key.data, chunk)

    def _copy(self, service: Service, chunk: bytes, final: bool = False) -> None:
        lines = (service.partial + chunk).split(b"\n")
        service.partial = b"" if final else lines.pop()
        for line in lines:
            if line or not final:
                text = line.decode(errors="replace").rstrip("\r")
                print(f"\033[{service.color}m{service.name:>8} |\033[0m {text}", flush=True)

    # --- stopping ----------------------------------------------------------------------------------------

    def _by_stop_order(self) -> list[Service]:
        return sorted(self.services, key=lambda s: s.stop_order)

    def stop_all(self) -> None:
        """SIGTERM each stop group in turn and wait for it (SIGKILL after STOP_TIMEOUT_S or a second signal)."""
        for order in sorted({s.stop_order for s in self.services}):
            group = [s for s in self.services if s.stop_order == order]
            for service in group:
                service.restart_at = None
                if service.proc is not None and service.proc.poll() is None:
                    service.proc.terminate()
            deadline = time.monotonic() + STOP_TIMEOUT_S
            while any(s.proc is not None and s.proc.poll() is None for s in group):
                if self.signals > 1 or time.monotonic() > deadline:
                    for service in group:
                        if service.proc is not None and service.proc.poll() is None:
                            say(f"{service.name} (pid {service.proc.pid}) is still running: killing it")
                            service.proc.kill()
                            service.proc.wait()
                    break
                self.pump(0.1)
            for service in group:
                if service.proc is not None:
                    self._release(service)
        say("stopped")

    def kill_all(self) -> None:
        """Last resort when the supervisor itself fails: leave nothing running behind."""
        for service in self.services:
            if service.proc is not None and service.proc.poll() is None:
                service.proc.kill()
