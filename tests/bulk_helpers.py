"""A `manage.py runworker` whose bulk-operation runner pauses after each chunk's Redis step and can die right
there, for the process tests of bulk operations (jobconsole/bulk/runner.py).

    python -c RUNWORKER_EXITING <exit at chunk index or -1> <seconds to pause after each chunk's Redis step> ARGS
"""

import os
import sys
import time

RUNWORKER_EXITING = [
    "-c",
    "import django; django.setup(); from tests.bulk_helpers import runworker_exiting; runworker_exiting()",
]


def runworker_exiting() -> None:
    from django.core.management import call_command

    import jobconsole.bulk.runner as runner

    exit_at, pause = int(sys.argv[1]), float(sys.argv[2])

    def hook(chunk: object) -> None:
        if getattr(chunk, "index", None) == exit_at:
            os._exit(137)  # as SIGKILL would: Redis changed, the database not
        time.sleep(pause)

    runner.after_redis_step = hook
    call_command("runworker", *sys.argv[3:])
