"""The database mirror of the engine's state, the audit log, the transactional-enqueue outbox, and the metrics
history (counters by time bucket and queue-depth samples) behind the console's charts.

Redis is where jobs move; these tables are where operators look, search and keep history. The mirror
(`jobconsole.mirror`) is their only writer for Job, Attempt, DeadLetter and Queue rows: admin actions go
to Redis through the engine, and their effect comes back through the events stream. JSON values
(parameters, result, checkpoint, last error) are kept as the exact text Redis holds, so nothing is
re-encoded and parameter text is searchable with a plain (wildcard-escaped) LIKE on every database.
"""

import json
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models

from jobconsole.conf import periodic_config
from jobconsole.core.periodic import Misfire, Schedule
from jobconsole.core.states import JobState

STATE_CHOICES = [(s.value, s.value) for s in JobState]


class Job(models.Model):
    id = models.CharField(max_length=26, primary_key=True, help_text="client-generated ULID")
    task = models.CharField(max_length=200)
    version = models.PositiveIntegerField(default=1)
    queue = models.CharField(max_length=100)
    priority = models.IntegerField(default=0, help_text="lower runs first")
    state = models.CharField(max_length=16, choices=STATE_CHOICES)
    params = models.TextField(default="{}", help_text="JSON object, exactly as stored in Redis")
    result = models.TextField(blank=True, default="")
    attempts = models.IntegerField(default=0)
    max_retries = models.IntegerField(default=0)
    unique_key = models.CharField(max_length=200, blank=True, default="")
    group = models.CharField(max_length=100, blank=True, default="")
    enqueued_at = models.DateTimeField(null=True, blank=True)
    run_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    progress = models.FloatField(null=True, blank=True)
    checkpoint = models.TextField(blank=True, default="")
    worker = models.CharField(max_length=200, blank=True, default="")
    error_class = models.CharField(max_length=200, blank=True, default="")
    last_error = models.TextField(blank=True, default="")
    cancel_requested = models.BooleanField(default=False)
    reason = models.TextField(blank=True, default="")
    in_redis = models.BooleanField(
        default=True, help_text="false once Redis has dropped the job (retention); the row is kept as history"
    )
    synced_at = models.DateTimeField(null=True, blank=True, help_text="when the mirror last wrote this row")
    workflow_id = models.CharField(max_length=26, blank=True, default="", help_text="the workflow it is a step of")
    step = models.CharField(max_length=200, blank=True, default="", help_text="its step's name in its workflow")
    release_options = models.TextField(
        blank=True, default="", help_text="a job with parents: its hash's release options as JSON (for a restore)"
    )

    class Meta:
        ordering = ["-enqueued_at"]
        indexes = [
            models.Index(fields=["state", "enqueued_at"], name="jc_job_state_time"),
            models.Index(fields=["queue", "state", "enqueued_at"], name="jc_job_queue_state_time"),
            models.Index(fields=["task", "enqueued_at"], name="jc_job_task_time"),
            models.Index(fields=["enqueued_at"], name="jc_job_enqueued"),
            models.Index(fields=["state", "finished_at"], name="jc_job_state_finished"),
            models.Index(fields=["unique_key"], name="jc_job_unique_key"),
            models.Index(fields=["workflow_id", "state"], name="jc_job_workflow_state"),
        ]
        permissions = [
            ("operate_job", "Can retry, cancel and edit jobs"),
            ("purge_job", "Can delete jobs"),
        ]

    def __str__(self) -> str:
        return f"{self.task} {self.id} ({self.state})"

    @property
    def params_data(self) -> Any:
        return _loads(self.params)

    @property
    def is_waiting(self) -> bool:
        return JobState(self.state).is_waiting


