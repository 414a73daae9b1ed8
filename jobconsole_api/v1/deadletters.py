"""Dead letters: list (the console's filters, keyset pages), one job's history, resubmit and purge by ids or by
a filter. A resubmit or purge over more than API.BULK_THRESHOLD jobs runs as a tracked bulk operation on the
workers (jobconsole/bulk/): the answer is 202 with the operation, whose progress GET /operations/{id} reports."""

from typing import Any

from django.db.models import Q, QuerySet
from django.utils import timezone

from jobconsole import audit
from jobconsole.bulk.operations import ConfirmError, start_from_rows
from jobconsole.bulk.selection import MAX_IDS, Selection, SelectionError, matching, parse_selection
from jobconsole.conf import api_config
from jobconsole.core import JobNotFound
from jobconsole.core.batch import BatchAction, BatchItem, Verdict, apply_batch
from jobconsole.core.ids import new_job_id
from jobconsole.engine import get_client
from jobconsole.models import Attempt, DeadLetter, Job
from jobconsole.moments import to_utc
from jobconsole_api.problems import Problem
from jobconsole_api.v1 import shapes
from jobconsole_api.v1.common import (
    DEAD_LETTER_CURSOR,
    NOT_FOUND,
    REASON,
    decode_cursor,
    encode_cursor,
    job_id_param,
    no_job,
    paging,
    visible_job,
)
from jobconsole_api.v1.routing import Call, Param, Reply, Response, operation
from jobconsole_api.v1.schema import NAME_PATTERN, ULID_PATTERN, Schema, array, boolean, obj, ref, string

WHEN: Schema = {
    "anyOf": [string(format="date", maxLength=10), string(format="date-time", maxLength=40)],
    "description": "a date (2026-11-25: its first moment for since, its last for until) or a date and time with "
    "its zone (2026-11-25T14:00:00Z)",
}
FILTER_FIELDS: dict[str, Schema] = {
    "queue": string(pattern=NAME_PATTERN),
    "task": string(pattern=NAME_PATTERN),
    "fingerprint": string("the cause's fingerprint", pattern="^[0-9a-f]{16}$"),
    "error_class": string(maxLength=200),
    "version": string("the task's version", pattern="^[1-9][0-9]{0,8}$"),
    "status": string("open (default: not resubmitted), resubmitted or all", enum=["open", "resubmitted", "all"]),
    "since": WHEN,
    "until": WHEN,
    "q": string("text in the error class or message", maxLength=200),
}


def _selection(ids: list[str] | None, filters: dict[str, Any]) -> Selection:
    try:
        if ids is not None:  # the schema requires at least one
            return parse_selection("deadletter", {"ids": ids})
        return parse_selection("deadletter", filters)
    except SelectionError as exc:
        raise Problem(422, str(exc)) from None


def _within_limits(call: Call, rows: QuerySet[DeadLetter], filters: dict[str, Any]) -> QuerySet[DeadLetter]:
    """The dead letters inside the token's limits; a `queue` or `task` filter outside them is a 403."""
    caller = call.caller
    caller.check_queue(filters.get("queue"))
    caller.check_task(filters.get("task"))
    if caller.queue_limits:
        rows = rows.filter(queue__in=sorted(caller.queue_limits))
    if caller.task_limits:
        rows = rows.filter(task__in=sorted(caller.task_limits))
    return rows


