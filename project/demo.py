"""The demo load of `make run DEMO=1` (`manage.py demo`): a steady mix of the example shop's jobs
(jobconsole/examples.py), so that every console page has something to show.

Arrivals are random (Poisson) at `rate` jobs a second. The mix has fast jobs, slow ones that heartbeat their
progress and checkpoints, failures of four distinct kinds that end as dead letters, flaky jobs that succeed
after retries, jobs scheduled minutes ahead, and unique-key jobs. At that rate the workers keep up and the queues
are mostly empty; so every minute a burst of slow-ish newsletters keeps them busy for a while, and the queues
back up and drain again (depth, wait times and time-to-drain have something to show). Every 45 s a catalogue
import runs as a workflow (a batch: CSV imports and thumbnails, then a report once all ended, whatever their
outcome), so the Workflows pages have something to show too. A queue with
`max_backlog` jobs waiting gets no more until it drains, so the queues never grow without bound (with no worker
running, they fill up to it and stop there).
"""

import logging
import random
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import redis

from jobconsole.core import Client, JobSpec, RedisFull
from jobconsole.core.compose import batch
from jobconsole.core.groups import Group

log = logging.getLogger("project.demo")

QUEUES = ("default", "emails", "reports")


def _address(rng: random.Random, bounce: float) -> str:
    domain = "bounce.example.com" if rng.random() < bounce else rng.choice(["example.com", "example.org"])
    return f"{rng.choice(['ana', 'bo', 'chen', 'dara', 'eli', 'femi'])}{rng.randrange(1000)}@{domain}"


def _image(rng: random.Random) -> JobSpec:
    return JobSpec(task="examples.resize_image", params={"image_id": rng.randrange(10**6), "width": 800})


def _thumbnail(rng: random.Random) -> JobSpec:  # the same task at low priority: batch work
    params = {"image_id": rng.randrange(10**6), "width": rng.choice([160, 320])}
    return JobSpec(task="examples.resize_image", params=params, priority="low")


def _welcome(rng: random.Random) -> JobSpec:
    return JobSpec(task="examples.send_welcome_email", params={"to": _address(rng, bounce=0.08)})


def _digest(rng: random.Random) -> JobSpec:
    params = {"to": _address(rng, bounce=0.0), "period": rng.choice(["daily", "weekly"])}
    return JobSpec(task="examples.send_digest", params=params, delay=rng.uniform(60, 600))


# A payment provider that takes three calls at once and ten a second: the Flow control page shows it.
PAYMENTS = Group("payments", connections=3, requests=10, period_ms=1000)


def _charge(rng: random.Random) -> JobSpec:
    unknown, declined = rng.random() < 0.05, rng.random() < 0.06
    params = {
        "customer_id": rng.randrange(90_000, 99_999) if unknown else rng.randrange(1, 90_000),
        "amount_cents": rng.randrange(199, 25_000),
        "card_last4": "0002" if declined else rng.choice(["4242", "1881", "5100"]),
    }
    return JobSpec(task="examples.charge_card", params=params, group=PAYMENTS.name)


def _inventory(rng: random.Random) -> JobSpec:
    params = {"sku": f"SKU-{rng.randrange(10_000):05d}", "flaky_attempts": rng.choice([1, 1, 2, 3])}
    return JobSpec(task="examples.sync_inventory", params=params)


def _import(rng: random.Random) -> JobSpec:
    rows = [f"SKU-{rng.randrange(10_000):05d},{rng.randrange(1, 50)}" for _ in range(rng.randrange(20, 80))]
    if rng.random() < 0.15:
        rows[rng.randrange(len(rows))] = "SKU-00000,n/a"
    return JobSpec(task="examples.import_csv", params={"rows": rows})


def _report(rng: random.Random) -> JobSpec:
    params = {"report": rng.choice(["sales", "refunds", "stock", "churn"]), "sections": rng.randrange(5, 30)}
    return JobSpec(task="examples.build_report", params=params)


def _reindex(rng: random.Random) -> JobSpec:
    shard = rng.randrange(4)
    params = {"shard": shard, "seconds": rng.uniform(2, 6)}
    return JobSpec(task="examples.rebuild_search_index", params=params, unique_key=f"search-index:{shard}")


# (weight, maker): at 3 jobs a second about 0.2 a second become dead letters, about 0.25 a second are
# scheduled 1-10 min ahead, and about 1.5 slow jobs run at any time.
MIX: tuple[tuple[float, Callable[[random.Random], JobSpec]], ...] = (
    (30, _image),
    (5, _thumbnail),
    (22, _welcome),
    (8, _digest),
    (12, _charge),
    (8, _inventory),
    (6, _import),
    (3, _report),
    (6, _reindex),
)


