"""Bulk operations as tracked server-side jobs: a resubmit or purge of 100,000 dead letters never runs inside an
HTTP request.

    selection.py   what the operator picked (explicit ids, or a filter over the DeadLetter / Job mirror tables)
    kinds.py       the five operations: what each acts on, its engine action and its permission
    operations.py  preview (count and sample, nothing changed), confirm (freeze the ids, record, enqueue), cancel
    runner.py      the system task's work: the frozen chunks in order, each once (docs/architecture.md)
    progress.py    done, refused, failed, total, rate, time left and status, for the console
"""
