"""The panel's login (ui/app.py, Streamlit's AppTest): with STREAMSIM_API_TOKEN set, nothing but
a password field until the token is typed; a wrong one is refused; the right one is kept in the
session and sent as the bearer token; "Log out" forgets it. Without the token: no login."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from tests.conftest import REPO_ROOT, free_port
from ui.client import TOKEN_ENV, URL_ENV, ApiClient

TOKEN = "panel-login-token"
APP = str(REPO_ROOT / "ui" / "app.py")
SESSION_CLIENT = "logged_in_client"


@pytest.fixture(autouse=True)
def api_down(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """An API URL nobody listens on (the pages say so), and a fresh shared client per test."""
    monkeypatch.setenv(URL_ENV, f"http://127.0.0.1:{free_port()}")
    st.cache_resource.clear()
    yield
    st.cache_resource.clear()


def _run(token: str | None, monkeypatch: pytest.MonkeyPatch) -> AppTest:
    if token is None:
        monkeypatch.delenv(TOKEN_ENV, raising=False)
    else:
        monkeypatch.setenv(TOKEN_ENV, token)
    test = AppTest.from_file(APP, default_timeout=30)
    return test.run()


def _texts(test: AppTest) -> str:
    return " ".join(str(e.value) for e in [*test.title, *test.error, *test.markdown, *test.caption])


def test_with_a_token_only_the_login_form_shows(monkeypatch: pytest.MonkeyPatch) -> None:
    test = _run(TOKEN, monkeypatch)
    assert not test.exception
    (field,) = test.text_input
    assert field.label == "Control token"
    assert test.button[0].label == "Log in"
    assert len(test.sidebar.title) == 0  # no sidebar, no page
    assert SESSION_CLIENT not in test.session_state


def test_a_wrong_token_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    test = _run(TOKEN, monkeypatch)
    test.text_input[0].input("not-the-token")
    test.button[0].click().run()
    assert "Wrong token." in _texts(test)
    assert SESSION_CLIENT not in test.session_state
    assert len(test.sidebar.title) == 0


def test_the_right_token_logs_in_and_is_sent(monkeypatch: pytest.MonkeyPatch) -> None:
    test = _run(TOKEN, monkeypatch)
    test.text_input[0].input(TOKEN)
    test.button[0].click().run()
    assert not test.exception
    client = test.session_state[SESSION_CLIENT]
    assert isinstance(client, ApiClient) and client.token == TOKEN and client.can_control
    assert [t.value for t in test.sidebar.title] == ["streamsim"]
    assert "Control token" not in [f.label for f in test.text_input]
    (log_out,) = [b for b in test.sidebar.button if b.label == "Log out"]
    log_out.click().run()
    assert SESSION_CLIENT not in test.session_state
    assert [f.label for f in test.text_input] == ["Control token"]


def test_without_a_token_there_is_no_login(monkeypatch: pytest.MonkeyPatch) -> None:
    test = _run(None, monkeypatch)
    assert not test.exception
    assert [t.value for t in test.sidebar.title] == ["streamsim"]
    assert "Control token" not in [f.label for f in test.text_input]