@dataclass
class DemoLoad:
    client: Client
    rate: float = 3.0  # jobs a second, on average
    max_backlog: int = 200  # waiting jobs a queue may hold before the demo skips it
    burst_every: float = 60.0  # seconds between bursts of newsletters (0: none)
    burst_size: int = 100
    workflow_every: float = 45.0  # seconds between catalogue-import workflows (0: none)
    seed: int | None = None

    def __post_init__(self) -> None:
        if self.rate <= 0:
            raise ValueError("rate must be more than 0 jobs a second")
        self.rng = random.Random(self.seed)
        self.client.define_group(PAYMENTS)  # the card charges share a payment provider's limits
        self.tally: Counter[str] = Counter()  # created, duplicate, skipped (backlog), refused (Redis full)
        self._waiting: dict[str, int] = {}
        self._waiting_at = 0.0

    def make(self) -> JobSpec:
        [(_, maker)] = self.rng.choices(MIX, weights=[weight for weight, _ in MIX])
        return maker(self.rng)

    def enqueue(self, specs: list[JobSpec]) -> None:
        """Enqueue `specs`, but none to a queue already `max_backlog` deep."""
        room = [spec for spec in specs if self.waiting(self.queue_of(spec)) < self.max_backlog]
        self.tally["skipped"] += len(specs) - len(room)
        if not room:
            return
        try:
            results = self.client.enqueue_many(room)
        except RedisFull as full:
            self.tally["refused"] += len(full.refused)
            results = full.accepted
        for result in results:
            self.tally[result.status] += 1
            self._waiting[result.queue] = self._waiting.get(result.queue, 0) + 1

    def queue_of(self, spec: JobSpec) -> str:
        return spec.queue or self.client.registry.get(spec.task).queue

    def waiting(self, queue: str) -> int:
        """The queue's waiting jobs, counted again at most every 2 s."""
        if time.monotonic() - self._waiting_at > 2.0:
            self._waiting = {q: self.client.counts(q).queued for q in QUEUES}
            self._waiting_at = time.monotonic()
        return self._waiting.get(queue, 0)

    def run(self, *, duration: float = 0.0, count: int = 0, stop: Callable[[], bool] = lambda: False) -> None:
        """Enqueue until `stop()`, or for `duration` seconds, or `count` jobs (0: no such limit)."""
        started = now = time.monotonic()
        next_job, next_burst, next_report = now, now + min(20.0, self.burst_every), now + 30.0
        next_workflow = now + min(5.0, self.workflow_every)
        while not stop() and (not duration or now - started < duration) and (not count or self.sent < count):
            try:
                if self.burst_every and now >= next_burst:
                    self.enqueue([self._newsletter() for _ in range(self.burst_size)])
                    next_burst = now + self.burst_every
                if self.workflow_every and now >= next_workflow:
                    self.start_workflow()
                    next_workflow = now + self.workflow_every
                if now >= next_job:
                    self.enqueue([self.make()])
                    next_job = max(next_job + self.rng.expovariate(self.rate), now - 1.0)  # catch up 1 s at most
            except redis.RedisError as exc:  # Redis down or restarting: keep trying
                log.warning("demo: cannot enqueue (%s); retrying in 1 s", exc)
                time.sleep(1.0)
            if now >= next_report:
                log.info("demo: %s", self.summary())
                next_report = now + 30.0
            wake = min(next_job, next_burst) if self.burst_every else next_job
            wake = min(wake, next_workflow) if self.workflow_every else wake
            time.sleep(min(0.5, max(0.0, wake - time.monotonic())))  # short naps: stop() is asked often
            now = time.monotonic()

    def start_workflow(self) -> str:
        """A catalogue import: CSV imports (one in seven has a bad row and dies) and thumbnails side by side, then
        a stock report once every one of them ended; its id."""
        imports = [_import(self.rng) for _ in range(self.rng.randrange(3, 7))]
        thumbnails = [_thumbnail(self.rng) for _ in range(self.rng.randrange(6, 16))]
        report = JobSpec(task="examples.build_report", params={"report": "stock", "sections": 5})
        flow = batch([*imports, *thumbnails], name="import", on_complete=report)
        created = self.client.enqueue_workflow(flow, name=f"catalogue import {time.strftime('%H:%M')}")
        self.tally["workflow jobs"] += len(flow.steps)
        return created.workflow_id

    @property
    def sent(self) -> int:
        return sum(self.tally.values())

    def summary(self) -> str:
        return ", ".join(f"{name} {n}" for name, n in sorted(self.tally.items())) or "nothing enqueued yet"

    def _newsletter(self) -> JobSpec:
        params = {"to": _address(self.rng, bounce=0.02), "issue": time.strftime("%Y-%m-%d %H:%M")}
        return JobSpec(task="examples.send_newsletter", params=params)