class JobLink(models.Model):
    """One link: `child` waits for `parent` (a workflow's edge, or a depends_on parent). Written once, when the
    mirror first sees the child; the parent may be in another queue, or never mirrored (no foreign keys)."""

    child_id = models.CharField(max_length=26)
    parent_id = models.CharField(max_length=26)
    parent_queue = models.CharField(max_length=100)
    policy = models.CharField(max_length=16, help_text="what a parent that does not complete does: cancel or run")
    position = models.PositiveIntegerField(default=0, help_text="the parent's place in the child's list")
    workflow_id = models.CharField(max_length=26, blank=True, default="")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["child_id", "parent_id"], name="jc_link_child_parent")]
        indexes = [
            models.Index(fields=["parent_id"], name="jc_link_parent"),
            models.Index(fields=["workflow_id"], name="jc_link_workflow"),
        ]

    def __str__(self) -> str:
        return f"{self.child_id} after {self.parent_id}"


class Workflow(models.Model):
    """A workflow as the mirror last saw it: its record in Redis (name, size, created, cancelled) and the
    counts of its mirrored jobs by state, recounted from the Job rows whenever a batch touches one of them."""

    class State(models.TextChoices):
        RUNNING = "running", "running"
        COMPLETED = "completed", "completed"
        FAILED = "failed", "ended with failures"
        CANCELLED = "cancelled", "cancelled"

    id = models.CharField(max_length=26, primary_key=True)
    name = models.CharField(max_length=200, blank=True, default="")
    queue = models.CharField(max_length=100, help_text="the queue holding its record (its first step's)")
    state = models.CharField(max_length=16, choices=State.choices, default=State.RUNNING)
    size = models.PositiveIntegerField(default=0, help_text="how many jobs it was made of")
    counts = models.JSONField(default=dict, help_text="job state -> how many of its jobs are in it")
    created_at = models.DateTimeField(null=True, blank=True)
    cancelled_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True, help_text="when its last job ended")
    synced_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["created_at", "id"], name="jc_wf_created"),
            models.Index(fields=["state", "created_at", "id"], name="jc_wf_state_created"),
        ]

    def __str__(self) -> str:
        return f"workflow {self.name or self.id} ({self.state})"


class Attempt(models.Model):
    """One attempt, in the order Redis recorded them (`number` is the position in the job's history)."""

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="history", db_constraint=True)
    number = models.PositiveIntegerField()
    attempt = models.PositiveIntegerField(default=0, help_text="the job's attempt count when it ran")
    worker = models.CharField(max_length=200, blank=True, default="")
    host = models.CharField(max_length=200, blank=True, default="")
    pid = models.IntegerField(default=0)
    started_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    duration = models.FloatField(null=True, blank=True, help_text="seconds")
    outcome = models.CharField(max_length=32)
    error_class = models.CharField(max_length=200, blank=True, default="")
    message = models.TextField(blank=True, default="")
    traceback = models.TextField(blank=True, default="")
    top_frame = models.CharField(max_length=500, blank=True, default="")

    class Meta:
        ordering = ["job", "number"]
        constraints = [models.UniqueConstraint(fields=["job", "number"], name="jc_attempt_job_number")]

    def __str__(self) -> str:
        return f"attempt {self.attempt} of {self.job_id}: {self.outcome}"


