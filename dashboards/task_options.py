"""A task's registered options (as a worker announced them: `Task.options()`, JSON) in an operator's words:
"up to 3 retries (4 attempts)", "5 s, doubling, at most 1 h", "no limit", never Python's `None` or `['Exception']`.

Options a newer worker announces that this console does not know yet are still listed, plainly formatted."""

from dataclasses import dataclass
from typing import Any

from dashboards.templatetags.console import duration
from jobconsole.core.backoff import YEAR_S, Backoff, retry_delay

DEAD_LETTER_WORDS = {"save": "kept as a dead letter", "discard": "discarded (ends as failed, expires)"}
SHUTDOWN_WORDS = {
    "finish": "lets the running job finish",
    "requeue": "puts the job back, no attempt used",
    "fail": "dead-letters the job",
}
UNIQUE_WORDS = {"end": "until the job ends", "start": "until the job starts"}
SHOWN_DELAYS = 3  # the first retries' delays spelled out ("5 s, 10 s, 20 s, … at most 1 h")


@dataclass(frozen=True, slots=True)
class Option:
    label: str
    text: str
    link: str = ""  # what the text names, when it is a page: "queue" or "group"


def _plain(value: Any) -> str:
    """An option this module has no words for, still without Python's spelling."""
    if value is None or value == "" or value == []:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list | tuple):
        return ", ".join(str(v) for v in value)
    return str(value)


def _retries(options: dict[str, Any]) -> str:
    retries = options.get("max_retries")
    if not isinstance(retries, int):
        return _plain(retries)
    if retries == 0:
        return "none (1 attempt)"
    return f"up to {retries:,} {'retry' if retries == 1 else 'retries'} ({retries + 1:,} attempts)"


def _retry_delay(options: dict[str, Any]) -> str:
    """The delays before the first retries as the engine works them out, and the cap."""
    retries = options.get("max_retries")
    if retries == 0:
        return "— (never retried)"
    try:
        strategy = Backoff.parse(str(options.get("backoff_strategy", "exponential")))
        base, cap = float(options["retry_delay"]), float(options.get("max_retry_delay") or YEAR_S)
    except (KeyError, TypeError, ValueError):
        return _plain(options.get("retry_delay"))
    if strategy is Backoff.IMMEDIATE:
        return "none: retried at once"
    if strategy is Backoff.YEAR:
        return "a year (the job is parked)"
    if strategy is Backoff.CONSTANT:
        return f"{duration(min(base, cap))} each time"
    upper = Backoff.EXPONENTIAL if strategy is Backoff.EXPONENTIAL_JITTER else strategy
    shown = min(SHOWN_DELAYS, retries) if isinstance(retries, int) and retries > 0 else SHOWN_DELAYS
    delays = [retry_delay(upper, base, n, cap) for n in range(1, shown + 1)]
    text = ", ".join(duration(d) for d in delays)
    if not isinstance(retries, int) or retries > shown:
        text += f", … at most {duration(cap)}" if delays[-1] < cap else ", …"
    return text + (" (each between half and all of it)" if strategy is Backoff.EXPONENTIAL_JITTER else "")


def describe(options: dict[str, Any]) -> list[Option]:
    """The options as (label, words) rows, the known ones first in the page's order, then any others."""
    rows: list[Option] = []
    known: set[str] = {"name", "backoff_strategy", "max_retry_delay"}  # the name is the page's title

    def add(key: str, label: str, text: str, link: str = "") -> None:
        if key in options:
            rows.append(Option(label, text, link))
        known.add(key)

    get = options.get
    add("queue", "Queue", _plain(get("queue")), "queue")
    add("version", "Version", _plain(get("version")))
    add("priority", "Priority", f"{_plain(get('priority'))} (lower runs first)")
    add("timeout", "Time limit", "no limit" if get("timeout") is None else duration(get("timeout")))
    add("max_retries", "Retries", _retries(options))
    add("retry_delay", "Retry delay", _retry_delay(options))
    add("retry_on", "Retried on", _plain(get("retry_on")) if get("retry_on") else "nothing (never retried)")
    add("visibility_timeout", "Lease", f"{duration(get('visibility_timeout'))}, renewed by heartbeats")
    heartbeat = get("max_heartbeat_interval")
    add(
        "max_heartbeat_interval",
        "Heartbeat",
        "not required" if heartbeat is None else f"at least every {duration(heartbeat)}",
    )
    policy = str(get("dead_letter_policy", ""))
    add("dead_letter_policy", "After the last attempt", DEAD_LETTER_WORDS.get(policy, policy))
    shutdown = str(get("on_shutdown", ""))
    add("on_shutdown", "When a worker stops", SHUTDOWN_WORDS.get(shutdown, shutdown))
    add("group", "Concurrency group", _plain(get("group")) if get("group") else "none", "group" if get("group") else "")
    unique = str(get("unique_until", ""))
    add("unique_until", "Unique key held", UNIQUE_WORDS.get(unique, unique))
    add("is_async", "Runs as", "a coroutine (async)" if get("is_async") else "a function in a worker thread")
    rows += [
        Option(key.replace("_", " ").capitalize(), _plain(value)) for key, value in options.items() if key not in known
    ]
    return rows
