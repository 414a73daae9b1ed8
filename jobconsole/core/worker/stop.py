"""The stop requests every part of a worker reads: counted here, so that no part depends on shutdown.py."""


class StopRequests:
    """How many times the worker was asked to stop (a signal, or request_stop())."""

    __slots__ = ("count",)

    def __init__(self) -> None:
        self.count = 0
