"""The browser-test set-up works end to end: a person logs in through the admin's login page and lands on the
console, which shows what a real worker did."""

from collections.abc import Callable

from jobconsole.core import JobState
from tests.browser.support import ConsoleUsers, LiveConsole, Proc, Visitor
from tests.live import wait_until


def test_log_in_through_the_admin_page_and_see_the_console(
    visitor: Callable[..., Visitor], console_server: LiveConsole, console_users: ConsoleUsers, worker: Proc
) -> None:
    job_id = console_server.client.enqueue("examples.echo", {"greeting": "hello"}).id
    wait_until(
        lambda: console_server.client.get(job_id).state is JobState.COMPLETED, 20, "the worker to run the job",
        worker.output,
    )  # fmt: skip

    tab = visitor()
    response = tab.visit("/")
    assert tab.page.url.startswith(tab.url("/admin/login/")), "an anonymous visitor is sent to the login page"
    assert response is not None and response.ok

    tab.login("viewer", console_users.password)
    assert tab.page.url == tab.url("/")
    assert "Jobconsole" in tab.page.title()
    assert tab.page.locator("#id_password").count() == 0  # logged in: no login form
    assert "examples.echo" in tab.page.inner_text("body")  # the queue the worker took the job from

    shot = tab.visit("/") and tab.shots.taken[-1]
    assert shot.name.endswith("-overview.png") and shot.stat().st_size > 10_000
    assert [p.name for p in tab.shots.taken] == ["01-admin-login.png", "02-overview.png", "03-overview.png"]
    tab.assert_no_browser_errors()


def test_a_logged_in_tab_is_logged_in_and_posts_with_its_csrf_token(operator: Visitor, viewer: Visitor) -> None:
    assert operator.visit("/").ok and operator.page.url == operator.url("/")
    assert viewer.visit("/").ok and viewer.page.url == viewer.url("/")
    viewer.click("a[href='/queues/']")
    assert viewer.page.url == viewer.url("/queues/")

    operator.visit("/admin/")  # a page with a form (logout), which sets the CSRF cookie
    response = operator.post("/admin/logout/", {})
    assert response.status == 200, response.text()[:2000]  # a CSRF failure would be a 403
    operator.visit("/")
    assert operator.page.url.startswith(operator.url("/admin/login/"))  # that session is over
    assert viewer.visit("/").ok and viewer.page.url == viewer.url("/")  # the other one is not
    operator.assert_no_browser_errors()
