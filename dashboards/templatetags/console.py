"""Template tags of the console: ages, durations, numbers, state badges and charts.

Every time is shown as a relative age ("3 min ago") with the exact time in the operator's time zone on hover
(title) and as ISO in `datetime`, which console.js uses to keep the ages current without asking the server."""

import json
import re
from datetime import datetime, timedelta
from typing import Any, cast

from django import template
from django.utils import timezone
from django.utils.html import escape, format_html, json_script
from django.utils.safestring import SafeString

from jobconsole.core.states import STATES, JobState

register = template.Library()


def relative(seconds: float) -> str:
    """'just now', '42 s', '3 min', '2 h 5 min', '4 d' (no suffix)."""
    s = abs(seconds)
    if s < 1:
        return "just now"
    if s < 60:
        return f"{int(s)} s"
    if s < 3600:
        return f"{int(s // 60)} min"
    if s < 86_400:
        hours, minutes = divmod(int(s // 60), 60)
        return f"{hours} h {minutes} min" if minutes and hours < 10 else f"{hours} h"
    return f"{int(s // 86_400)} d"


def exact(moment: datetime) -> str:
    local = timezone.localtime(moment)
    return f"{local:%Y-%m-%d %H:%M:%S} {local.tzname()}"


@register.simple_tag
def age(moment: datetime | None, empty: str = "—") -> SafeString:
    """<time> with '3 min ago' (or 'in 5 min' for the future) and the exact local time on hover."""
    if moment is None:
        return format_html('<span class="muted">{}</span>', empty)
    seconds = (timezone.now() - moment).total_seconds()
    text = (
        "just now" if abs(seconds) < 1 else (f"in {relative(seconds)}" if seconds < 0 else f"{relative(seconds)} ago")
    )
    return format_html('<time datetime="{}" title="{}" data-age>{}</time>', moment.isoformat(), exact(moment), text)


@register.simple_tag
def at(moment: datetime | None) -> SafeString:
    """The exact local time, with the relative age on hover."""
    if moment is None:
        return format_html('<span class="muted">—</span>')
    return format_html('<time datetime="{}">{}</time>', moment.isoformat(), exact(moment))


@register.filter
def breakable(name: object) -> SafeString:
    """A dotted name (a task) that may wrap after a dot in a narrow column, where it would otherwise hold the
    whole table wider than the page (escaped first: <wbr> is the only markup)."""
    return SafeString(re.sub(r"\.", ".<wbr>", str(escape(name))))


@register.filter
def duration(value: float | timedelta | None) -> str:
    """Seconds (or a timedelta) as '850 ms', '1.2 s', '3 min 4 s', '2 h 5 min'."""
    if value is None or value == "":
        return "—"
    seconds = value.total_seconds() if isinstance(value, timedelta) else float(value)
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 10:
        return f"{seconds:.1f} s"
    if seconds < 60:
        return f"{seconds:.0f} s"
    if seconds < 3600:
        minutes, rest = divmod(int(seconds), 60)
        return f"{minutes} min {rest} s" if rest else f"{minutes} min"
    return relative(seconds)


@register.filter
def words(name: object) -> str:
    """A code name as words: "bulk_resubmit" reads "bulk resubmit"."""
    return str(name).replace("_", " ")


@register.filter
def count(value: int | float | None) -> str:
    """Thousands separated: 1,234,567."""
    if value is None:
        return "—"
    return f"{value:,.0f}" if isinstance(value, float) else f"{value:,}"


@register.simple_tag
def state(name: str) -> SafeString:
    """A job state as a badge: colour, sign and text (never colour alone), as the state table says."""
    info = STATES.get(cast(JobState, name))  # JobState is a StrEnum: its members hash as their names
    if info is None:  # a state written by other hands
        return format_html('<span class="badge state-{}">{}</span>', name, name)
    return format_html(
        '<span class="badge {} state-{}"{}{}>{}</span>', info.tone, name,
        format_html(' data-mark="{}"', info.mark) if info.mark else "",
        format_html(' title="{}"', info.label) if info.label != name else "", name,
    )  # fmt: skip


@register.simple_tag
def chart(figure: dict[str, Any] | None, element_id: str, title: str = "") -> SafeString:
    """A plotly figure: a <div> console.js draws into and its data as JSON (no inline script, for the CSP).
    Without JavaScript the div shows its title and says the chart needs scripts."""
    if not figure:
        return format_html(
            '<div class="chart empty" id="{}"><p class="muted">No data in this range.</p></div>', element_id
        )
    data_id = f"{element_id}-data"
    return format_html(
        '<div class="chart" id="{}" data-figure="{}" role="img" aria-label="{}">'
        '<noscript><p class="muted">Charts need JavaScript.</p></noscript></div>{}',
        element_id, data_id, title or element_id, json_script(figure, data_id),
    )  # fmt: skip


@register.filter
def pretty_json(text: str | None) -> str:
    """Stored JSON text indented for reading; text that is not JSON comes back as it is."""
    if not text:
        return ""
    try:
        return json.dumps(json.loads(text), indent=2, ensure_ascii=False, sort_keys=True)
    except (TypeError, ValueError):
        return str(text)


@register.simple_tag(takes_context=True)
def query(context: template.Context, **changes: Any) -> str:
    """The current query string with `changes` applied (None or '' removes a key): links that keep filters."""
    params = context["request"].GET.copy()
    for key, value in changes.items():
        if value is None or value == "":
            params.pop(key, None)
        else:
            params[key] = value
    encoded = params.urlencode()
    return f"?{encoded}" if encoded else "?"


@register.filter
def quantile(values: dict[float, float | None] | None, q: str) -> float | None:
    """`{{ summary.runtime|quantile:"0.95" }}`: a percentile from a dict keyed by the quantile as a float (the
    template language cannot look up a key like 0.95 with its dot syntax)."""
    if not values:
        return None
    try:
        return values.get(float(q))
    except ValueError:
        return None
