"""pyproject.toml against the code: the package's runtime dependencies are exactly the distributions its three
apps import (the optional ones behind extras), the version is written once, and each package is typed."""

import ast
import importlib.metadata
import re
import sys
import tomllib

import jobconsole
from tests.conftest import PROJECT

PACKAGES = ("jobconsole", "dashboards", "jobconsole_api")
# Imported only when a deployment asks for it (OTEL_* variables): behind an extra, not a dependency.
OPTIONAL = {"opentelemetry": "otel"}


def pyproject() -> dict:  # type: ignore[type-arg]
    return tomllib.loads((PROJECT / "pyproject.toml").read_text())


def distribution(requirement: str) -> str:
    """'redis[hiredis]>=8.1,<9' -> 'redis' (normalised as pip compares names)."""
    name = re.match(r"[A-Za-z0-9._-]+", requirement)
    assert name, requirement
    return re.sub(r"[-_.]+", "-", name.group(0)).lower()


def imported_top_level_modules() -> set[str]:
    found: set[str] = set()
    for package in PACKAGES:
        for path in (PROJECT / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.Import):
                    found |= {alias.name.split(".")[0] for alias in node.names}
                elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                    found.add(node.module.split(".")[0])
    return found - set(sys.stdlib_module_names) - set(PACKAGES) - {"__future__"}


def test_runtime_dependencies_are_exactly_what_the_apps_import() -> None:
    project = pyproject()["project"]
    declared = {distribution(r) for r in project["dependencies"]}
    owners = importlib.metadata.packages_distributions()
    imported = imported_top_level_modules()
    needed = {distribution(owners[m][0]) for m in imported - OPTIONAL.keys()}
    # hiredis is imported by the engine's wire and comes with redis[hiredis]: declared once, through the extra.
    assert any(r.startswith("redis[hiredis]") for r in project["dependencies"])
    assert declared == needed - {"hiredis"}, (declared, needed)
    assert not {"whitenoise", "dj-database-url"} & declared  # this repository's project/settings.py only
    extras = project["optional-dependencies"]
    assert {m: e for m, e in OPTIONAL.items() if m in imported and e in extras} == OPTIONAL
    assert {"otel", "postgres", "server"} <= extras.keys()


def test_the_version_is_written_once_and_each_package_is_typed() -> None:
    config = pyproject()
    assert "version" not in config["project"] and config["project"]["dynamic"] == ["version"]
    assert config["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "jobconsole.__version__"}
    assert re.fullmatch(r"\d+\.\d+\.\d+", jobconsole.__version__)
    changelog = (PROJECT / "CHANGELOG.md").read_text()
    assert "## [Unreleased]" in changelog or f"## [{jobconsole.__version__}]" in changelog
    assert "py.typed" in config["tool"]["setuptools"]["package-data"]["*"]
    assert all((PROJECT / package / "py.typed").exists() for package in PACKAGES)
    assert "Copyright (c) 2026 The Jobconsole authors" in (PROJECT / "LICENSE").read_text()
    assert config["project"]["license"] == "MIT"


def test_requirements_txt_is_what_running_needs_and_the_dev_file_what_testing_needs() -> None:
    run = {distribution(line) for line in (PROJECT / "requirements.txt").read_text().splitlines() if "==" in line}
    dev = (PROJECT / "requirements-dev.txt").read_text()
    assert {distribution(r) for r in pyproject()["project"]["dependencies"]} <= run
    assert {"whitenoise", "dj-database-url", "gunicorn"} <= run
    assert not {"pytest", "playwright", "schemathesis", "mypy", "ruff"} & run
    # 63 MB (and narwhals) for one script: the console serves its vendored plotly.js bundle (dashboards/vendor/).
    assert "plotly" not in run
    assert "-r requirements" not in (PROJECT / "requirements.txt").read_text() and "pytest==" in dev
