"""Shared by the long-running commands: SIGTERM or SIGINT asks the loop to finish its step and stop."""

import signal
import threading
from types import FrameType


def stop_on_signals() -> threading.Event:
    """An event set by SIGTERM/SIGINT (install from the main thread)."""
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    return stop
