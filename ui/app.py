"""The control panel: `streamlit run ui/app.py` (or `streamsim ui`).

It talks only to the streamsim API: STREAMSIM_API_URL (default: the stack config's api.host and
api.port) and, for starting and stopping runs, STREAMSIM_API_TOKEN.

With STREAMSIM_API_TOKEN set, the panel starts with a login: whoever opens it types the token
into a password field, and only then sees any page. The session keeps it and sends it as the
bearer token of its control calls; "Log out" forgets it. Without the token the panel has no
login and is read-only.
"""

from __future__ import annotations

import hmac
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import NoReturn

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # `streamlit run ui/app.py` puts ui/ on the path, not the repo
    sys.path.insert(0, str(ROOT))

import streamlit as st  # noqa: E402

from ui.client import ApiClient, ApiUnavailable  # noqa: E402
from ui.sections import (  # noqa: E402
    alerts,
    evaluation,
    live,
    loadtests,
    map,
    runs,
    sensors,
    shipping,
    try_it,
    vehicles,
)
from ui.status import show_down  # noqa: E402
from ui.view import client  # noqa: E402

PAGES = (
    (live, "Live", None, ":material/monitoring:"),  # the default page: served at /
    (map, "Map", "map", ":material/public:"),
    (vehicles, "Vehicles", "vehicles", ":material/local_shipping:"),
    (shipping, "Shipping", "shipping", ":material/directions_boat:"),
    (sensors, "Sensors", "sensors", ":material/sensors:"),
    (alerts, "Alerts", "alerts", ":material/notifications:"),
    (runs, "Runs", "runs", ":material/play_circle:"),
    (try_it, "Try it", "try-it", ":material/credit_card:"),
    (evaluation, "Evaluation", "evaluation", ":material/insights:"),
    (loadtests, "Load tests", "load-tests", ":material/speed:"),
)
#: The pages fed by a Spark job: each says so when none reports.
NEEDS_JOB = (live, vehicles, shipping, sensors, alerts)


def page(module: ModuleType, api: ApiClient) -> Callable[[], None]:
    """The page function of a section (named after it, so Streamlit keys stay stable)."""

    def show() -> None:
        show_down(api, needs_job=module in NEEDS_JOB)
        module.render(api)

    show.__name__ = module.__name__.rsplit(".", 1)[-1]
    return show


@st.fragment(run_every=5)
def sidebar_status(api: ApiClient) -> None:
    try:
        health = api.health()
    except ApiUnavailable as exc:
        st.error(f"API down: {exc.reason}", icon=":material/cloud_off:")
        st.caption(f"{api.base_url} — start it with `streamsim api`.")
        return
    except Exception as exc:  # any other failure: say so, keep the page
        st.error(f"API error: {exc}")
        return
    kafka = health["kafka"]
    icon = ":green[●]" if health["status"] == "ok" else ":orange[●]"
    st.markdown(f"{icon} API **{health['status']}**  \n`{api.base_url}`")
    st.caption(
        f"Kafka {'connected' if kafka['connected'] else 'unreachable'} · state "
        f"{health['state']['status']}"
        + ("" if api.can_control else " · read-only (no control token)")
    )


#: Where a session keeps its logged-in client (the typed token inside).
SESSION_CLIENT = "logged_in_client"
#: A wrong token costs this long: typing tokens in a loop gets slow.
WRONG_TOKEN_DELAY_S = 1.0


def session_client(shared: ApiClient) -> ApiClient | None:
    """The session's API client: `shared` when the panel has no control token; else the client
    the user logged in with (it sends the typed token), or None before that."""
    if not shared.token:
        return shared
    logged_in = st.session_state.get(SESSION_CLIENT)
    return logged_in if isinstance(logged_in, ApiClient) else None


def login_form(shared: ApiClient) -> NoReturn:
    """The token in a password field, checked against the panel's; right: kept in the session
    and the page shown again; wrong: said so, after a delay. Nothing else renders."""
    st.title("streamsim control panel")
    with st.form("login"):
        typed = st.text_input(
            "Control token", type="password", help="The API's STREAMSIM_API_TOKEN."
        )
        if st.form_submit_button("Log in", type="primary"):
            if hmac.compare_digest(typed.encode(), (shared.token or "").encode()):
                st.session_state[SESSION_CLIENT] = ApiClient(shared.base_url, token=typed)
                st.rerun()
            time.sleep(WRONG_TOKEN_DELAY_S)
            st.error("Wrong token.", icon=":material/lock:")
    st.stop()


def log_out() -> None:
    logged_in = st.session_state.pop(SESSION_CLIENT, None)
    if isinstance(logged_in, ApiClient):
        logged_in.close()


def main() -> None:
    st.set_option("client.toolbarMode", "minimal")  # no "Deploy" button
    st.set_page_config(page_title="streamsim control panel", page_icon="🛰️", layout="wide")
    shared = client()
    api = session_client(shared)
    pages = [
        st.Page(page(module, api or shared), title=title, url_path=path, icon=icon, default=i == 0)
        for i, (module, title, path, icon) in enumerate(PAGES)
    ]
    # Navigation first, hidden before the login, so the page asked for (/runs) is the one shown
    # after it; no page runs until then.
    navigation = st.navigation(pages, position="sidebar" if api else "hidden")
    if api is None:
        login_form(shared)
    with st.sidebar:
        st.title("streamsim")
        sidebar_status(api)
        if SESSION_CLIENT in st.session_state:
            st.button("Log out", on_click=log_out, icon=":material/logout:")
    navigation.run()


main()
