import pytest

# The browser tests' fixture module (`pytest_plugins`) is imported by those tests for its
# helpers too, before pytest loads it as a plugin: rewrite its asserts from the first import.
pytest.register_assert_rewrite("tests.integration.ui_stack")
