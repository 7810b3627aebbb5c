"""How `make test` shares the suite between its two pytest-xdist workers: each test module is
one unit of work (its module fixtures start once, on one worker), and every module that asks
for the session's in-process SparkSession (`spark`) joins one unit, so the suite starts one
SparkSession and runs one in-process Spark job at a time.

pytest-xdist's own `--dist loadgroup` cannot do this under pytest 9 (it renames test ids
through an attribute pytest no longer reads), so `--dist loadscope` gets this scheduler.

Units are handed out in the order their first test is queued: the unit tests first, so a unit
failure shows in minutes, then the integration units longest first (`SECONDS`, each unit's
time in an earlier run), so the run does not end with one worker idle while the other starts
a long module. `python -m tests.xdist_groups` rewrites `SECONDS` from the last run's
`.data/test-reports/durations.txt`, as pytest-split keeps its `.test_durations`.
"""

from __future__ import annotations

import ast
import functools
import json
import re
import sys
from collections import defaultdict
from pathlib import Path

from xdist.scheduler import LoadScopeScheduling

SPARK_GROUP = "spark"
#: Each integration unit's seconds in an earlier run; a unit not listed counts as 0 (queued last).
SECONDS = Path(__file__).with_name("unit_seconds.json")


@functools.cache
def asks_for_spark(path: Path) -> bool:
    """Whether a function in the module at `path` (a test or a fixture) takes `spark`.

    >>> import tempfile
    >>> folder = Path(tempfile.mkdtemp())
    >>> _ = (folder / "a.py").write_text("def test_x(kafka_stack, spark):\\n    pass\\n")
    >>> _ = (folder / "b.py").write_text("def test_y(tmp_path):\\n    spark = 1\\n")
    >>> asks_for_spark(folder / "a.py"), asks_for_spark(folder / "b.py")
    (True, False)
    """
    tree = ast.parse(path.read_text())
    return any(
        arg.arg == "spark"
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        for arg in (*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs)
    )


def unit_of_work(nodeid: str, root: Path) -> str:
    """The unit a test is scheduled in: `spark`, or its module's path.

    >>> unit_of_work("tests/unit/test_x.py::test_y[a::b]", Path("/nowhere"))
    'tests/unit/test_x.py'
    """
    module = nodeid.split("::", 1)[0]
    path = root / module
    return SPARK_GROUP if path.is_file() and asks_for_spark(path) else module


@functools.cache
def unit_seconds() -> dict[str, float]:
    """`SECONDS`, read once (empty when the file is missing)."""
    return json.loads(SECONDS.read_text()) if SECONDS.is_file() else {}


def queue_key(nodeid: str, root: Path) -> tuple[int, float, str]:
    """Where a test is queued: unit tests first, then integration units longest first; a
    unit's tests stay together.

    >>> queue_key("tests/unit/test_a.py::t", Path("/nowhere"))
    (0, 0.0, 'tests/unit/test_a.py')
    """
    unit = unit_of_work(nodeid, root)
    if "/integration/" not in nodeid:
        return (0, 0.0, unit)
    return (1, -unit_seconds().get(unit, 0.0), unit)


def seconds_per_unit(durations: str, root: Path) -> dict[str, float]:
    """Each integration unit's seconds, from `durations.txt`'s lines, longest first.

    >>> seconds_per_unit("  2.0s  tests/integration/t.py::a\\n  1.5s  tests/integration/t.py::b\\n"
    ...                  "  9.0s  tests/unit/u.py::c\\n", Path("/nowhere"))
    {'tests/integration/t.py': 3.5}
    """
    seconds: dict[str, float] = defaultdict(float)
    for match in re.finditer(r"^\s*([\d.]+)s\s+(\S+)$", durations, re.MULTILINE):
        if "/integration/" in match[2]:
            seconds[unit_of_work(match[2], root)] += float(match[1])
    return {unit: round(s, 1) for unit, s in sorted(seconds.items(), key=lambda i: -i[1])}


class ModuleScheduling(LoadScopeScheduling):
    """`--dist loadscope`, with modules as scopes and the Spark modules as one."""

    def _split_scope(self, nodeid: str) -> str:
        return unit_of_work(nodeid, Path(self.config.rootpath))


if __name__ == "__main__":
    root = Path(__file__).resolve().parent.parent
    report = root / ".data" / "test-reports" / "durations.txt"
    table = seconds_per_unit(report.read_text(), root)
    SECONDS.write_text(json.dumps(table, indent=1) + "\n")
    print(f"{SECONDS.relative_to(root)}: {len(table)} units", file=sys.stderr)
