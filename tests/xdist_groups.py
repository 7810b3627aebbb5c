"""How `make test` shares the suite between its two pytest-xdist workers: each test module is
one unit of work (its module fixtures start once, on one worker), and every module that asks
for the session's in-process SparkSession (`spark`) joins one unit, so the suite starts one
SparkSession and runs one in-process Spark job at a time.

pytest-xdist's own `--dist loadgroup` cannot do this under pytest 9 (it renames test ids
through an attribute pytest no longer reads), so `--dist loadscope` gets this scheduler.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

from xdist.scheduler import LoadScopeScheduling

SPARK_GROUP = "spark"


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


class ModuleScheduling(LoadScopeScheduling):
    """`--dist loadscope`, with modules as scopes and the Spark modules as one."""

    def _split_scope(self, nodeid: str) -> str:
        return unit_of_work(nodeid, Path(self.config.rootpath))
