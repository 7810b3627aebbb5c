"""How `make test` shares the suite between its workers: modules, and the Spark ones as one."""

from __future__ import annotations

import doctest

from tests import xdist_groups
from tests.conftest import REPO_ROOT


def test_its_examples_hold() -> None:
    result = doctest.testmod(xdist_groups)
    assert result.attempted >= 4 and result.failed == 0


def test_the_spark_modules_share_one_unit_and_the_others_keep_their_own() -> None:
    spark = "tests/integration/test_pipeline_cards.py::test_queries_and_modes"
    browser = "tests/integration/test_ui_browser.py::test_control_panel_in_a_real_browser"
    assert xdist_groups.unit_of_work(spark, REPO_ROOT) == xdist_groups.SPARK_GROUP
    assert xdist_groups.unit_of_work(browser, REPO_ROOT) == "tests/integration/test_ui_browser.py"


def test_unit_tests_queue_first_then_the_longest_integration_units() -> None:
    ids = [
        "tests/integration/test_ui_browser.py::t",
        "tests/unit/test_a.py::t",
        "tests/integration/test_pipeline_cards.py::test_queries_and_modes",
        "tests/integration/test_not_timed_yet.py::t",
    ]
    queued = sorted(ids, key=lambda nodeid: xdist_groups.queue_key(nodeid, REPO_ROOT))
    assert queued[0] == "tests/unit/test_a.py::t"
    assert queued[1].startswith("tests/integration/test_pipeline_cards.py")  # spark: longest
    assert queued[-1] == "tests/integration/test_not_timed_yet.py::t"  # unknown: last


def test_the_times_file_names_units_that_exist() -> None:
    units = xdist_groups.unit_seconds()
    assert next(iter(units)) == xdist_groups.SPARK_GROUP
    for unit in units:
        assert unit == xdist_groups.SPARK_GROUP or (REPO_ROOT / unit).is_file(), unit
