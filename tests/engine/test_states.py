"""The table of job states (core/states.py): what is derived from it, what Lua sees of it, and how the scripts
treat a waiting state of its own set (a job waiting for other jobs), whatever states the table holds."""

from datetime import UTC, datetime, timedelta

import pytest
import redis

from jobconsole.core import Client, JobState, JobStateConflict
from jobconsole.core.editing import edit_job
from jobconsole.core.keys import queue_keys
from jobconsole.core.scripts import PRELUDE
from jobconsole.core.states import (
    CANCELLABLE_STATES,
    LUA_TABLES,
    SET_NAMES,
    STATE_OF_SET,
    STATES,
    TERMINAL_STATES,
    WAITING_STATES,
)
from tests.helpers import claim
from tests.queue_fixtures import *  # noqa: F403  (the client and registry fixtures)

# Waiting states in a set of their own, which no claim reads (WAITING: a job waiting for other jobs).
HELD_APART = [s for s in JobState if s in WAITING_STATES and STATES[s].zset not in ("ready", "scheduled")]


def test_every_state_has_one_row_and_the_lists_follow_it() -> None:
    assert set(STATES) == set(JobState)
    assert TERMINAL_STATES.isdisjoint(WAITING_STATES)
    assert set(JobState) - TERMINAL_STATES == CANCELLABLE_STATES
    assert all(STATES[s].zset == s.value for s in TERMINAL_STATES)  # trim.lua forgets a terminal set by age
    assert sorted(STATES[s].place for s in JobState) == list(range(len(JobState)))  # one tab each
    assert set(STATE_OF_SET) == set(SET_NAMES) == set(queue_keys("q").sets)


def test_lua_reads_the_state_names_and_each_states_set_from_the_table(r: "redis.Redis") -> None:
    names = ", ".join(s.name for s in JobState)
    assert r.eval(f"{PRELUDE}return {{{names}}}", 0) == [s.value for s in JobState]
    k = queue_keys("q")
    keys = ["jc:{q:q}:unique", *k.sets.values()]  # as a script with `sets` last in its KEYS gets them
    states = [s.value for s in JobState]
    found = r.eval(
        f"{PRELUDE}local function unready() end\n{LUA_TABLES}"
        "local out = {} for i = 1, #ARGV do out[i] = state_key(ARGV[i]) end return out",
        len(keys), *keys, *states,
    )  # fmt: skip
    assert found == [k.state_set(s) for s in JobState]


def _hold_apart(r: "redis.Redis", client: Client, state: JobState) -> str:
    """A job put in `state` as the engine that owns it would: out of the ready set, into its own."""
    job_id = client.enqueue("t.ok").id
    client.materialize("q")  # a fast enqueue's intake entry made into the job's hash
    k = queue_keys("q")
    r.zrem(k.ready, job_id)
    r.zadd(k.state_set(state), {job_id: 1})
    r.hset(k.job(job_id), "state", state.value)
    return job_id


@pytest.mark.parametrize("state", HELD_APART)
def test_a_job_held_apart_is_never_claimed_and_shows_in_its_own_set(
    r: "redis.Redis", client: Client, state: JobState
) -> None:
    job_id = _hold_apart(r, client, state)
    assert claim(r, "q") == []
    assert [j.id for j in client.queries.jobs.page("q", state).jobs] == [job_id]
    assert client.counts("q").by_state()[STATE_OF_SET[STATES[state].zset]] == 1 and client.counts("q").queued == 0


@pytest.mark.parametrize("state", HELD_APART)
def test_a_job_held_apart_is_cancelled_edited_or_deleted_but_not_run_now(
    r: "redis.Redis", client: Client, state: JobState
) -> None:
    job_id = _hold_apart(r, client, state)
    with pytest.raises(JobStateConflict):
        client.requeue(job_id)  # "run now" would start it before the jobs it waits for
    later = datetime.now(UTC) + timedelta(hours=1)
    edited = edit_job(client, job_id, expected_state=state, priority=5, run_at=later, params={"x": 3})
    job = client.get(job_id)
    assert edited.state is state and job.state is state and job.priority == 5 and job.params == {"x": 3}
    assert r.zscore(queue_keys("q").state_set(state), job_id) is not None  # it keeps waiting where it was
    assert client.cancel(job_id) == "cancelled"
    assert client.get(job_id).state is JobState.CANCELLED
    assert r.zscore(queue_keys("q").state_set(state), job_id) is None
    other = _hold_apart(r, client, state)
    client.delete(other)
    assert r.zcard(queue_keys("q").state_set(state)) == 0
