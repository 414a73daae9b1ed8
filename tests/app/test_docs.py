"""The documentation against the code: every setting and environment variable documented in
docs/configuration.md, every relative link of the Markdown docs pointing at a file (and heading) that exists,
and a README short enough to stay a front door."""

import re
from pathlib import Path

import pytest

from jobconsole.conf import SETTINGS
from tests.conftest import PROJECT

CONFIGURATION = PROJECT / "docs" / "configuration.md"
LINKED_DOCS = sorted([PROJECT / "README.md", *(PROJECT / "docs").glob("*.md")])
README_MAX_LINES = 200

FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.MULTILINE | re.DOTALL)
INLINE_CODE = re.compile(r"`[^`\n]*`")
# [text](target) or [text](target "title"); images too.
LINK = re.compile(r"!?\[[^\]\n]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$", re.MULTILINE)
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)


def table_rows(text: str) -> list[list[str]]:
    """The cells of every Markdown table row (header and separator rows included; callers filter)."""
    return [
        [cell.strip() for cell in line.strip().strip("|").split("|")]
        for line in text.splitlines()
        if line.lstrip().startswith("|")
    ]


def settings_table(text: str) -> dict[str, list[str]]:
    """Rows whose first cell is a code span, by that name: the settings table (and the project's variables)."""
    rows: dict[str, list[str]] = {}
    for cells in table_rows(text):
        if match := re.fullmatch(r"`([^`]+)`", cells[0]):
            rows[match.group(1)] = cells
    return rows


def test_every_setting_has_a_row_with_its_environment_variable() -> None:
    rows = settings_table(CONFIGURATION.read_text())
    missing = [s.name for s in SETTINGS if s.name not in rows]
    assert not missing, f"docs/configuration.md has no table row for: {', '.join(missing)}"
    wrong_env = [
        f"{s.name} (expected {s.env})"
        for s in SETTINGS
        if s.env and f"`{s.env}`" not in rows[s.name][2]  # columns: setting, default, variable, meaning
    ]
    assert not wrong_env, f"docs/configuration.md does not name the environment variable of: {wrong_env}"
    no_env = [s.name for s in SETTINGS if not s.env and rows[s.name][2]]
    assert not no_env, f"docs/configuration.md names an environment variable for settings that have none: {no_env}"


def test_no_documented_setting_is_unknown() -> None:
    """A row for a setting that conf.py does not have (removed or misspelt) is an error too."""
    known = {s.name for s in SETTINGS}
    text = CONFIGURATION.read_text()
    start = text.index("| Setting |")
    table = text[start : text.index("\n\n", start)]
    unknown = sorted(settings_table(table).keys() - known)
    assert not unknown, f"docs/configuration.md documents settings jobconsole/conf.py does not have: {unknown}"


def project_environment_variables() -> set[str]:
    """Every variable project/settings.py reads, and the ones the Procfile's commands read."""
    settings = (PROJECT / "project" / "settings.py").read_text()
    names = set(re.findall(r"(?:os\.environ\.get|_env_bool|_env_list)\(\s*\"([A-Z][A-Z0-9_]*)\"", settings))
    names |= set(re.findall(r"\"([A-Z][A-Z0-9_]*)\"\s+(?:not\s+)?in\s+os\.environ", settings))
    names |= set(re.findall(r"\$\{([A-Z][A-Z0-9_]*)", (PROJECT / "Procfile").read_text()))
    return names


def test_every_environment_variable_of_the_project_is_documented() -> None:
    names = project_environment_variables()
    assert {"SECRET_KEY", "DEBUG", "DATABASE_URL", "PORT"} <= names  # the patterns above still find them
    text = CONFIGURATION.read_text()
    missing = sorted(name for name in names if f"`{name}`" not in text)
    assert not missing, f"docs/configuration.md does not mention: {missing}"


def github_anchor(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, Markdown and punctuation dropped, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link keeps its text
    text = text.replace("`", "").strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    found = set()
    for heading in HEADING.findall(FENCE.sub("", path.read_text())):
        slug = github_anchor(heading)
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        found.add(slug if count == 0 else f"{slug}-{count}")
    return found


def relative_links(path: Path) -> list[str]:
    text = INLINE_CODE.sub("", FENCE.sub("", path.read_text()))
    targets = LINK.findall(text) + REFERENCE.findall(text)
    return [t for t in targets if not re.match(r"[a-z][a-z0-9+.-]*:", t, re.IGNORECASE)]  # no http:, mailto:


@pytest.mark.parametrize("doc", LINKED_DOCS, ids=lambda p: str(p.relative_to(PROJECT)))
def test_relative_links_resolve(doc: Path) -> None:
    broken = []
    for target in relative_links(doc):
        file_part, _, anchor = target.partition("#")
        destination = (doc.parent / file_part).resolve() if file_part else doc
        if not destination.exists():
            broken.append(f"{target} (no such file)")
        elif anchor and destination.suffix == ".md" and anchor not in anchors(destination):
            broken.append(f"{target} (no such heading)")
    assert not broken, f"{doc.relative_to(PROJECT)}: broken links: {broken}"


def test_link_checker_sees_links() -> None:
    """The link test means something only if the pattern finds the README's links."""
    links = relative_links(PROJECT / "README.md")
    assert "docs/configuration.md" in links and "chaos/README.md" in links, links
    assert github_anchor("Redis at maxmemory (`redis_full`, reliability #6, its memory half)") == (
        "redis-at-maxmemory-redis_full-reliability-6-its-memory-half"
    )


def test_readme_stays_short() -> None:
    lines = (PROJECT / "README.md").read_text().splitlines()
    assert len(lines) < README_MAX_LINES, f"README.md has {len(lines)} lines; the details belong in docs/"
