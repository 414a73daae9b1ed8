"""Jobconsole: the Django project, and the Django layer over the queue engine in `jobconsole.core`."""

__version__ = "0.1.0"  # the one place: pyproject.toml reads it (dynamic version), CHANGELOG.md names releases
