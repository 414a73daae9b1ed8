"""Tasks of the API tests: one that adds (typed parameters, to be refused when wrong), one that always fails, one
that sums its parents' results."""

from jobconsole.core import task


@task(name="apitest.add", queue="apitest", max_retries=2)
def add(a: int, b: int = 0) -> int:
    return a + b


@task(name="apitest.boom", queue="apitest.dead", max_retries=0)
def boom(message: str = "boom") -> None:
    raise ValueError(message)


@task(name="apitest.total", queue="apitest")
def total(results: dict[str, int | None] | None = None, extra: int = 0) -> int:
    """The sum of its parents' results (a workflow's fan-in)."""
    return sum(v or 0 for v in (results or {}).values()) + extra
