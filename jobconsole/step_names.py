"""A workflow's step names as people read them: the members of a fan-out (`export.0` ... `export.499`,
`chord.header.9`) share a name without their trailing number, which the console's graph and the API's summary
collapse them under."""

import re
from functools import lru_cache

_NUMBERED = re.compile(r"^(.*?)[._\-\[]?(\d+)\]?$")
_SEPARATORS = "._-["


@lru_cache(maxsize=65536)
def base(step: str) -> str:
    """The step's name without its trailing number: the name its siblings in a fan-out share."""
    m = _NUMBERED.match(step)
    return m.group(1) if m and m.group(1) else step


def natural(text: str) -> list[object]:
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", text)]


def siblings_regex(name: str) -> str:
    """A regular expression (as SQLite's and PostgreSQL's REGEXP read it) matching the step names whose `base` is
    `name`, other than `name` itself. `name` is a step name (letters, digits, '_', '.', '-'), so escaping its '.'
    and '-' is all it needs. After a trailing digit or separator only a separator can start the number (`x12` is
    `x`'s, not `x1`'s; `a.1` is `a`'s, not `a.`'s)."""
    escaped = name.replace(".", "\\.").replace("-", "\\-")
    separator = "[._\\-\\[]" if name[-1:].isdigit() or name[-1:] in _SEPARATORS else "[._\\-\\[]?"
    return f"^{escaped}{separator}[0-9]+\\]?$"
