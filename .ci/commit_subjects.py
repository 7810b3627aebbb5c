"""Commit subjects after BASE: at most 72 characters, the area first (`docs: ...`).

`make lint` runs it. Measurements and reasons go in the commit body, not the subject. In a shallow
clone that lacks BASE, only HEAD's subject is checked, and the check says so. Merge commits are
left out: their subjects are written by tools.

    python .ci/commit_subjects.py [BASE]
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterable, Sequence

#: The first commit of issue 30, which asked for this check; older subjects are left as they are.
BASE = "02b2af4"
MAX_LENGTH = 72
AREA = re.compile(r"^[a-z0-9][a-z0-9/_.-]*: ")
EXAMPLE = "docs: where the sensor alerts query's time goes"


def problems(subjects: Iterable[str]) -> list[str]:
    """One line per subject that breaks a rule, saying which; empty when all hold."""
    found = []
    for subject in subjects:
        why = []
        if len(subject) > MAX_LENGTH:
            why.append(f"{len(subject)} characters, over {MAX_LENGTH}")
        if not AREA.match(subject):
            why.append("no area first (lower case, then ': ')")
        if why:
            found.append(f"{subject!r}: {'; '.join(why)}")
    return found


def git(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], capture_output=True, text=True, check=False)


def subjects_to_check(base: str) -> tuple[list[str], str]:
    """The subjects of the commits after `base` (no merges), or HEAD's alone when `base` is not
    in the history; with a line saying which."""
    if git("cat-file", "-e", f"{base}^{{commit}}").returncode != 0:
        head = git("log", "-1", "--format=%s").stdout.splitlines()
        note = f"commit {base} is not in this clone (shallow?): checking HEAD's subject only"
        return head, note
    log = git("log", "--no-merges", "--format=%s", f"{base}..HEAD")
    if log.returncode != 0:
        raise SystemExit(f"commit subjects: git log failed: {log.stderr.strip()}")
    subjects = log.stdout.splitlines()
    return subjects, f"{len(subjects)} commit subject(s) after {base}"


def main(argv: Sequence[str]) -> int:
    base = argv[0] if argv else BASE
    if git("rev-parse", "--git-dir").returncode != 0:
        print("commit subjects: not a git checkout, nothing to check", file=sys.stderr)
        return 2
    subjects, scope = subjects_to_check(base)
    found = problems(subjects)
    if not found:
        print(f"commit subjects: ok ({scope})")
        return 0
    print(f"commit subjects: {len(found)} to fix, of {scope}:", file=sys.stderr)
    for line in found:
        print(f"  {line}", file=sys.stderr)
    print(
        f"A subject is at most {MAX_LENGTH} characters and starts with its area, e.g. "
        f"{EXAMPLE!r}; figures go in the body. Fix with `git commit --amend` or "
        "`git rebase -i` before pushing.",
        file=sys.stderr,
    )
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
