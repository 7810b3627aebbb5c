"""The committed config reference page is exactly what the models generate."""

from pathlib import Path

from streamsim.config.reference import reference_markdown

PAGE = Path(__file__).resolve().parents[2] / "docs" / "config-reference.md"


def test_reference_page_is_current() -> None:
    assert PAGE.read_text() == reference_markdown() + "\n", (
        "docs/config-reference.md is stale: run `streamsim config reference > "
        "docs/config-reference.md`"
    )


def test_reference_lists_nested_keys_with_defaults() -> None:
    page = reference_markdown()
    assert "| `kafka.local.port` | int | `9092` |" in page
    assert "| `api.port` | int | `8000` |" in page
    assert "`kafka.topic_overrides.<name>.partitions`" in page
    assert "| `job` | str | *required* |" in page
