"""Statistics: each queue's per-minute counters and latency histograms (core/metrics.py names them)."""

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import cast

from jobconsole.core import metrics
from jobconsole.core.keys import queue_keys
from jobconsole.core.queries.base import Reader


@dataclass(frozen=True, slots=True)
class MinuteStat:
    minute: datetime
    metric: str  # a name of core/metrics.py: enqueued, ..., runtime_ms, wait_h:<i>, done_h:<i>, fail_h:<i>, retry_max
    task: str
    value: int


class Statistics(Reader):
    def minutes(self, queue: str, since: datetime | None = None) -> list[MinuteStat]:
        """The queue's per-minute counters (kept for a day), oldest first; `since` bounds them. It reads the whole
        day's hash: for a few minutes, `minute_values` (known tasks) or `minute_counts` cost less."""
        first = int(since.timestamp()) // 60 if since else 0
        out: list[MinuteStat] = []
        for name, value in cast(dict[str, str], self.redis.hgetall(queue_keys(queue).stats)).items():
            minute, metric, task = [*name.split("|", 2), "", ""][:3]
            if not minute.isdigit() or int(minute) < first:
                continue
            out.append(MinuteStat(_minute_time(int(minute)), metric, task, int(value)))
        out = with_totals(out)
        out.sort(key=lambda s: (s.minute, s.metric, s.task))
        return out

    def minute_counts(self, queue: str, first: int, last: int) -> list[MinuteStat]:
        """The queue's counters of the minutes `first` to `last` (Unix minutes, both included), in no order.

        The hash holds a day of minutes and has no index by minute, so this walks it with HSCAN (Redis serves
        others between the steps) and lets Redis skip the fields outside the minutes' longest common prefix."""
        if first > last:
            return []
        low, high = str(first), str(last)
        prefix = ""
        while len(low) == len(high) and len(prefix) < len(low) and low[len(prefix)] == high[len(prefix)]:
            prefix += low[len(prefix)]
        pattern = f"{low}|*" if first == last else f"{prefix}*"
        fields = cast(
            Iterable[tuple[str, str]], self.redis.hscan_iter(queue_keys(queue).stats, match=pattern, count=1000)
        )
        out: list[MinuteStat] = []
        for name, value in fields:
            minute, _, rest = name.partition("|")
            if minute.isdigit() and first <= int(minute) <= last:
                metric, _, task = rest.partition("|")
                out.append(MinuteStat(_minute_time(int(minute)), metric, task, int(value)))
        return with_totals(out)

    def minute_values(
        self, queue: str, minutes: Sequence[int], tasks: Sequence[str], names: Sequence[str] = metrics.ALL
    ) -> list[MinuteStat]:
        """The counters `names` of these tasks in these minutes (Unix minutes): one HMGET of the fields named,
        so it costs what it returns, however big the day's hash is. Counters never written are left out."""
        return self.minute_values_many([(queue, minutes, tasks)], names)[0]

    def minute_values_many(
        self, asks: Sequence[tuple[str, Sequence[int], Sequence[str]]], names: Sequence[str] = metrics.ALL
    ) -> list[list[MinuteStat]]:
        """`minute_values` of several (queue, minutes, tasks), in order, in one round trip (a page of every
        queue's figures read them one queue at a time)."""
        fetched = set(names)
        for total, prefix in metrics.TOTALS.items():
            if total in fetched:  # it includes the counts of its histogram
                fetched |= {name for name in metrics.SUMMED if name.startswith(prefix)}
        ordered = sorted(fetched)
        wanted = [[(m, name, t) for m in minutes for t in tasks for name in ordered] for _, minutes, tasks in asks]
        pipe = self.redis.pipeline(transaction=False)
        chunks: list[int] = []  # HMGETs per ask
        for (queue, _, _), fields in zip(asks, wanted, strict=True):
            stats = queue_keys(queue).stats
            starts = range(0, len(fields), 5000)
            for start in starts:
                pipe.hmget(stats, [f"{m}|{name}|{t}" for m, name, t in fields[start : start + 5000]])
            chunks.append(len(starts))
        replies = iter(pipe.execute() if any(chunks) else [])
        asked = set(names)
        out = []
        for fields, n in zip(wanted, chunks, strict=True):
            values = [v for _ in range(n) for v in next(replies)]
            found = [
                MinuteStat(_minute_time(m), name, t, int(v))
                for (m, name, t), v in zip(fields, values, strict=True)
                if v is not None
            ]
            out.append([s for s in with_totals(found) if s.metric in asked])
        return out


def with_totals(stats: Iterable[MinuteStat]) -> list[MinuteStat]:
    """The counters as readers know them: the hot path counts claimed jobs in `wait_h` only and completed ones in
    `done_h` only (core/metrics.py), so each minute and task's `started` and `completed` get those counts added."""
    out = list(stats)
    extra: dict[tuple[datetime, str, str], int] = {}
    for s in out:
        for total, prefix in metrics.TOTALS.items():
            if s.metric.startswith(prefix):
                key = (s.minute, total, s.task)
                extra[key] = extra.get(key, 0) + s.value
    if not extra:
        return out
    for i, s in enumerate(out):
        added = extra.pop((s.minute, s.metric, s.task), 0)
        if added:
            out[i] = MinuteStat(s.minute, s.metric, s.task, s.value + added)
    out += [MinuteStat(minute, total, task, value) for (minute, total, task), value in extra.items()]
    return out


def _minute_time(minute: int) -> datetime:
    return datetime.fromtimestamp(minute * 60, tz=UTC)
