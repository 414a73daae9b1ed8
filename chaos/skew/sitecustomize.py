"""Loaded at start-up by processes the chaos harness runs with a skewed clock (PYTHONPATH=chaos/skew):
their wall clock (time.time, time.time_ns, datetime.now/utcnow/today) reads CHAOS_CLOCK_SKEW_S seconds
off, as a host whose NTP is broken would; monotonic clocks and sleeps are untouched.

libfaketime would skew C code too, but its 0.9.10 breaks CPython 3.13's sleeps and timed waits (EINVAL or
hangs), so the skew is applied at the Python level, which is where the engine reads the wall clock."""

import datetime as _datetime
import os
import time

_skew = float(os.environ.get("CHAOS_CLOCK_SKEW_S") or 0)
if _skew:
    _time, _time_ns = time.time, time.time_ns
    _skew_ns = int(_skew * 1e9)
    time.time = lambda: _time() + _skew
    time.time_ns = lambda: _time_ns() + _skew_ns

    class _SkewedDatetime(_datetime.datetime):
        @classmethod
        def now(cls, tz: _datetime.tzinfo | None = None) -> "_SkewedDatetime":
            return super().now(tz) + _datetime.timedelta(seconds=_skew)

        @classmethod
        def utcnow(cls) -> "_SkewedDatetime":
            return super().utcnow() + _datetime.timedelta(seconds=_skew)

        @classmethod
        def today(cls) -> "_SkewedDatetime":
            return cls.now()

    _datetime.datetime = _SkewedDatetime  # type: ignore[misc]
