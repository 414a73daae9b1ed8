"""Redis's clock as the worker reads it: TIME sampled once a minute, carried forward by the monotonic clock."""

import time

from jobconsole.core.store import Store

RESAMPLE_EVERY_S = 60.0


class RedisClock:
    """Redis's time in milliseconds, not this host's (which may be off), for one TIME call a minute."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._sample: tuple[int, float] | None = None  # (Redis ms, monotonic s) read together

    def now_ms(self) -> int:
        """Redis's time now, in milliseconds."""
        if self._sample is None or time.monotonic() - self._sample[1] > RESAMPLE_EVERY_S:
            self._sample = (self._store.time_ms(), time.monotonic())
        base_ms, at = self._sample
        return base_ms + int((time.monotonic() - at) * 1000)
