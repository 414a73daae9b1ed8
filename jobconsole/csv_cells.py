"""CSV that a spreadsheet opens without running anything: every CSV the project writes goes through here.

A spreadsheet reads a cell that starts with `=`, `+`, `-` or `@` (and, in some, a tab or carriage return) as a
formula, so an error message or a parameter such as `=HYPERLINK("http://evil","x")` would run when an operator
opens an export. As OWASP advises, such a text cell gets a leading single quote and is otherwise kept as it was;
the csv module quotes cells holding separators, quotes or line breaks. Numbers the project itself produces (an
attempt count) stay numbers; every text cell is neutralised, "-5" included.
"""

import csv
from collections.abc import Iterable, Iterator, Sequence
from datetime import date, datetime
from decimal import Decimal

# OWASP's list, plus their full-width forms, which some spreadsheets read as the ASCII signs.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r", "\uff1d", "\uff0b", "\uff0d", "\uff20")
# Spreadsheets may trim these before deciding that a cell is a formula ("  =1+1").
LEADING_SPACE = " \t\r\n"


def neutralise(text: str) -> str:
    """The text, with a leading ' when a spreadsheet would read it as a formula."""
    if text.lstrip(LEADING_SPACE).startswith(FORMULA_STARTS) or text.startswith(FORMULA_STARTS):
        return "'" + text
    return text


def csv_cell(value: object) -> object:
    """One value as a cell: None empty, our numbers as numbers, times in ISO 8601, any other text neutralised."""
    if value is None:
        return ""
    if isinstance(value, (int, float, Decimal)) and not isinstance(value, bool):
        return value
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    return neutralise(str(value))


class _Echo:
    """A file for csv.writer whose write() hands back the line, so that rows can be streamed one at a time."""

    def write(self, line: str) -> str:
        return line


def csv_lines(header: Sequence[str], rows: Iterable[Sequence[object]]) -> Iterator[str]:
    """The header line, then one line per row, every cell made safe by csv_cell."""
    writer = csv.writer(_Echo())
    yield writer.writerow([neutralise(name) for name in header])
    for row in rows:
        yield writer.writerow([csv_cell(value) for value in row])
