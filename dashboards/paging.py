"""Pages of a list kept newest first by (a time, id) keyset: older and newer pages by cursor, never by offset (an
offset reads every row it skips), with the page's place in the list and the list's total.

A cursor is a row's (time, id), encoded; `cursor` asks for the rows older than it, `newer` for those newer. The
place ("51-100 of 1,234") counts the rows newer than the page's first: one index range, as the total is."""

import base64
from dataclasses import dataclass
from datetime import datetime

from django.db.models import Model, Q, QuerySet
from django.http import QueryDict

from jobconsole.moments import to_utc


def encode_cursor(at: datetime, pk: int) -> str:
    return base64.urlsafe_b64encode(f"{at.isoformat()}|{pk}".encode()).decode()


def decode_cursor(cursor: str) -> tuple[datetime, int] | None:
    try:
        at, _, pk = base64.urlsafe_b64decode(cursor.encode()).decode().partition("|")
        return to_utc(datetime.fromisoformat(at)), int(pk)
    except (ValueError, UnicodeDecodeError):
        return None


@dataclass(frozen=True, slots=True)
class KeysetPage[M: Model]:
    rows: list[M]
    older: str | None  # the cursor of the next page down, None on the last
    newer: str | None  # the cursor of the page above, None on the first
    first: int  # the place of the page's first row in the list, from 1 (0 when the page is empty)
    total: int
    bad_cursor: bool = False  # a cursor that could not be read: the first page is shown

    @property
    def last(self) -> int:
        return self.first + len(self.rows) - 1 if self.rows else 0

    @property
    def on_first(self) -> bool:
        return self.first <= 1


def keyset_page[M: Model](
    rows: QuerySet[M], time_field: str, query: QueryDict, size: int, *, total: int | None = None
) -> KeysetPage[M]:
    """The page the query's `cursor` (older than) or `newer` (newer than) names, else the first. `total`: the
    caller's count of `rows` when it has one already."""
    newest_first = rows.order_by(f"-{time_field}", "-pk")
    bad = False
    older_than = newer_than = None
    if raw := query.get("newer"):
        newer_than = decode_cursor(raw)
        bad = newer_than is None
    elif raw := query.get("cursor"):
        older_than = decode_cursor(raw)
        bad = older_than is None
    found: list[M] = []
    if newer_than is not None:
        after = Q(**{f"{time_field}__gt": newer_than[0]}) | Q(**{time_field: newer_than[0], "pk__gt": newer_than[1]})
        found = list(rows.filter(after).order_by(time_field, "pk")[: size + 1])[::-1]
        if len(found) <= size:  # near the top: the first page, full
            newer_than, found = None, []
    if older_than is not None:
        before = Q(**{f"{time_field}__lt": older_than[0]}) | Q(**{time_field: older_than[0], "pk__lt": older_than[1]})
        found = list(newest_first.filter(before)[: size + 1])
    elif newer_than is None:
        found = list(newest_first[: size + 1])
    if newer_than is not None:  # read newest last, one more than a page: the extra one is above the page
        shown, more_below = found[1:], True
    else:
        shown, more_below = found[:size], len(found) > size
    total = rows.count() if total is None else total
    if not shown:  # past the end (what the cursor named was purged meanwhile, say): the pager links the first page
        return KeysetPage([], None, None, 0, total, bad)
    head = shown[0]
    head_at = getattr(head, time_field)
    above = rows.filter(Q(**{f"{time_field}__gt": head_at}) | Q(**{time_field: head_at, "pk__gt": head.pk})).count()
    return KeysetPage(
        rows=shown,
        older=_cursor(time_field, shown[-1]) if more_below else None,
        newer=_cursor(time_field, head) if above else None,
        first=above + 1,
        total=total,
        bad_cursor=bad,
    )


def _cursor(time_field: str, row: Model) -> str:
    return encode_cursor(getattr(row, time_field), row.pk)
