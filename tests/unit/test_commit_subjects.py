"""The commit-subject check of `make lint` (`.ci/commit_subjects.py`): subjects in, problems
out; and which commits it reads."""

from __future__ import annotations

import importlib.util
import subprocess
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / ".ci" / "commit_subjects.py"


def load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("commit_subjects", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


check = load()


@pytest.mark.parametrize(
    "subject",
    [
        "docs: where the sensor alerts query's time goes per sensor",
        "pipeline/jobs: one source per shipping topic",
        "api.panel: fleet route under /v1/shipping",
        "ci: " + "x" * 68,  # exactly 72
    ],
)
def test_good_subjects_pass(subject: str) -> None:
    assert check.problems([subject]) == []


def test_each_bad_subject_is_listed_with_why() -> None:
    long = "loadtest: " + "y" * 63  # 73
    found = check.problems(
        [
            "docs: fine",
            long,
            "Docs: capital area",
            "no area at all",
            "docs:no space",
            ": empty area",
            "README: " + "z" * 80,
        ]
    )
    assert len(found) == 6
    assert found[0] == f"{long!r}: 73 characters, over 72"
    assert all("no area first" in line for line in found[1:5])
    assert "88 characters, over 72; no area first" in found[5]


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run(["git", "init", "-q"], check=True)
    for subject in ("old subject without an area", "base: the issue's first commit"):
        subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", subject], check=True)
    return tmp_path


def head(repo: Path) -> str:
    return subprocess.run(
        ["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True, cwd=repo
    ).stdout.strip()


def test_only_commits_after_the_base_are_read(repo: Path) -> None:
    base = head(repo)
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q",
         "--allow-empty", "-m", "Fixed things and measured 3,456 events/s on two cores today"],
        check=True,
    )  # fmt: skip
    subjects, scope = check.subjects_to_check(base)
    assert subjects == ["Fixed things and measured 3,456 events/s on two cores today"]
    assert scope == f"1 commit subject(s) after {base}"
    assert check.main([base]) == 1


def test_a_missing_base_checks_head_only(repo: Path) -> None:
    subjects, scope = check.subjects_to_check("0" * 40)
    assert subjects == ["base: the issue's first commit"]
    assert "HEAD's subject only" in scope
    assert check.main(["0" * 40]) == 0
