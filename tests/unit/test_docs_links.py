"""The README is a front door: within 200 lines, its folder table names every top-level package
folder, and every relative link in it and in `docs/` leads to a file (and heading) that exists."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
PAGES = [README, *sorted((REPO / "docs").glob("*.md"))]
MAX_README_LINES = 200
#: Top-level folders that are not Python packages but belong in the folder table.
OTHER_FOLDERS = ("config", "docs", "jvm", "tests")

FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.M | re.S)
INLINE_CODE = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE = re.compile(r"^\s*\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+\"[^\"]*\")?\s*$", re.M)
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.M)
HTML_ANCHOR = re.compile(r"<a\s[^>]*(?:id|name)=\"([^\"]+)\"")
EXTERNAL = ("http://", "https://", "mailto:")
FOLDER_ROW = re.compile(r"^\|\s*`([A-Za-z0-9_.-]+)/`\s*\|", re.M)


def prose(text: str) -> str:
    """`text` without code: fenced blocks and inline code spans hold no links."""
    return INLINE_CODE.sub("", FENCE.sub("", text))


def links(text: str) -> list[str]:
    """Every link target in Markdown `text`, inline or reference style."""
    body = prose(text)
    return [*LINK.findall(body), *REFERENCE.findall(body)]


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: link text kept, lower case, punctuation dropped,
    spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = re.sub(r"[^\w\- ]", "", text.lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """The anchors of a Markdown file: its headings' slugs (repeats numbered) and HTML ids."""
    text = FENCE.sub("", path.read_text(encoding="utf-8"))
    found: set[str] = set(HTML_ANCHOR.findall(text))
    seen: dict[str, int] = {}
    for heading in HEADING.findall(text):
        base = slug(heading)
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def broken_links(page: Path) -> list[str]:
    """Each relative link of `page` whose file, or whose heading in a Markdown file, is missing."""
    broken = []
    for target in links(page.read_text(encoding="utf-8")):
        if target.startswith(EXTERNAL):
            continue
        path_part, _, anchor = target.partition("#")
        path = (page.parent / path_part).resolve() if path_part else page
        if not path.exists():
            broken.append(f"{target}: no file {path}")
        elif anchor and path.suffix == ".md" and anchor not in anchors(path):
            broken.append(f"{target}: no heading #{anchor} in {path.name}")
    return broken


def required_folders(pyproject: Path) -> set[str]:
    """The wheel's packages (pyproject) and the other top-level folders the table must name."""
    config = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    packages = config["tool"]["hatch"]["build"]["targets"]["wheel"]["packages"]
    return {*packages, *OTHER_FOLDERS}


def missing_folders(readme: str, required: set[str]) -> list[str]:
    """The required folders that no row of the README's folder table names."""
    named = set(FOLDER_ROW.findall(readme))
    return sorted(required - named)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_relative_links_resolve(page: Path) -> None:
    assert broken_links(page) == []


def test_readme_is_short() -> None:
    lines = len(README.read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_README_LINES, f"README.md has {lines} lines; move detail to docs/"


def test_folder_table_names_every_top_level_folder() -> None:
    required = required_folders(REPO / "pyproject.toml")
    assert {"core", "detectors", "streamsim"} <= required
    assert missing_folders(README.read_text(encoding="utf-8"), required) == []
    assert all((REPO / name).is_dir() for name in required)


def test_a_broken_link_or_anchor_is_reported(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "guide.md").write_text("# Guide\n\n## The `shipping` job: late data\n")
    page = tmp_path / "README.md"
    page.write_text(
        "[ok](docs/guide.md#the-shipping-job-late-data) [web](https://example.com)\n"
        "[gone](docs/missing.md) [bad anchor](docs/guide.md#nowhere) [self](#guide)\n"
        "`[code](docs/not-a-link.md)`\n\n```\n[fenced](docs/not-a-link.md)\n```\n"
        "# Guide\n"
    )
    assert [b.split(":")[0] for b in broken_links(page)] == [
        "docs/missing.md",
        "docs/guide.md#nowhere",
    ]


def test_a_missing_folder_is_reported() -> None:
    table = "| folder | what |\n|---|---|\n| `core/` | base |\n| `docs/` | guides |\n"
    assert missing_folders(table, {"core", "docs", "jvm"}) == ["jvm"]


def test_slugs_follow_github() -> None:
    assert slug("Replication: port to headquarters (MirrorMaker 2)") == (
        "replication-port-to-headquarters-mirrormaker-2"
    )
    assert slug("What `make demo` prints") == "what-make-demo-prints"
    assert slug("Set-up: what `make setup` does") == "set-up-what-make-setup-does"
