"""plotly.js for the console's charts, served by the console itself from the installed plotly package.

Why a view and not a static file: Django finds static files only through STATICFILES_FINDERS, a project setting,
and the plotly package keeps plotly.min.js outside any app's static/ folder (beside datasets we do not publish).
A view needs no setting, no collectstatic and no manifest entry, so a page that names it can never fail on a
missing one; and its URL carries plotly's version, so browsers keep it a year (a new plotly is a new URL).
Compressed once per process, as a static server would (4.8 MB, about 1.4 MB with gzip)."""

import gzip
import hashlib
from functools import cache
from pathlib import Path

import plotly
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseNotModified
from django.utils.cache import patch_vary_headers
from django.views.decorators.http import require_safe

VERSION = plotly.__version__
SOURCE = Path(plotly.__file__).resolve().parent / "package_data" / "plotly.min.js"
YEAR_S = 365 * 24 * 3600


@cache
def _bodies() -> tuple[bytes, bytes, str]:
    """The script, its gzip and their ETag."""
    raw = SOURCE.read_bytes()
    return raw, gzip.compress(raw, compresslevel=6, mtime=0), f'"{hashlib.sha256(raw).hexdigest()[:32]}"'


@require_safe
def plotly_js(request: HttpRequest, version: str) -> HttpResponse:
    if version != VERSION:
        raise Http404(f"plotly.js {version} is not installed (this console serves {VERSION})")
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