@operation(
    "GET", "/dead-letters", operation_id="list_dead_letters", summary="List dead letters", tag="dead letters",
    params=(*(Param(name, schema) for name, schema in FILTER_FIELDS.items()),
            *paging(DEAD_LETTER_CURSOR, "its death time in microseconds since the epoch ~ its row number")),
    database_only=True,
    scope="read",
    responses={200: Response("A page of dead letters, newest first.", obj(
        {"items": array(ref("DeadLetter")), "next_cursor": {"type": ["string", "null"]}}, ("items", "next_cursor")))},
)  # fmt: skip
def list_dead_letters(call: Call) -> Reply:
    """Every death of a job, newest first, filtered as on the console's dead-letters page (for a limited token:
    inside its limits)."""
    filters = {k: v for k, v in call.params.items() if k not in ("limit", "cursor")}
    try:
        rows: QuerySet[DeadLetter] = matching(parse_selection("deadletter", filters))
    except SelectionError as exc:
        raise Problem(400, str(exc)) from None
    rows = _within_limits(call, rows, filters)
    if cursor := call.params.get("cursor"):
        at, last = decode_cursor(cursor)
        rows = rows.filter(Q(died_at__lt=at) | Q(died_at=at, pk__lt=last))
    limit = call.params["limit"]
    found = list(rows.order_by("-died_at", "-pk")[: limit + 1])
    next_cursor = None
    if len(found) > limit:
        found = found[:limit]
        next_cursor = encode_cursor(to_utc(found[-1].died_at), found[-1].pk)
    return Reply(200, {"items": [shapes.dead_letter(letter) for letter in found], "next_cursor": next_cursor})


@operation(
    "GET", "/dead-letters/{job_id}/history", operation_id="dead_letter_history", summary="A job's attempts",
    tag="dead letters", params=(job_id_param(),), scope="any",
    responses={200: Response("Every attempt, oldest first, with its times; and each death.", obj(
        {"job_id": string(), "attempts": array(ref("Attempt")), "deaths": array(ref("DeadLetter"))},
        ("job_id", "attempts", "deaths"))), 404: NOT_FOUND},
)  # fmt: skip
def history(call: Call) -> Reply:
    """Every attempt of the job (from Redis while it holds the job, else from the database) and every death. A
    submit token reads only the jobs it submitted."""
    job_id = visible_job(call, call.params["job_id"])
    deaths = [shapes.dead_letter(d) for d in DeadLetter.objects.filter(job_id=job_id).order_by("died_at", "pk")]
    try:
        attempts = [shapes.attempt(a) for a in get_client().get(job_id).history]
    except JobNotFound:
        if not deaths and not Job.objects.filter(id=job_id).exists():
            raise no_job(job_id) from None
        attempts = [shapes.attempt(a) for a in Attempt.objects.filter(job_id=job_id).order_by("number")]
    return Reply(200, {"job_id": job_id, "attempts": attempts, "deaths": deaths})


def _body(extra: dict[str, Schema]) -> Schema:
    return obj(
        {
            "ids": array(string(pattern=ULID_PATTERN), "these jobs' dead letters", minItems=1, maxItems=MAX_IDS),
            "filter": obj(FILTER_FIELDS, (), "every dead letter this filter matches ({} : every open one)"),
            "reason": REASON,
            **extra,
        },
        (),
        "Either `ids` or `filter`, not both.",
    ) | {
        "oneOf": [{"required": ["ids"]}, {"required": ["filter"]}],
        "x-one-message": "send either `ids` (a list of job ids) or `filter` (an object; {} for every open one)",
    }


DONE = obj(
    {"done": {"type": "integer"}, "refused": {"type": "object", "description": "job id: why it was left alone"},
     "job_ids": array(string())},
    ("done", "refused", "job_ids"),
)  # fmt: skip
BULK_RESPONSES = {
    200: Response("Done in the request.", DONE),
    202: Response("Too many for one request: a bulk operation runs it on the workers. Follow its Location.",
                  ref("Operation")),
    422: Response("Neither ids nor a filter, both, or a value that does not fit the schema; or the "
                  "Idempotency-Key was used before with another body."),
}  # fmt: skip


def _chosen(call: Call) -> tuple[Selection, QuerySet[DeadLetter]]:
    """The selection the body names (the schema makes it `ids` or `filter`, one of them) and its dead letters
    inside the token's limits."""
    body = call.body
    selection = _selection(body.get("ids"), body.get("filter") or {})
    return selection, _within_limits(call, matching(selection), body.get("filter") or {})


