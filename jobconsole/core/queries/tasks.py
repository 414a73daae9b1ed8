"""Tasks: every task a worker announced, with its registered options."""

import json
from typing import Any, cast

from jobconsole.core import keys
from jobconsole.core.queries.base import Reader


class Tasks(Reader):
    def options(self) -> dict[str, dict[str, Any]]:
        """Every task a worker announced, with its registered options."""
        raw = cast(dict[str, str], self.redis.hgetall(keys.TASKS))
        return {name: _json_dict(options) for name, options in sorted(raw.items())}


def _json_dict(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}
