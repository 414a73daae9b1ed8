"""The console's Workflows page, a workflow's page (graph, jobs, cancel, resubmit of its dead jobs) and the job
page's links, read from the mirror; and the graph's layout (collapsed fan-outs, layers)."""

import pytest

from dashboards.workflow_graph import Member, layout
from jobconsole.core import JobSpec
from jobconsole.core.workflows import Step
from jobconsole.models import AuditLog, Workflow
from jobconsole.step_names import base
from tests.app.test_console_pages import OPERATE, VIEW, web
from tests.mirror_fixtures import *  # noqa: F403
from tests.mirror_fixtures import run_worker

pytestmark = [pytest.mark.db, pytest.mark.django_db(transaction=True)]


def _diamond(client, name="nightly export", fail_b=False):
    b = JobSpec(task="examples.echo", params={"step": "b"})
    if fail_b:
        b = JobSpec(task="examples.fail", params={"message": "b"}, max_retries=0)
    return client.enqueue_workflow(
        [
            Step("a", JobSpec(task="examples.echo", params={"step": "a"})),
            Step("b", b, after=["a"]),
            Step("c", JobSpec(task="examples.echo", params={"step": "c"}), after=["a"]),
            Step("d", JobSpec(task="examples.echo", params={"step": "d"}), after=["b", "c"]),
        ],
        name=name,
    )


def _fan_out(client, n=30, name="chunks"):
    steps = [Step(f"chunk.{i}", JobSpec(task="examples.echo", params={"i": i})) for i in range(n)]
    steps.append(Step("merge", JobSpec(task="examples.echo"), after=[s.name for s in steps]))
    return client.enqueue_workflow(steps, name=name)


def test_the_list_filters_and_shows_progress(client, mirror, r):
    done = _diamond(client, "nightly export")
    for _ in range(3):
        run_worker(r, ["examples.echo"])
    waiting = _fan_out(client, name="chunks of the 27th")
    mirror.drain()
    browser = web(*VIEW)
    page = browser.get("/workflows/")
    text = page.content.decode()
    assert page.status_code == 200 and "nightly export" in text and "chunks of the 27th" in text
    assert 'href="/workflows/"' in text and 'aria-current="page">Workflows' in text  # in the sidebar
    assert "4 completed" in text and "30 queued" in text and "1 waiting" in text  # the bars' legends
    only_done = browser.get("/workflows/", {"state": "completed"}).content.decode()
    assert done.workflow_id in only_done and waiting.workflow_id not in only_done
    by_name = browser.get("/workflows/", {"name": "CHUNKS"}).content.decode()
    assert waiting.workflow_id in by_name and done.workflow_id not in by_name
    bad = browser.get("/workflows/", {"state": "exploded"})
    assert bad.status_code == 400 and "exploded" in bad.content.decode()
    partial = browser.get("/workflows/", headers={"HX-Request": "true"})
    assert b"<html" not in partial.content and b"chunks of the 27th" in partial.content
    odd = browser.get("/workflows/", {"cursor": "!!"})
    assert odd.status_code == 200 and "no longer valid" in odd.content.decode()


def test_the_list_pages_by_cursor(client, mirror, settings, monkeypatch):
    monkeypatch.setattr("dashboards.views.workflows.PAGE", 2)
    made = [_diamond(client, f"wf {i}").workflow_id for i in range(5)]
    mirror.drain()
    browser = web(*VIEW)
    seen: list[str] = []
    page = browser.get("/workflows/")
    while True:
        seen += [item["row"].id for item in page.context["workflows"]]
        if not page.context["next_cursor"]:
            break
        page = browser.get("/workflows/", {"cursor": page.context["next_cursor"]})
    assert sorted(seen) == sorted(made) and len(seen) == 5


def test_a_workflow_page_draws_the_graph_and_lists_its_jobs(client, mirror, r):
    made = _fan_out(client, n=30)
    mirror.drain()
    browser = web(*VIEW)
    page = browser.get(f"/workflows/{made.workflow_id}/")
    text = page.content.decode()
    assert page.status_code == 200 and "<svg" in text
    graph = page.context["graph"]
    assert [(n.label, n.count) for n in graph.nodes] == [("chunk", 30), ("merge", 1)]  # collapsed by step
    assert [e.count for e in graph.edges] == [30] and "30 links" in text
    merge = made.job_ids_by_step["merge"]
    assert f'href="/jobs/{merge}/"' in text and 'href="?step=chunk#members"' in text
    assert "Cancel workflow" not in text  # a viewer sees no action
    one_step = browser.get(f"/workflows/{made.workflow_id}/", {"step": "chunk"})
    assert one_step.context["listed"] == 30
    only_waiting = browser.get(f"/workflows/{made.workflow_id}/", {"state": "waiting"})
    assert [item["m"].id for item in only_waiting.context["members"]] == [merge]
    assert browser.get("/workflows/01JZZZZZZZZZZZZZZZZZZZZZZZ/").status_code == 404
    # The job page shows the workflow, the parents and the dependents.
    job_page = browser.get(f"/jobs/{merge}/").content.decode()
    assert f'href="/workflows/{made.workflow_id}/"' in job_page and "Waits for" in job_page
    assert "30 in all" in job_page and made.job_ids_by_step["chunk.0"] in job_page
    first = browser.get(f"/jobs/{made.job_ids_by_step['chunk.0']}/").content.decode()
    assert merge in first and "it started the workflow" in first


