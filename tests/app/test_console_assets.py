"""The console in a project that lists no finder, middleware or context processor of ours: plotly.js from the
console's own URL (a year of caching, gzip), every chart page rendering with ManifestStaticFilesStorage and no
manifest entry (DEBUG off), and times in the operator's zone."""

import gzip
import re
from typing import Any

import plotly
import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client as WebClient

from tests.mirror_fixtures import *  # noqa: F403

pytestmark = [pytest.mark.db, pytest.mark.django_db(transaction=True)]

CHART_PAGES = ["/", "/scheduled/", "/tasks/examples.echo/"]


def operator() -> WebClient:
    user = User.objects.create_user("operator", password="pw", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(content_type__app_label="jobconsole"))
    browser = WebClient()
    browser.force_login(user)
    return browser


def test_plotly_is_served_by_the_console_with_no_finder_and_cached_a_year(engine_settings: Any) -> None:
    assert not any("Plotly" in finder for finder in getattr(engine_settings, "STATICFILES_FINDERS", []))
    browser = operator()
    page = browser.get("/").content.decode()
    [src] = re.findall(r'<script src="([^"]*plotly[^"]*)"', page)
    assert src == f"/assets/plotly-{plotly.__version__}.min.js"

    zipped = browser.get(src, headers={"Accept-Encoding": "gzip, br"})
    assert zipped.status_code == 200 and zipped["Content-Encoding"] == "gzip"
    assert zipped["Cache-Control"] == "public, max-age=31536000, immutable" and "Accept-Encoding" in zipped["Vary"]
    script = gzip.decompress(zipped.content)
    assert len(zipped.content) < len(script) / 2 and script.startswith(b"/**") and b"plotly.js v" in script[:200]
    plain = browser.get(src)
    assert plain.status_code == 200 and "Content-Encoding" not in plain and plain.content == script
    assert browser.get(src, headers={"If-None-Match": plain["ETag"]}).status_code == 304
    assert browser.get("/assets/plotly-0.0.1.min.js").status_code == 404  # an old page's version: not this file


def test_chart_pages_render_with_the_manifest_storage_and_no_manifest(engine_settings: Any, client: Any) -> None:
    client.enqueue("examples.echo", {"x": 1}, delay=600)
    engine_settings.DEBUG = False
    engine_settings.STORAGES = {
        **engine_settings.STORAGES,
        "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.ManifestStaticFilesStorage"},
    }
    browser = operator()
    for url in CHART_PAGES:
        page = browser.get(url, secure=True)
        assert page.status_code == 200, url
        text = page.content.decode()
        assert 'href="/static/dashboards/console.css"' in text and "/static/django_htmx/htmx-2.min.js" in text, url


def test_times_follow_the_cookie_without_the_middleware(engine_settings: Any, client: Any) -> None:
    assert not any("Timezone" in m for m in engine_settings.MIDDLEWARE)
    client.enqueue("examples.echo", {"x": 1}, delay=600)
    browser = operator()
    browser.cookies["jc_tz"] = "Asia/Tokyo"
    assert "JST" in browser.get("/scheduled/").content.decode()
    browser.cookies["jc_tz"] = "America/New_York"
    assert re.search(r"\bE[SD]T\b", browser.get("/scheduled/").content.decode())