class DeadLetter(models.Model):
    """One death of a job: when and why, grouped by fingerprint; who brought it back and when.

    It outlives the job's Redis keys (retention) together with the Job row and its attempts; only an
    explicit purge (or the database retention for dead letters) removes it."""

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="dead_letters")
    queue = models.CharField(max_length=100)
    task = models.CharField(max_length=200)
    version = models.PositiveIntegerField(default=1)
    died_at = models.DateTimeField()
    attempts = models.IntegerField(default=0)
    error_class = models.CharField(max_length=200, blank=True, default="")
    message = models.TextField(blank=True, default="")
    top_frame = models.CharField(max_length=500, blank=True, default="")
    fingerprint = models.CharField(max_length=16, help_text="hash of the error class and the top user frame")
    resubmitted_at = models.DateTimeField(null=True, blank=True)
    resubmitted_by = models.CharField(max_length=150, blank=True, default="")

    class Meta:
        ordering = ["-died_at"]
        constraints = [models.UniqueConstraint(fields=["job", "died_at"], name="jc_deadletter_job_died")]
        # The console lists dead letters newest first (died_at, then id) under filters, and groups them by cause.
        # Open ones (resubmitted_at null, the console's default) have indexes of their own, so that however many
        # were resubmitted the open ones are one range: for the list, with or without a queue or task, and for
        # the groups, which are counted from an index alone (never the table), also within a queue or a task.
        # (SQLite picks the index that gives both the filter and the order (died_at, id), with no statistics.)
        indexes = [
            models.Index(fields=["fingerprint", "died_at"], name="jc_dl_fingerprint"),
            models.Index(fields=["queue", "died_at"], name="jc_dl_queue"),
            models.Index(fields=["task", "died_at", "version"], name="jc_dl_task_died"),
            models.Index(fields=["died_at", "id"], name="jc_dl_died"),
            models.Index(fields=["resubmitted_at", "died_at", "id"], name="jc_dl_open_died"),
            models.Index(fields=["queue", "resubmitted_at", "died_at", "id"], name="jc_dl_open_queue"),
            models.Index(fields=["task", "resubmitted_at", "died_at", "id"], name="jc_dl_open_task"),
            models.Index(fields=["resubmitted_at", "fingerprint", "died_at"], name="jc_dl_open_cause"),
            models.Index(fields=["resubmitted_at", "queue", "fingerprint", "died_at"], name="jc_dl_open_queue_cause"),
            models.Index(fields=["resubmitted_at", "task", "fingerprint", "died_at"], name="jc_dl_open_task_cause"),
        ]
        permissions = [
            ("operate_deadletter", "Can resubmit dead letters"),
            ("purge_deadletter", "Can purge dead letters"),
        ]

    def __str__(self) -> str:
        return f"{self.task} {self.job_id} died {self.died_at:%Y-%m-%d %H:%M:%S}"

    @property
    def is_open(self) -> bool:
        return self.resubmitted_at is None


class Queue(models.Model):
    name = models.CharField(max_length=100, primary_key=True)
    paused = models.BooleanField(default=False)
    changed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["name"]
        permissions = [("operate_queue", "Can pause and resume queues")]

    def __str__(self) -> str:
        return self.name


class AuditLog(models.Model):
    """Every operator action: who, what, on which jobs or filter, how many, when, and why."""

    at = models.DateTimeField(auto_now_add=True, db_index=True)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    actor = models.CharField(max_length=150, help_text="username, or the command for shell actions")
    action = models.CharField(max_length=50, db_index=True)
    queue = models.CharField(max_length=100, blank=True, default="")
    job_ids = models.JSONField(default=list, blank=True)
    filter = models.JSONField(default=dict, blank=True, help_text="the selection, for filter-based actions")
    count = models.IntegerField(default=0, help_text="jobs the action applied to")
    refused = models.IntegerField(default=0, help_text="jobs it could not apply to (moved on meanwhile)")
    reason = models.TextField(blank=True, default="")
    detail = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-at"]
        verbose_name = "audit record"

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M:%S} {self.actor} {self.action} ({self.count})"