def test_cancel_needs_the_operate_permission_and_is_audited(client, mirror, r):
    made = _diamond(client)
    mirror.drain()
    url = f"/workflows/{made.workflow_id}/cancel"
    assert web(*VIEW).post(url).status_code == 403
    assert Workflow.objects.get(id=made.workflow_id).state == "running"
    operator = web(*OPERATE)
    assert "Cancel workflow" in operator.get(f"/workflows/{made.workflow_id}/").content.decode()
    done = operator.post(url, {"reason": "wrong day"})
    assert done.status_code == 302 and done["Location"] == f"/workflows/{made.workflow_id}/"
    record = AuditLog.objects.get(action="workflow_cancel")
    assert record.count == 4 and record.reason == "wrong day" and record.filter == {"workflow": [made.workflow_id]}
    mirror.drain()
    assert Workflow.objects.get(id=made.workflow_id).state == "cancelled"
    assert operator.get(url).status_code == 405


def test_resubmitting_the_dead_jobs_goes_through_the_bulk_preview(client, mirror, r):
    made = _diamond(client, fail_b=True)
    for _ in range(2):
        run_worker(r, ["examples.echo", "examples.fail"])
    mirror.drain()
    operator = web(*OPERATE)
    page = operator.get(f"/workflows/{made.workflow_id}/")
    link = page.context["resubmit_url"]
    assert "Resubmit 1 dead job" in page.content.decode() and f"workflow={made.workflow_id}" in link
    preview = operator.get(link)
    assert preview.status_code == 200 and preview.context["preview"].count == 1
    assert web(*VIEW).get(link).status_code == 403


def test_layout_layers_a_diamond_and_collapses_fan_outs():
    diamond = [Member(s, s, "completed", "t") for s in "abcd"]
    graph = layout(diamond, [("a", "b"), ("a", "c"), ("b", "d"), ("c", "d")])
    at = {n.label: n for n in graph.nodes}
    assert (at["a"].layer, at["b"].layer, at["c"].layer, at["d"].layer) == (0, 1, 1, 2)
    assert at["b"].x == at["c"].x and at["b"].y != at["c"].y and at["a"].tone == "ok"
    members = [Member(f"m{i}", f"map.{i}", "completed" if i % 2 else "dead", "t") for i in range(5000)]
    members += [Member("cb", "callback", "waiting", "t")]
    graph = layout(members, [(f"m{i}", "cb") for i in range(5000)])
    assert len(graph.nodes) == 2 and graph.edges[0].count == 5000 and graph.nodes[0].tone == "bad"
    assert [(s.state, s.count) for s in graph.nodes[0].segments] == [("completed", 2500), ("dead", 2500)]
    assert graph.nodes[1].pending
    chain = [Member(f"c{i}", f"chain.{i}", "queued", "t") for i in range(6)]
    graph = layout(chain, [(f"c{i}", f"c{i + 1}") for i in range(5)])
    assert len(graph.nodes) == 6  # a chain's numbered steps are in different layers: never collapsed
    assert base("chord.header.12") == "chord.header" and base("export") == "export"


def test_a_depends_on_job_shows_its_parent_and_the_parent_its_dependent(client, mirror, r):
    parent = client.enqueue("examples.echo", {"order": 7})
    child = client.enqueue("examples.echo", {"ship": 7}, depends_on=[parent], allow_dependency_failures=True)
    mirror.drain()
    browser = web(*VIEW)
    page = browser.get(f"/jobs/{child.id}/").content.decode()
    assert "Dependencies" in page and f'href="/jobs/{parent.id}/"' in page and "runs even if it fails" in page
    assert f'href="/jobs/{child.id}/"' in browser.get(f"/jobs/{parent.id}/").content.decode()
    plain = client.enqueue("examples.echo", {"alone": True})
    mirror.drain()
    assert 'id="workflow"' not in browser.get(f"/jobs/{plain.id}/").content.decode()
