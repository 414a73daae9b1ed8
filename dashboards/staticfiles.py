"""Serve plotly.js from the plotly package as the static file `plotly/plotly.min.js` (never from a CDN).

A finder rather than STATICFILES_DIRS: the package's data folder also holds datasets we do not want to
publish. Add "dashboards.staticfiles.PlotlyFinder" to STATICFILES_FINDERS."""

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import plotly
from django.contrib.staticfiles.finders import BaseFinder
from django.core.files.storage import FileSystemStorage

NAME = "plotly/plotly.min.js"
SOURCE = Path(plotly.__file__).resolve().parent / "package_data"


class PlotlyFinder(BaseFinder):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.storage = FileSystemStorage(location=str(SOURCE))
        self.storage.prefix = "plotly"  # type: ignore[attr-defined]

    def check(self, **kwargs: Any) -> list[Any]:
        return []

    def find(self, path: str, find_all: bool = False, **kwargs: Any) -> Any:  # str, or list[str] with find_all
        if path != NAME:
            return [] if find_all else ""
        found = str(SOURCE / "plotly.min.js")
        return [found] if find_all else found

    def list(self, ignore_patterns: Any) -> Iterator[tuple[str, FileSystemStorage]]:
        yield "plotly.min.js", self.storage
