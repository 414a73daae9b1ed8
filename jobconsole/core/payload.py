"""Decoding a job's stored params and checkpoint. The engine writes them as JSON, but a job's hash can be
written by other hands (a direct HSET, a restored dump); what cannot be decoded must fail that one job,
never the worker, the batch it was claimed with, or a reader listing it."""

import json
from typing import Any

from jobconsole.core.errors import UndecodablePayload

MAX_QUOTED = 120  # characters of the bad value quoted in the error
# The C scanner behind json.loads, called directly for what the engine writes (an object, no surrounding
# whitespace): json.loads's checks and two whitespace regex matches were half of the decoding of every job.
_raw_decode = json.JSONDecoder().raw_decode


def decode_params(text: str) -> dict[str, Any]:
    """A job's params: a JSON object. Raises UndecodablePayload saying what is wrong."""
    if text == "{}":  # the common case
        return {}
    if text[:1] == "{":
        try:
            value, end = _raw_decode(text)
        except ValueError:
            pass  # json.loads below says what is wrong
        else:
            if end == len(text):  # all of it, as json.loads requires; anything else is judged by json.loads
                return value  # type: ignore[no-any-return]
    value = _decode("params", text)
    if not isinstance(value, dict):
        raise UndecodablePayload(f"params must be a JSON object, got {type(value).__name__}: {_quote(text)}")
    return value


def decode_checkpoint(text: str) -> Any:
    """A job's saved checkpoint ('' when none). Raises UndecodablePayload."""
    return _decode("checkpoint", text) if text else None


def _decode(field: str, text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as exc:
        verb = "are" if field == "params" else "is"
        raise UndecodablePayload(f"{field} {verb} not JSON ({exc}): {_quote(text)}") from None


def _quote(text: str) -> str:
    return repr(text if len(text) <= MAX_QUOTED else text[:MAX_QUOTED] + "...")
