"""plotly.js for the console's charts, served by the console itself from the bundle vendored in dashboards/vendor/.

The bundle is plotly.js's own *basic* distribution (scatter, bar and pie: the only trace types dashboards/charts.py
draws), 1.2 MB where the full one is 4.8 MB, fetched at a pinned version and sha256 by scripts/vendor_plotly.sh.
Why a view and not a static file: Django finds static files only through STATICFILES_FINDERS and collectstatic,
project settings and steps; a view needs no setting, no collectstatic and no manifest entry, so a page that names it
can never fail on a missing one. Its URL carries the bundle's version, so browsers keep it a year (a new bundle is a
new URL). Compressed once per process, as a static server would (1.2 MB, about 0.4 MB with gzip)."""

import gzip
import hashlib
import re
from functools import cache
from pathlib import Path

from django.http import Http404, HttpRequest, HttpResponse, HttpResponseNotModified
from django.utils.cache import patch_vary_headers
from django.views.decorators.http import require_safe

SOURCE = Path(__file__).resolve().parent.parent / "vendor" / "plotly-basic.min.js"
YEAR_S = 365 * 24 * 3600


def _banner_version(path: Path) -> str:
    """The version the bundle's banner names ("plotly.js (basic - minified) v4.1.1"): written in one place."""
    with path.open("rb") as script:
        found = re.search(rb"plotly\.js \(basic - minified\) v(\d+\.\d+\.\d+)", script.read(200))
    if found is None:
        raise RuntimeError(f"{path} names no plotly.js basic version in its banner (scripts/vendor_plotly.sh)")
    return found.group(1).decode()


VERSION = _banner_version(SOURCE)


@cache
def _bodies() -> tuple[bytes, bytes, str]:
    """The script, its gzip and their ETag."""
    raw = SOURCE.read_bytes()
    return raw, gzip.compress(raw, compresslevel=9, mtime=0), f'"{hashlib.sha256(raw).hexdigest()[:32]}"'


@require_safe
def plotly_js(request: HttpRequest, version: str) -> HttpResponse:
    if version != VERSION:
        raise Http404(f"plotly.js basic {version} is not this console's (it serves {VERSION})")
    raw, gzipped, etag = _bodies()
    response: HttpResponse
    if request.headers.get("If-None-Match") == etag:
        response = HttpResponseNotModified()
    elif "gzip" in request.headers.get("Accept-Encoding", ""):
        response = HttpResponse(gzipped, content_type="text/javascript; charset=utf-8")
        response["Content-Encoding"] = "gzip"
    else:
        response = HttpResponse(raw, content_type="text/javascript; charset=utf-8")
    response["ETag"] = etag
    response["Cache-Control"] = f"public, max-age={YEAR_S}, immutable"
    patch_vary_headers(response, ["Accept-Encoding"])
    return response