def _in_background(call: Call, kind: str, rows: QuerySet[Any], selection: Selection, **options: Any) -> Reply:
    try:
        op = start_from_rows(kind, rows, user=call.actor, description={**selection.as_dict(), "api": True},
                             options=options, reason=call.body.get("reason", ""))  # fmt: skip
    except ConfirmError as exc:
        raise Problem(422, str(exc)) from None
    return Reply(202, shapes.operation(op), {"Location": f"/api/v1/operations/{op.pk}"})


def _batch(
    action: BatchAction, letters: list[tuple[str, str, int]], **options: Any
) -> tuple[list[str], dict[str, str]]:
    """Apply the action to each job once, in one round trip: (jobs done, {job: why refused})."""
    items: dict[str, BatchItem] = {}
    for job_id, queue, attempts in letters:
        items.setdefault(job_id, BatchItem(job_id, queue, expected_attempts=attempts))
    results = apply_batch(get_client(), action, list(items.values()), stamp=new_job_id(), **options)
    done = [r.job_id for r in results if r.verdict in (Verdict.DONE, Verdict.ALREADY)]
    refused = {r.job_id: r.why for r in results if r.verdict not in (Verdict.DONE, Verdict.ALREADY)}
    return done, refused


@operation(
    "POST", "/dead-letters/resubmit", operation_id="resubmit_dead_letters", summary="Resubmit dead letters",
    tag="dead letters", body=_body({"reset_attempts": boolean("count attempts from zero again", default=False)}),
    responses=BULK_RESPONSES, idempotent=True,
)  # fmt: skip
def resubmit(call: Call) -> Reply:
    """Queue the jobs again (history kept), each only if it is still dead with the attempt count of the death
    (compare-and-set). Only open dead letters (not resubmitted) are taken."""
    selection, letters_inside = _chosen(call)
    reset = bool(call.body.get("reset_attempts", False))
    rows = letters_inside.filter(resubmitted_at__isnull=True)
    if rows.count() > api_config()["BULK_THRESHOLD"]:
        return _in_background(call, "resubmit_deadletters", rows, selection, reset_attempts=reset, spread_seconds=0)
    letters = list(rows.order_by("pk").values_list("job_id", "queue", "attempts"))
    done, refused = _batch(BatchAction.RESUBMIT, letters, reset_attempts=reset)
    DeadLetter.objects.filter(job_id__in=done, resubmitted_at__isnull=True).update(
        resubmitted_at=timezone.now(), resubmitted_by=call.actor
    )
    audit.record(call.actor, "resubmit", job_ids=[*done, *refused], count=len(done), refused=len(refused),
                 filter=selection.as_dict(), reason=call.body.get("reason", ""),
                 detail={"reset_attempts": reset, **({"refused": refused} if refused else {})})  # fmt: skip
    return Reply(200, {"done": len(done), "refused": refused, "job_ids": done})


@operation(
    "POST", "/dead-letters/purge", operation_id="purge_dead_letters", summary="Purge dead letters",
    tag="dead letters", body=_body({}), responses=BULK_RESPONSES, idempotent=True,
)  # fmt: skip
def purge(call: Call) -> Reply:
    """Delete the jobs and their history from Redis and the database, each only while it is still dead."""
    selection, rows = _chosen(call)
    if rows.count() > api_config()["BULK_THRESHOLD"]:
        return _in_background(call, "purge_deadletters", rows, selection)
    letters = list(rows.order_by("pk").values_list("job_id", "queue", "attempts"))
    done, refused = _batch(BatchAction.PURGE, letters)
    Job.objects.filter(id__in=done).delete()
    audit.record(call.actor, "purge", job_ids=[*done, *refused], count=len(done), refused=len(refused),
                 filter=selection.as_dict(), reason=call.body.get("reason", ""),
                 detail={"refused": refused} if refused else {})  # fmt: skip
    return Reply(200, {"done": len(done), "refused": refused, "job_ids": done})
