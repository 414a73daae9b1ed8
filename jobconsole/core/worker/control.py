"""The operator's control of this worker (quiet or stop), read back with every registry renewal.

The console and the API write it into the worker's registry hash (`Store.control_worker_call`,
lua/worker_control.lua); `register_worker.lua` answers it, so the worker pays no command of its own to learn it,
and acts on it within one renewal (REGISTRY_EVERY_S). Quiet: claim nothing, leave the idle lists (so that no
enqueue hands a job to this worker), finish the jobs it holds; a resume lifts it. Stop: as SIGTERM.
"""

import logging
from collections.abc import Callable

from jobconsole.core.worker.exchange import Exchange
from jobconsole.core.worker.stop import StopRequests

log = logging.getLogger("jobconsole.core.worker")  # one logger for every part, so log lines name the worker

QUIET = "quiet"
STOP = "stop"
QUIET_WAIT_S = 0.1  # a quiet dispatcher's wait for outcomes between reports


class Controls:
    """What the last renewal said the operator wants of this worker."""

    def __init__(self, stop: StopRequests, worker_id: str) -> None:
        self._stop = stop
        self._worker_id = worker_id
        self.quiet = False  # what the operator wants (heartbeat thread)
        self.left_idle = False  # quiet, and our idle registrations and inboxes given up (dispatcher thread)

    @property
    def quiet_now(self) -> bool:
        """Quiet in effect: no enqueue can hand this worker a job any more (what the registry shows)."""
        return self.quiet and self.left_idle

    def apply(self, control: str) -> bool:
        """Act on the control a renewal read (heartbeat thread); True when the worker's state changed."""
        if control == STOP and not self._stop.count:
            log.warning("worker=%s stop requested by an operator: stopping", self._worker_id)
            self._stop.count = 1  # as request_stop(): the dispatcher applies the on_shutdown policies
            self._stop.wake()
            return True
        quiet = control == QUIET
        if quiet == self.quiet:
            return False
        log.warning("worker=%s %s by an operator", self._worker_id, "quieted" if quiet else "resumed")
        self.quiet = quiet
        self._stop.wake()  # the dispatcher leaves the idle lists, or claims again, now
        return not quiet  # a quiet shows once in effect (quiet_step renews then)

    def leave_idle(self, exchange: Exchange) -> None:
        """Stopping (dispatcher thread): leave the idle lists once, and give back at once what an enqueue handed
        us meanwhile, rather than when the last running job ends."""
        if not self.left_idle:
            exchange.release_orphans()
            self.left_idle = True

    def quiet_step(self, exchange: Exchange, renew: Callable[[], object]) -> None:
        """One pass of a quiet dispatcher: report outcomes and claim nothing. The first pass also leaves the idle
        lists, gives back what an enqueue handed to us meanwhile, and renews the registry entry, which from then
        on shows the worker quiet."""
        if not self.left_idle:
            self.leave_idle(exchange)
            renew()
        exchange.report_and_claim(0)
        exchange.wait_for_results(QUIET_WAIT_S)

    def resumed(self) -> None:
        """Claiming again (dispatcher thread): the next quiet leaves the idle lists again."""
        self.left_idle = False