class BulkOperation(models.Model):
    """One operator action over many jobs, run server-side in chunks by the system task `jobconsole.bulk`
    (jobconsole/bulk/): who asked, the selection as given, the options, and how far it got.

    The set of jobs is frozen when the operator confirms (its BulkChunk rows), so jobs that arrive later
    are never touched. `done`, `refused` and `failed` count jobs of finished chunks only, each chunk once."""

    class Kind(models.TextChoices):
        RESUBMIT_DEADLETTERS = "resubmit_deadletters", "Resubmit dead letters"
        PURGE_DEADLETTERS = "purge_deadletters", "Purge dead letters"
        RETRY_JOBS = "retry_jobs", "Retry jobs"
        CANCEL_JOBS = "cancel_jobs", "Cancel jobs"
        DELETE_JOBS = "delete_jobs", "Delete jobs"

    class Status(models.TextChoices):
        PENDING = "pending"
        RUNNING = "running"
        DONE = "done"
        CANCELLED = "cancelled"
        FAILED = "failed"

    kind = models.CharField(max_length=32, choices=Kind.choices)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING, db_index=True)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    actor = models.CharField(max_length=150, help_text="username, or the command for shell actions")
    selection = models.JSONField(default=dict, blank=True, help_text="the filter or the ids, as given")
    options = models.JSONField(default=dict, blank=True, help_text="reset_attempts, spread_seconds")
    reason = models.TextField(blank=True, default="")
    confirmation = models.CharField(
        max_length=64, unique=True, null=True, blank=True, help_text="digest of the preview confirmed (no twice)"
    )
    stamp = models.CharField(
        max_length=26, unique=True, help_text="recorded in each job it changed; a repeated chunk changes nothing twice"
    )
    job_id = models.CharField(max_length=26, blank=True, default="", help_text="the system job running it")
    audit = models.ForeignKey("AuditLog", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    previewed = models.IntegerField(null=True, blank=True, help_text="jobs the confirmed preview showed")
    total = models.IntegerField(default=0, help_text="jobs frozen at confirmation")
    done = models.IntegerField(default=0)
    refused = models.IntegerField(default=0, help_text="jobs that had moved on (compare-and-set refused)")
    failed = models.IntegerField(default=0, help_text="jobs Redis answered with an error")
    chunks = models.IntegerField(default=0)
    chunks_done = models.IntegerField(default=0)
    redone = models.IntegerField(default=0, help_text="chunks run again after an interruption")
    spread_start_ms = models.BigIntegerField(null=True, blank=True, help_text="Redis time the spread window opens")
    cancel_requested = models.BooleanField(default=False)
    cancelled_by = models.CharField(max_length=150, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    started_at = models.DateTimeField(null=True, blank=True)
    progressed_at = models.DateTimeField(null=True, blank=True, help_text="when the last chunk finished")
    finished_at = models.DateTimeField(null=True, blank=True)
    summary = models.JSONField(default=dict, blank=True, help_text="refusals by reason with a sample; errors")

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} #{self.pk} ({self.status})"

    @property
    def is_finished(self) -> bool:
        return self.status in (self.Status.DONE, self.Status.CANCELLED, self.Status.FAILED)


class BulkChunk(models.Model):
    """A slice of a bulk operation's frozen set (about 500 jobs), processed as one unit and marked once."""

    class Status(models.TextChoices):
        PENDING = "pending"
        STARTED = "started", "started (its Redis step may have run)"
        DONE = "done"

    operation = models.ForeignKey(BulkOperation, on_delete=models.CASCADE, related_name="chunk_rows")
    index = models.IntegerField()
    first = models.IntegerField(help_text="position of its first job in the frozen set")
    items = models.JSONField(help_text="[job id, queue, dead letter pk or null, attempts or null] per job")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    runs = models.IntegerField(default=0, help_text="times its Redis step began")
    done = models.IntegerField(default=0)
    refused = models.IntegerField(default=0)
    failed = models.IntegerField(default=0)
    refusals = models.JSONField(default=dict, blank=True, help_text="reasons counted, and a sample of jobs")
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["operation", "index"]
        constraints = [models.UniqueConstraint(fields=["operation", "index"], name="jc_bulkchunk_op_index")]

    def __str__(self) -> str:
        return f"chunk {self.index} of operation {self.operation_id} ({self.status})"


class MirrorCursor(models.Model):
    """The last events-stream entry applied per queue, committed with the rows it produced."""

    queue = models.CharField(max_length=100, primary_key=True)
    last_id = models.CharField(max_length=40, default="0-0")
    events = models.BigIntegerField(default=0, help_text="events applied so far")
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"{self.queue}@{self.last_id}"


class MirrorResync(models.Model):
    """A full resynchronisation of one queue from Redis (first sight, trimmed events, Redis rewound)."""

    at = models.DateTimeField(auto_now_add=True)
    queue = models.CharField(max_length=100)
    reason = models.CharField(max_length=40)
    from_id = models.CharField(max_length=40, blank=True, default="")
    to_id = models.CharField(max_length=40, blank=True, default="")
    jobs = models.IntegerField(default=0, help_text="jobs read from Redis")
    missing = models.IntegerField(default=0, help_text="rows no longer in Redis, marked in_redis=false")
    restored = models.IntegerField(default=0, help_text="waiting or running jobs Redis lost, enqueued again")

    class Meta:
        ordering = ["-at"]

    def __str__(self) -> str:
        return f"resync {self.queue} ({self.reason})"


class MirrorLease(models.Model):
    """The database half of the mirror's leadership: every batch updates this row only if it still holds
    `token`, so a deposed leader's late batch rolls back instead of overwriting newer rows."""

    name = models.CharField(max_length=40, primary_key=True)
    token = models.CharField(max_length=64)
    holder = models.CharField(max_length=200, blank=True, default="")
    acquired_at = models.DateTimeField()
    renewed_at = models.DateTimeField()
    redis_epoch = models.BigIntegerField(
        default=0, help_text="the Redis epoch counter as last read by a batch this database committed"
    )

    def __str__(self) -> str:
        return f"{self.name}: {self.holder}"


class OutboxEntry(models.Model):
    """A job enqueued inside the application's transaction, published to Redis after commit."""

    id = models.CharField(max_length=26, primary_key=True, help_text="the job's id (ULID), fixed before publishing")
    task = models.CharField(max_length=200)
    queue = models.CharField(max_length=100, blank=True, default="")
    spec = models.JSONField(help_text="the JobSpec fields (delays already turned into run_at)")
    created_at = models.DateTimeField(auto_now_add=True)
    published_at = models.DateTimeField(null=True, blank=True)
    status = models.CharField(max_length=16, blank=True, default="", help_text="created, exists or duplicate")
    tries = models.IntegerField(default=0)
    last_error = models.TextField(blank=True, default="")

    class Meta:
        ordering = ["created_at"]
        verbose_name_plural = "outbox entries"
        indexes = [models.Index(fields=["published_at", "created_at"], name="jc_outbox_unpublished")]

    def __str__(self) -> str:
        return f"{self.task} {self.id}"


class MetricBucket(models.Model):
    """One counter of one queue and task summed over a time bucket: the per-minute counters Redis keeps for a day
    (core/metrics.py names them), copied here by the mirror leader (`jobconsole.metrics.rollup`) at 1-minute
    resolution and summed into 10-minute and hourly buckets, each kept for its own time (METRICS settings).
    `retry_max` is the bucket's highest retry number, combined with max() instead of a sum."""

    queue = models.CharField(max_length=100)
    task = models.CharField(max_length=200)
    metric = models.CharField(max_length=40)
    resolution = models.PositiveIntegerField(help_text="seconds the bucket spans: 60, 600 or 3600")
    start = models.DateTimeField(help_text="start of the bucket, a multiple of its resolution")
    value = models.BigIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["resolution", "start", "queue", "task", "metric"], name="jc_metricbucket_key"
            )
        ]

    def __str__(self) -> str:
        return f"{self.queue}/{self.task} {self.metric}@{self.start:%Y-%m-%d %H:%M}+{self.resolution}s={self.value}"


