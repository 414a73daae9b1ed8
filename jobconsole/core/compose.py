"""Chains, groups, chords and batches: thin builders over workflows (core/workflows.py).

Each returns a `Flow`: the steps of a workflow and the steps a following one waits for (its tails). Flows nest:
an item of a chain or a group is a `JobSpec` or another `Flow`; `Client.enqueue_workflow(flow)` creates the
whole in one atomic call. Step names are made from the builder's `name` and each item's position
("chain.0", "chain.1.group.2"), so a workflow's console page can group them.

Celery's canvas maps onto them: `chain(a.s(), b.s())` is `chain(a, b)` (each step gets the previous result first in
its args, `pass_results=ARGS`; after a group, the list of its results, `ARGS_LIST`); `.si()` is `job(spec,
immutable=True)`; `group(...)` is `group(...)`; `chord(header, body)` is `chord(header, body)`. Sidekiq's batch
callbacks: `batch(members, on_complete=..., on_success=..., on_death=...)`.
"""

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from jobconsole.core.workflows import ARGS, ARGS_LIST, CANCEL, FIRST_FAILURE, RUN, InvalidWorkflow, Step

if TYPE_CHECKING:
    from jobconsole.core.client import JobSpec


@dataclass(frozen=True)
class Flow:
    """Steps of a workflow, with `tails`: the steps whose ends a following step waits for. `immutable`: head
    steps that take no result from what they follow (Celery's `.si()`)."""

    steps: tuple[Step, ...]
    tails: tuple[str, ...]
    kind: str = "job"  # "job", "chain", "group", "chord" or "batch": a group's results follow as a list
    immutable: frozenset[str] = field(default_factory=frozenset)

    def __iter__(self) -> Iterator[Step]:
        return iter(self.steps)

    @property
    def heads(self) -> list[str]:
        return [s.name for s in self.steps if not s.parents()]


type Item = "JobSpec | Flow"


def job(spec: "JobSpec", name: str = "job", *, immutable: bool = False) -> Flow:
    """One job as a flow. `immutable`: it takes no result from what it follows in a chain (Celery's `.si()`)."""
    return Flow((Step(name, spec),), (name,), "job", frozenset({name}) if immutable else frozenset())


def _flow(item: Item, name: str) -> Flow:
    """An item as a flow whose step names start with `name`."""
    if isinstance(item, Flow):
        if item.kind == "job" and len(item.steps) == 1:  # job(...): the position names it
            rename = {item.steps[0].name: name}
        else:
            rename = {s.name: f"{name}.{s.name}" for s in item.steps}
        steps = tuple(
            replace(s, name=rename[s.name], after={rename[p]: policy for p, policy in s.parents().items()})
            for s in item.steps
        )
        return Flow(
            steps, tuple(rename[t] for t in item.tails), item.kind, frozenset(rename[h] for h in item.immutable)
        )
    return job(item, name)


def _after(flow: Flow, tails: tuple[str, ...], pass_results: str | None, policy: str) -> Flow:
    """`flow` with its head steps waiting for `tails`, given their results unless immutable."""
    heads = set(flow.heads)
    steps = tuple(
        replace(
            s,
            after=dict.fromkeys(tails, policy),
            pass_results=None if s.name in flow.immutable else pass_results,
        )
        if s.name in heads
        else s
        for s in flow.steps
    )
    return replace(flow, steps=steps, immutable=frozenset())


def _results_mode(previous: Flow, pass_results: str | None) -> str | None:
    """What a step following `previous` gets: its one result, or the list of a group's results (Celery's)."""
    if pass_results == ARGS and (len(previous.tails) > 1 or previous.kind in ("group", "chord", "batch")):
        return ARGS_LIST
    return pass_results


def chain(*items: Item, name: str = "chain", pass_results: str | None = ARGS, policy: str = CANCEL) -> Flow:
    """Each item after the one before, given its result (`pass_results`: ARGS, a parameter name, or None). An item
    that does not complete cancels the rest (`policy="run"`: they run anyway)."""
    if not items:
        raise InvalidWorkflow(f"{name}: a chain needs at least one item")
    steps: list[Step] = []
    previous: Flow | None = None
    for i, item in enumerate(items):
        flow = _flow(item, f"{name}.{i}")
        if previous is not None:
            flow = _after(flow, previous.tails, _results_mode(previous, pass_results), policy)
        steps.extend(flow.steps)
        previous = flow
    assert previous is not None
    first = _flow(items[0], f"{name}.0")
    return Flow(tuple(steps), previous.tails, previous.kind if len(items) == 1 else "chain", first.immutable)


def group(*items: Item | Iterable[Item], name: str = "group") -> Flow:
    """Every item in parallel; what follows waits for all of them (and gets a list of their results)."""
    flat: list[Item] = []
    for item in items:  # group(a, b) or group([a, b]) or group(x for x in ...)
        if isinstance(item, (Flow,)) or not isinstance(item, Iterable) or isinstance(item, (str, bytes, Mapping)):
            flat.append(item)  # type: ignore[arg-type]
        else:
            flat.extend(item)
    if not flat:
        raise InvalidWorkflow(f"{name}: a group needs at least one item")
    flows = [_flow(item, f"{name}.{i}") for i, item in enumerate(flat)]
    return Flow(
        tuple(s for f in flows for s in f.steps),
        tuple(t for f in flows for t in f.tails),
        "group",
        frozenset(h for f in flows for h in f.immutable),
    )


def chord(
    header: Iterable[Item], body: Item, *, name: str = "chord", pass_results: str | None = ARGS_LIST,
    policy: str = CANCEL,
) -> Flow:  # fmt: skip
    """`body` once every item of `header` ended, given the list of their results in order (Celery's chord); an item
    that does not complete cancels the body (`policy="run"`: it runs anyway, with null for it)."""
    members = group(list(header), name=f"{name}.header")
    callback = _after(_flow(body, f"{name}.body"), members.tails, pass_results, policy)
    return Flow(members.steps + callback.steps, callback.tails, "chord", members.immutable)


def batch(
    members: Iterable[Item],
    *,
    name: str = "batch",
    on_complete: "JobSpec | None" = None,
    on_success: "JobSpec | None" = None,
    on_death: "JobSpec | None" = None,
    pass_results: str | None = None,
) -> Flow:
    """Sidekiq's batch: callbacks once every member ran (`on_complete`, whatever each outcome), once every member
    completed (`on_success`; cancelled if one does not), and as soon as one member does not complete (`on_death`;
    cancelled if all complete). `pass_results`: a parameter of the callbacks that gets {step: result}."""
    body = group(list(members), name=f"{name}.jobs")
    steps = list(body.steps)
    for key, spec, policy, when in (
        ("complete", on_complete, RUN, None),
        ("success", on_success, CANCEL, None),
        ("death", on_death, RUN, FIRST_FAILURE),
    ):
        if spec is not None:
            step = Step(f"{name}.{key}", spec, after=dict.fromkeys(body.tails, policy), pass_results=pass_results)
            steps.append(replace(step, when=when) if when else step)
    return Flow(tuple(steps), body.tails, "batch", body.immutable)
