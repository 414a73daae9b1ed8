"""The project's producer: sends work the way Celery code does and prints what came back, as JSON, for
tests/processes/test_celery_project.py. Celery's documented canvas examples are here unchanged."""

import json
import os
import sys
from typing import Any

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "proj.settings")

import django

django.setup()

from proj.celery import app, debug_task  # noqa: E402
from shop.tasks import add, slow_double, xsum  # noqa: E402

from jobconsole.celery import chain, chord, group  # noqa: E402

TIMEOUT = 30


def main() -> dict[str, Any]:
    out: dict[str, Any] = {}
    out["queues"] = {name: app.tasks[name].queue for name in sorted(app.tasks) if not name.startswith("celery.")}
    out["debug_task"] = debug_task.delay().get(timeout=TIMEOUT)
    out["delay"] = add.delay(2, 3).get(timeout=TIMEOUT)
    out["send_task"] = app.send_task("shop.tasks.add", (4, 5)).get(timeout=TIMEOUT)
    out["routed"] = slow_double.delay(21).get(timeout=TIMEOUT)
    out["group"] = group(add.s(i, i) for i in range(10))().get(timeout=TIMEOUT)
    out["starmap"] = add.starmap([(1, 1), (2, 2)]).delay().get(timeout=TIMEOUT)
    out["chunks"] = add.chunks([(i, i) for i in range(5)], 2)().get(timeout=TIMEOUT)
    if "--workflows" in sys.argv:  # the engine's workflows
        out["chain"] = chain(add.s(2, 2), add.s(4), add.s(8))().get(timeout=TIMEOUT)
        out["chord"] = chord((add.s(i, i) for i in range(10)), xsum.s())().get(timeout=TIMEOUT)
        out["pipe"] = (add.s(1, 1) | add.si(5, 5) | group(add.s(1), add.s(2)) | xsum.s()).delay().get(timeout=TIMEOUT)
    return out


if __name__ == "__main__":
    print(json.dumps(main()))