class QueueSample(models.Model):
    """A queue's depth: a sample taken by the mirror leader every METRICS.SAMPLE_EVERY seconds (resolution 0),
    or the largest of each figure over a 10-minute or hourly interval (resolution 600 or 3600)."""

    queue = models.CharField(max_length=100)
    resolution = models.PositiveIntegerField(default=0, help_text="0: one sample; else the interval's seconds")
    at = models.DateTimeField(help_text="when the sample was taken (Redis's clock), or the interval's start")
    queued = models.BigIntegerField(default=0)
    scheduled = models.BigIntegerField(default=0, help_text="delayed jobs and retries waiting for their backoff")
    running = models.BigIntegerField(default=0)
    dead = models.BigIntegerField(default=0)
    oldest_wait = models.FloatField(null=True, blank=True, help_text="seconds the longest-waiting job had waited")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["resolution", "at", "queue"], name="jc_queuesample_key")]

    def __str__(self) -> str:
        return f"{self.queue}@{self.at:%Y-%m-%d %H:%M:%S}: {self.queued} queued"


class MetricsCursor(models.Model):
    """How far each queue's per-minute counters have been copied: every minute up to `flushed_through` is in the
    MetricBucket rows (readers take later minutes from Redis), and the tasks seen lately (for those reads)."""

    queue = models.CharField(max_length=100, primary_key=True)
    flushed_through = models.BigIntegerField(help_text="the last minute copied (Unix minutes)")
    tasks = models.JSONField(default=dict, blank=True, help_text="task -> the last minute it was counted in")
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"{self.queue} through minute {self.flushed_through}"


