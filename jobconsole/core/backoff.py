"""Retry delays. `attempt` is the number of the attempt that just failed (1 for the first)."""

import random
from enum import StrEnum


class Backoff(StrEnum):
    CONSTANT = "constant"  # base, base, base...
    LINEAR = "linear"  # base, 2*base, 3*base...
    EXPONENTIAL = "exponential"  # base, 2*base, 4*base...
    EXPONENTIAL_JITTER = "exponential_jitter"  # exponential, then uniform in [half, full]


def retry_delay(strategy: Backoff, base: float, attempt: int, cap: float, rng: random.Random | None = None) -> float:
    """Seconds to wait before the next attempt, never above `cap`."""
    n = max(1, attempt)
    match strategy:
        case Backoff.CONSTANT:
            delay = base
        case Backoff.LINEAR:
            delay = base * n
        case Backoff.EXPONENTIAL | Backoff.EXPONENTIAL_JITTER:
            # min() first: 2**n overflows a float long before any sane attempt count.
            delay = base * 2 ** min(n - 1, 64)
    delay = min(delay, cap)
    if strategy is Backoff.EXPONENTIAL_JITTER:
        # "Equal jitter": spreads a burst of retries while keeping at least half the backoff.
        delay = (rng or random).uniform(delay / 2, delay)
    return max(0.0, delay)
