"""Pieces the operations share: paging parameters, engine refusals as problems, the caller's own jobs."""

import re
from datetime import datetime
from typing import Any

from jobconsole.actions import Outcome
from jobconsole.conf import api_config
from jobconsole.core import DuplicateJob, InvalidJob, JobNotFound, JobStateConflict
from jobconsole.core.job import Job as LiveJob
from jobconsole.engine import get_client
from jobconsole.models import Job as JobRow
from jobconsole.moments import from_micros, to_micros
from jobconsole_api.problems import Problem
from jobconsole_api.v1 import shapes
from jobconsole_api.v1.routing import Call, Param, Response
from jobconsole_api.v1.schema import NAME_PATTERN, ULID_PATTERN, Schema, integer, obj, string

MAX_REASON = 1000


def job_id_param(description: str = "the job's id, a ULID") -> Param:
    return Param("job_id", string(description, pattern=ULID_PATTERN), where="path", required=True)


def queue_param(where: str = "query", description: str = "only this queue") -> Param:
    return Param("queue", string(description, pattern=NAME_PATTERN), where=where, required=where == "path")  # type: ignore[arg-type]


def _limit() -> Schema:
    # The limits are settings, read when asked: the document shows the values of the process serving it.
    config = api_config()
    return integer("items per page", minimum=1, maximum=config["MAX_PAGE_SIZE"], default=config["PAGE_SIZE"])


def paging(cursor_pattern: str, position: str) -> tuple[Param, Param]:
    """`limit` and `cursor`: a cursor is a position (`position` says what it holds), so any value of its
    pattern pages on from there; a value of another shape is a 400."""
    description = f"from the previous page's next_cursor: the position of its last item ({position})"
    return Param("limit", _limit), Param("cursor", string(description, pattern=cursor_pattern))


def page_of(item: Schema) -> Schema:
    return obj(
        {"items": {"type": "array", "items": item}, "next_cursor": {"type": ["string", "null"]}},
        ("items", "next_cursor"),
    )


REASON = string("why (kept in the audit log)", maxLength=MAX_REASON)
MESSAGE = obj({"id": string(), "message": string()}, ("id", "message"))
NOT_FOUND = Response(
    "No such job (or not one this token may see: outside its limits, or, for a submit token, not one of its own)."
)
CONFLICT = Response("The job is not in a state that allows this (it moved on); nothing was changed.")


def refusal(outcome: Outcome) -> Problem:
    """An action the engine refused, as the status its kind deserves."""
    exc = outcome.refusal
    if isinstance(exc, JobNotFound):
        return Problem(404, outcome.message)
    if isinstance(exc, InvalidJob):
        return Problem(422, outcome.message)
    if isinstance(exc, JobStateConflict | DuplicateJob):
        return Problem(409, outcome.message)
    return Problem(409, outcome.message)


def job_place(job_id: str) -> tuple[str, str] | None:
    """A job's (queue, task): from Redis, or, once Redis dropped it, from the database; None when neither has it."""
    try:
        job = get_client().get(job_id, history=False)
    except JobNotFound:
        row: tuple[str, str] | None = JobRow.objects.filter(id=job_id).values_list("queue", "task").first()
        return row
    return job.queue, job.task


def may_see(call: Call, job_id: str) -> bool:
    """Whether the job is there for the caller (jobconsole_api/access.py): a read or operate token sees every job
    inside its limits, a submit token the jobs it submitted. An unknown id: False for a token that needs to look
    (the handler's own 404 otherwise)."""
    caller = call.caller
    if not caller.may_read_all and not caller.owned([job_id]):
        return False
    if not caller.limited:
        return True
    place = job_place(job_id)
    return place is not None and caller.within(*place)


def visible_job(call: Call, job_id: str) -> str:
    """The job id, upper-cased, once the caller may see the job; else the 404 of an unknown id."""
    job_id = job_id.upper()
    if not may_see(call, job_id):
        raise no_job(job_id)
    return job_id


def no_job(job_id: str) -> Problem:
    return Problem(404, f"No job {job_id}.")


# A dead letters page's cursor: the last row's death time (microseconds since the epoch) and row number.
DEAD_LETTER_CURSOR = "^[0-9]{1,16}~[0-9]{1,18}$"


def encode_cursor(moment: datetime, pk: int) -> str:
    return f"{to_micros(moment)}~{pk}"


def decode_cursor(cursor: str) -> tuple[datetime, int]:
    if not re.fullmatch(DEAD_LETTER_CURSOR, cursor):
        raise Problem(400, "The cursor is not a position of this list; start from the first page (no cursor).")
    micros, _, pk = cursor.partition("~")
    return from_micros(int(micros)), int(pk)


def live_shape(job: LiveJob) -> dict[str, Any]:
    """A job Redis holds, as the API shows it, with its parents and dependents (docs/workflows.md). Only a job
    with parents (deps_n) or dependents (kids) has links to read: no further round trip otherwise."""
    linked = job.raw.get("deps_n") or job.raw.get("kids")
    return shapes.live_job(job, get_client().queries.workflows.links(job.id, job.queue) if linked else None)
