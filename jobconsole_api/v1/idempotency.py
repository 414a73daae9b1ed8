"""Idempotency-Key: a client retrying a request it is unsure about sends the same key, and gets the first
response again instead of a second effect. Kept in Redis per token and key for API.IDEMPOTENCY_TTL:

- the first request with a key reserves it (SET NX), runs, and stores its response (status, headers, body)
  with a digest of the request (operation and canonical JSON body);
- the same key with the same request replays that response (header Idempotent-Replayed: true);
- the same key with a different request is a 422, while the first is still running a 409;
- a response of 5xx (Redis down, say) is not kept: the key is released, so the retry runs for real.
"""

import hashlib
import json
from collections.abc import Callable

from django.http import HttpResponse

from jobconsole.conf import api_config
from jobconsole.engine import get_client
from jobconsole_api.models import ApiToken
from jobconsole_api.problems import Problem
from jobconsole_api.v1.schema import validate

MAX_KEY = 255
# Visible ASCII, spaces only inside: what every HTTP stack passes through unchanged (a header's edges are trimmed).
KEY_PATTERN = "^[!-~]([ -~]*[!-~])?$"
KEY_SCHEMA = {
    "type": "string",
    "minLength": 1,
    "maxLength": MAX_KEY,
    "pattern": KEY_PATTERN,
    "x-pattern-message": "must be visible ASCII characters (spaces allowed between them)",
}
RUNNING_TTL = 60  # seconds a reservation lives if its request dies before storing a response
KEPT_HEADERS = ("Content-Type", "Location", "Retry-After")


def canonical(body: bytes) -> bytes:
    """A JSON body in one spelling (keys sorted, no spaces), so a replay may differ in layout."""
    try:
        return json.dumps(json.loads(body), sort_keys=True, separators=(",", ":")).encode()
    except ValueError:
        return body


def _digest(operation: str, body: bytes) -> str:
    return hashlib.sha256(operation.encode() + b"\n" + canonical(body)).hexdigest()


def once(token: ApiToken, operation: str, key: str, body: bytes, run: Callable[[], HttpResponse]) -> HttpResponse:
    if validate(key, KEY_SCHEMA):  # the routing checks it first, naming what is wrong
        raise Problem(400, f"The Idempotency-Key must be 1 to {MAX_KEY} visible ASCII characters.")
    records = get_client().idempotency
    scope = str(token.pk)
    digest = _digest(operation, body)
    ttl = int(api_config()["IDEMPOTENCY_TTL"])
    reserved, held = records.reserve(scope, key, json.dumps({"digest": digest, "running": True}), RUNNING_TTL)
    if not reserved:
        return _replay(held, digest, key)
    try:
        response = run()
    except BaseException:
        records.release(scope, key)
        raise
    if response.status_code >= 500:
        records.release(scope, key)
        return response
    stored = {
        "digest": digest,
        "status": response.status_code,
        "headers": {h: response.headers[h] for h in KEPT_HEADERS if h in response.headers},
        "body": response.content.decode(),
    }
    records.keep(scope, key, json.dumps(stored), ttl)
    return response


def _replay(raw: str | None, digest: str, key: str) -> HttpResponse:
    if raw is None:  # expired between the two commands: rare enough to ask for a retry
        raise Problem(409, f"A request with the Idempotency-Key {key!r} just finished; send it again.")
    stored = json.loads(raw)
    if stored["digest"] != digest:
        raise Problem(
            422,
            f"The Idempotency-Key {key!r} was used for a different request (another operation or body). Use a new "
            "key for a new request.",
        )
    if stored.get("running"):
        raise Problem(
            409,
            f"A request with the Idempotency-Key {key!r} is still being processed; retry after it finished.",
            headers={"Retry-After": "1"},
        )
    response = HttpResponse(stored["body"].encode(), status=stored["status"])
    for name, value in stored["headers"].items():
        response.headers[name] = value
    response.headers["Idempotent-Replayed"] = "true"
    return response