def _loads(text: str) -> Any:
    if not text:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text


class PeriodicSchedule(models.Model):
    """A periodic job defined in the database (admin, console). The scheduler reads these rows every pass,
    besides the ones in JOBCONSOLE["PERIODIC"]["SCHEDULES"]; what it fired last lives in Redis."""

    MISFIRE_CHOICES = [("skip", "skip missed slots"), ("run_once", "run once for all missed slots")]

    name = models.CharField(max_length=100, unique=True, help_text="letters, digits, '_', '.', '-'")
    task = models.CharField(max_length=200)
    params = models.JSONField(default=dict, blank=True, help_text="the task's parameters (a JSON object)")
    cron = models.CharField(
        max_length=200, blank=True, default="", help_text="5-field cron or a macro (@hourly, @daily, ...)"
    )
    every_seconds = models.FloatField(null=True, blank=True, help_text="a fixed interval instead of cron")
    queue = models.CharField(max_length=100, blank=True, default="", help_text="empty: the task's queue")
    priority = models.IntegerField(null=True, blank=True, help_text="empty: the task's priority")
    enabled = models.BooleanField(default=True)
    misfire = models.CharField(max_length=16, choices=MISFIRE_CHOICES, default="skip")
    timezone = models.CharField(max_length=64, default="UTC", help_text="IANA zone the cron fields are read in")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        verbose_name = "periodic schedule"
        permissions = [("operate_periodicschedule", "Can enable, disable and run periodic schedules now")]

    def __str__(self) -> str:
        return self.name

    def to_schedule(self) -> Schedule:
        """The engine's Schedule; ValueError when the row is not a valid one."""
        return Schedule(
            name=self.name,
            task=self.task,
            params=self.params if isinstance(self.params, dict) else {},
            cron=self.cron.strip(),
            every=self.every_seconds,
            queue=self.queue or None,
            priority=self.priority,
            enabled=self.enabled,
            misfire=Misfire(self.misfire),
            timezone=self.timezone or "UTC",
            origin="database",
        )

    def clean(self) -> None:
        if self.name in periodic_config()["SCHEDULES"]:
            raise ValidationError({"name": "a schedule of this name is defined in the settings"})
        if not isinstance(self.params, dict):
            raise ValidationError({"params": "must be a JSON object"})
        try:
            self.to_schedule()
        except ValueError as exc:
            raise ValidationError(str(exc)) from exc


class AlarmSilence(models.Model):
    """An operator's silence of one alarm (jobconsole/alarms.py): the alarm still shows, as silenced with who, why
    and until when, and counts toward no level until the silence ends: at `until`, or (no `until`) once the
    alarm has cleared; `ended_at` marks one ended early (lifted, replaced, or cleared)."""

    key = models.CharField(max_length=300, db_index=True, help_text="the alarm: rule:queue:task, or service:<part>")
    label = models.TextField(blank=True, default="", help_text="the alarm's sentence when it was silenced")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    actor = models.CharField(max_length=150)
    reason = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True)
    until = models.DateTimeField(null=True, blank=True, help_text="empty: until the alarm clears")
    ended_at = models.DateTimeField(null=True, blank=True, db_index=True)
    ended_why = models.CharField(max_length=200, blank=True, default="")

    class Meta:
        ordering = ["-created_at"]
        verbose_name = "alarm silence"

    def __str__(self) -> str:
        return f"{self.key} silenced by {self.actor}"
