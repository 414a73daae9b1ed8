"""Retry delays. `attempt` is the number of the attempt that just failed (1 for the first)."""

import random
from enum import StrEnum

YEAR_S = 365 * 86_400.0


class Backoff(StrEnum):
    CONSTANT = "constant"  # base, base, base...
    LINEAR = "linear"  # base, 2*base, 3*base...
    EXPONENTIAL = "exponential"  # base, 2*base, 4*base...
    EXPONENTIAL_JITTER = "exponential_jitter"  # exponential, then uniform in [half, full]
    IMMEDIATE = "immediate"  # at once, every time (Runqueue's 'immediate': [0, 's'])
    YEAR = "year"  # a year later, past max_retry_delay (Runqueue's 'year', "for testing": the job is parked)

    @classmethod
    def parse(cls, name: "str | Backoff") -> "Backoff":
        """Our names, and Runqueue's: 'standard' is exponential; 'immeadiate' (its docs' spelling) is immediate.
        ValueError names a bad one."""
        if isinstance(name, Backoff):
            return name
        text = str(name).strip().lower()
        text = RUNQUEUE_NAMES.get(text, text)
        try:
            return cls(text)
        except ValueError:
            known = ", ".join([*(b.value for b in cls), *RUNQUEUE_NAMES])
            raise ValueError(f"unknown backoff strategy {name!r}; known: {known}") from None


RUNQUEUE_NAMES = {"standard": "exponential", "immeadiate": "immediate"}


def retry_delay(strategy: Backoff, base: float, attempt: int, cap: float, rng: random.Random | None = None) -> float:
    """Seconds to wait before the next attempt, never above `cap`."""
    n = max(1, attempt)
    if strategy is Backoff.IMMEDIATE:
        return 0.0
    if strategy is Backoff.YEAR:
        return YEAR_S  # deliberately past the cap: Runqueue's way to park a job
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
