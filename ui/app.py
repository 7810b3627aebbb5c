"""The control panel: `streamlit run ui/app.py` (or `streamsim ui`).

It talks only to the streamsim API: STREAMSIM_API_URL (default: the stack config's api.host and
api.port) and, for starting and stopping runs, STREAMSIM_API_TOKEN.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # `streamlit run ui/app.py` puts ui/ on the path, not the repo
    sys.path.insert(0, str(ROOT))

import streamlit as st  # noqa: E402

from ui.client import ApiClient, ApiUnavailable  # noqa: E402
from ui.sections import alerts, evaluation, live, map, runs, try_it, vehicles  # noqa: E402
from ui.view import client  # noqa: E402

PAGES = (
    (live, "Live", None, ":material/monitoring:"),  # the default page: served at /
    (map, "Map", "map", ":material/public:"),
    (vehicles, "Vehicles", "vehicles", ":material/local_shipping:"),
    (alerts, "Alerts", "alerts", ":material/notifications:"),
    (runs, "Runs", "runs", ":material/play_circle:"),
    (try_it, "Try it", "try-it", ":material/credit_card:"),
    (evaluation, "Evaluation", "evaluation", ":material/insights:"),
)


def page(module: ModuleType, api: ApiClient) -> Callable[[], None]:
    """The page function of a section (named after it, so Streamlit keys stay stable)."""

    def show() -> None:
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


def main() -> None:
    st.set_option("client.toolbarMode", "minimal")  # no "Deploy" button
    st.set_page_config(page_title="streamsim control panel", page_icon="🛰️", layout="wide")
    api = client()
    with st.sidebar:
        st.title("streamsim")
        sidebar_status(api)
    pages = [
        st.Page(page(module, api), title=title, url_path=path, icon=icon, default=i == 0)
        for i, (module, title, path, icon) in enumerate(PAGES)
    ]
    st.navigation(pages).run()


main()
