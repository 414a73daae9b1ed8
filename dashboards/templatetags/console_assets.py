"""The console's scripts and styles, whatever the adopting project's static files settings.

A page never fails over an asset: with ManifestStaticFilesStorage, a file missing from the manifest (collectstatic
not run since an upgrade) raises ValueError in {% static %}; here the page names the unhashed file instead and
the log says what to run. plotly.js comes from the console's own view (dashboards/views/assets.py)."""

import logging
from urllib.parse import quote, urljoin

from django import template
from django.templatetags.static import PrefixNode, static
from django.urls import reverse
from django.utils.safestring import SafeString
from django_htmx.jinja import htmx_script

from dashboards.views.assets import VERSION

register = template.Library()
logger = logging.getLogger(__name__)


def _unhashed(path: str, error: ValueError) -> str:
    logger.warning("%s; naming the unhashed file (run manage.py collectstatic)", error)
    return urljoin(PrefixNode.handle_simple("STATIC_URL"), quote(path))


@register.simple_tag
def console_static(path: str) -> str:
    try:
        return static(path)
    except ValueError as missing:  # a manifest without this file
        return _unhashed(path, missing)


@register.simple_tag(takes_context=True)
def console_htmx_script(context: template.Context) -> SafeString:
    """django-htmx's {% htmx_script %}, or the same script by its unhashed name."""
    try:
        return htmx_script(nonce=context.get("csp_nonce"))
    except ValueError as missing:
        return SafeString(f'<script src="{_unhashed("django_htmx/htmx-2.min.js", missing)}" defer></script>')


@register.simple_tag
def plotly_src() -> str:
    return reverse("dashboards:plotly", args=[VERSION])
