"""Tasks of the API tests: one that adds (typed parameters, to be refused when wrong), one that always fails."""

from jobconsole.core import task


@task(name="apitest.add", queue="apitest", max_retries=2)
def add(a: int, b: int = 0) -> int:
    return a + b


@task(name="apitest.boom", queue="apitest.dead", max_retries=0)
def boom(message: str = "boom") -> None:
    raise ValueError(message)
