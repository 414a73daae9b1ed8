"""The stop requests every part of a worker reads: counted here, so that no part depends on shutdown.py."""

from collections.abc import Callable


def _nothing() -> None:
    pass


class StopRequests:
    """How many times the worker was asked to stop (a signal, or request_stop()), and how to wake the dispatcher
    to act on a request (the dispatcher's wait for outcomes can last a second, worker/idle.py)."""

    __slots__ = ("count", "wake")

    def __init__(self, wake: Callable[[], None] = _nothing) -> None:
        self.count = 0
        self.wake = wake  # safe in a signal handler: SimpleQueue.put is reentrant
