"""The console in a project that lists no finder, middleware or context processor of ours: plotly.js (the vendored
basic bundle) from the console's own URL (a year of caching, gzip), every chart page rendering with
ManifestStaticFilesStorage and no manifest entry (DEBUG off), times in the operator's zone, and live parts polling
fragments without django-htmx's middleware. And this repository's `make run` (DEBUG on): the console's scripts and
styles by hashed names, gzipped and immutable, as in production."""

import gzip
import hashlib
import re
import tomllib
from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from django.core.management import call_command
from django.test import Client as WebClient

from dashboards.views.assets import SOURCE
from dashboards.views.assets import VERSION as PLOTLY_VERSION
from tests.conftest import PROJECT
from tests.mirror_fixtures import *  # noqa: F403

pytestmark = [pytest.mark.db, pytest.mark.django_db(transaction=True)]

CHART_PAGES = ["/", "/scheduled/", "/tasks/examples.echo/"]
CONSOLE_FILES = re.compile(r'(?:src|href)="(/static/(?:dashboards|django_htmx)/[^"]+)"')
HASHED = re.compile(r"\.[0-9a-f]{12}\.(?:css|js)$")
VENDOR_SCRIPT = PROJECT / "scripts" / "vendor_plotly.sh"


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
    assert src == f"/assets/plotly-basic-{PLOTLY_VERSION}.min.js"

    zipped = browser.get(src, headers={"Accept-Encoding": "gzip, br"})
    assert zipped.status_code == 200 and zipped["Content-Encoding"] == "gzip"
    assert zipped["Cache-Control"] == "public, max-age=31536000, immutable" and "Accept-Encoding" in zipped["Vary"]
    script = gzip.decompress(zipped.content)
    assert len(zipped.content) < len(script) / 2 and len(script) < 2_000_000  # the basic bundle, not the 4.8 MB one
    assert script.startswith(b"/**") and f"plotly.js (basic - minified) v{PLOTLY_VERSION}".encode() in script[:200]
    plain = browser.get(src)
    assert plain.status_code == 200 and "Content-Encoding" not in plain and plain.content == script
    assert browser.get(src, headers={"If-None-Match": plain["ETag"]}).status_code == 304
    assert browser.get("/assets/plotly-basic-0.0.1.min.js").status_code == 404  # an old page's version: not this file


def test_the_vendored_bundle_is_the_pinned_one_with_its_license() -> None:
    """dashboards/vendor/ holds what scripts/vendor_plotly.sh fetches: the pinned version, byte for byte (a hand
    edit or a half-done upgrade fails here), and plotly.js's MIT license beside it, both shipped in the wheel."""
    pins = dict(re.findall(r"^(VERSION|PINNED_SHA256)=([0-9a-f.]+)$", VENDOR_SCRIPT.read_text(), re.M))
    assert pins["VERSION"] == PLOTLY_VERSION
    assert hashlib.sha256(SOURCE.read_bytes()).hexdigest() == pins["PINNED_SHA256"]
    license_text = (SOURCE.parent / "plotly.js-LICENSE.txt").read_text()
    assert license_text.startswith("MIT License") and "Plotly" in license_text
    package_data = tomllib.loads((PROJECT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["*"]
    assert {"*.js", "*.txt"} <= set(package_data)


def test_chart_pages_render_with_the_manifest_storage_and_no_manifest(
    engine_settings: Any, client: Any, tmp_path: Any
) -> None:
    client.enqueue("examples.echo", {"x": 1}, delay=600)
    engine_settings.DEBUG = False
    engine_settings.STATIC_ROOT = tmp_path  # no manifest (var/static has one once `make run` ran in this checkout)
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


def test_live_parts_poll_fragments_without_django_htmx_middleware(engine_settings: Any, client: Any) -> None:
    """The README lists no middleware, so `request.htmx` is missing in an adopting project: a live part's poll
    answered the whole page, which htmx put inside the page (a second sidebar, the overview's charts twice)."""
    engine_settings.MIDDLEWARE = [m for m in engine_settings.MIDDLEWARE if "htmx" not in m]
    client.enqueue("examples.echo", {"x": 1})
    browser = operator()
    poll = {"HX-Request": "true"}
    for url in ("/?part=live", "/?range=hour", "/queues/", "/running/", "/scheduled/", "/workers/"):
        fragment = browser.get(url, headers=poll).content.decode()
        assert "<html" not in fragment and 'class="sidebar"' not in fragment and 'hx-trigger="every' in fragment, url
    charts = browser.get("/?range=hour", headers=poll).content.decode()
    assert charts.count('class="chart') == 4 and 'id="overview-live"' not in charts
    assert "<html" in browser.get("/?range=hour").content.decode()  # no header: the page


def test_make_run_serves_the_console_files_hashed_gzipped_and_immutable(engine_settings: Any, tmp_path: Any) -> None:
    """`make run` runs with DEBUG on and collectstatic at start; its pages named console.css unhashed, and WhiteNoise
    served it uncompressed with max-age=0 (every page load asked again for each file)."""
    from project.settings import STORAGES as PROJECT_STORAGES

    engine_settings.DEBUG = True
    engine_settings.STATIC_ROOT = tmp_path
    engine_settings.STORAGES = PROJECT_STORAGES
    browser = operator()
    names = CONSOLE_FILES.findall(browser.get("/").content.decode())
    assert len(names) == 4 and not any(HASHED.search(n) for n in names), names  # nothing collected: plain names

    call_command("collectstatic", "--noinput", verbosity=0)
    browser = WebClient()  # a new handler: WhiteNoise reads STATIC_ROOT when its middleware starts
    browser.force_login(User.objects.get(username="operator"))
    names = CONSOLE_FILES.findall(browser.get("/").content.decode())
    assert len(names) == 4 and all(HASHED.search(n) for n in names), names
    for name in names:
        response = browser.get(name, headers={"Accept-Encoding": "gzip"})
        assert response.status_code == 200 and response["Content-Encoding"] == "gzip", name
        cache = response["Cache-Control"]
        assert "immutable" in cache and int(re.findall(r"max-age=(\d+)", cache)[0]) >= 365 * 24 * 3600, cache
