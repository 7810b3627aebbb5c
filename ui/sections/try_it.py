"""Try-it page: send one transaction to the fraud endpoint and read the verdict and evidence.

The card is picked from well-known test cards by name, or typed into a password field that is
cleared on submit: the page never shows a card number, only its last 4 digits.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import streamlit as st

from ui.client import ApiClient, ApiError, ApiUnavailable
from ui.sections.alerts import evidence_lines
from ui.view import api_errors, fmt_ms, fmt_num, masked

#: Label -> PAN. Public test numbers (Luhn-valid, issued to no one).
TEST_CARDS = {
    "Visa test card ending 1111": "4111111111111111",
    "Mastercard test card ending 4444": "5555555555554444",
    "Amex test card ending 0005": "378282246310005",
    "Discover test card ending 1117": "6011111111111117",
    "Visa debit test card ending 5556": "4000056655665556",
}
CITIES = {
    "London, GB": (51.5074, -0.1278, "GB", "GBP"),
    "Paris, FR": (48.8566, 2.3522, "FR", "EUR"),
    "Berlin, DE": (52.52, 13.405, "DE", "EUR"),
    "New York, US": (40.7128, -74.006, "US", "USD"),
    "São Paulo, BR": (-23.5505, -46.6333, "BR", "BRL"),
    "Lagos, NG": (6.5244, 3.3792, "NG", "NGN"),
    "Mumbai, IN": (19.076, 72.8777, "IN", "INR"),
    "Tokyo, JP": (35.6762, 139.6503, "JP", "JPY"),
    "Sydney, AU": (-33.8688, 151.2093, "AU", "AUD"),
}
CATEGORIES = {
    "grocery (5411)": "5411",
    "restaurants (5812)": "5812",
    "fuel (5541)": "5541",
    "electronics (5732)": "5732",
    "jewelry (5944)": "5944",
    "airlines (4511)": "4511",
    "digital goods (5815)": "5815",
}
CHANNELS = ["card_present", "online", "card_not_present"]
VERDICT_KEY = "try-it-verdicts"
OWN_CARD_KEY = "try-own-card"
PENDING_KEY = "_try-it-pending-card"  # server-side only: never a widget, never sent


def _take_card_number() -> None:
    """On send, before the page reruns: move a typed card number out of its field (so the
    browser gets an empty field back) into server-side session state for this one request."""
    typed = str(st.session_state.get(OWN_CARD_KEY) or "")
    st.session_state[PENDING_KEY] = typed.replace(" ", "").replace("-", "")
    st.session_state[OWN_CARD_KEY] = ""


def transaction(
    pan: str,
    *,
    amount: float,
    city: str,
    channel: str,
    category: str,
    merchant_id: str,
    minutes_ago: float,
    now_ms: int | None = None,
    transaction_id: str | None = None,
) -> dict[str, Any]:
    """The POST /v1/transactions body for the form's values."""
    lat, lon, country, currency = CITIES[city]
    now = time.time_ns() // 1_000_000 if now_ms is None else now_ms
    body: dict[str, Any] = {
        "transaction_id": transaction_id or f"ui-{uuid.uuid4().hex[:16]}",
        "card_number": pan,
        "amount": amount,
        "currency": currency,
        "merchant_id": merchant_id,
        "merchant_category": CATEGORIES[category],
        "channel": channel,
        "country": country,
        "event_time": int(now - minutes_ago * 60_000),
    }
    if channel == "card_present":
        body.update(lat=lat, lon=lon, terminal_id=f"{merchant_id}-pos-1")
    return body


def render(client: ApiClient) -> None:
    st.header("Try a transaction")
    st.caption(
        "Posts to the fraud endpoint (POST /v1/transactions). Use one card in two far-apart "
        "cities a few minutes apart to see an impossible-travel decline."
    )
    with api_errors("The health check"):  # say it before the form, not after a send
        client.health()
    with st.form("try-it", border=True):
        left, middle, right = st.columns(3)
        card = left.selectbox("Card", list(TEST_CARDS), key="try-card")
        left.text_input(
            "…or another test card number",
            type="password",
            key=OWN_CARD_KEY,
            help="Never shown or kept: the field is emptied when you send.",
        )
        amount = middle.number_input(
            "Amount", min_value=0.01, max_value=1e6, value=42.0, step=1.0, key="try-amount"
        )
        city = middle.selectbox("Where", list(CITIES), key="try-city")
        channel = middle.selectbox("Channel", CHANNELS, key="try-channel")
        category = right.selectbox("Merchant category", list(CATEGORIES), key="try-category")
        merchant = right.text_input("Merchant id", value="m-ui-demo", key="try-merchant")
        minutes_ago = right.number_input(
            "Event time: minutes ago",
            min_value=0.0,
            max_value=10_000.0,
            value=0.0,
            step=1.0,
            key="try-minutes",
        )
        sent = st.form_submit_button(
            "Send transaction", type="primary", icon=":material/send:", on_click=_take_card_number
        )
    if sent:
        pan = st.session_state.pop(PENDING_KEY, "") or TEST_CARDS[card]
        body = transaction(
            pan,
            amount=float(amount),
            city=city,
            channel=channel,
            category=category,
            merchant_id=merchant or "m-ui-demo",
            minutes_ago=float(minutes_ago),
        )
        try:
            verdict = client.decide(body)
        except ApiUnavailable as exc:
            st.error(f"**API down** — {exc}")
        except ApiError as exc:
            st.error(f"**Rejected** (HTTP {exc.status}): {exc}")
        else:
            history = st.session_state.setdefault(VERDICT_KEY, [])
            history.insert(0, {**verdict, "_where": city if channel == "card_present" else channel})
            del history[5:]
        del pan, body  # nothing of the card number outlives the request
    for i, verdict in enumerate(st.session_state.get(VERDICT_KEY, [])):
        _verdict(verdict, latest=i == 0)


def _verdict(verdict: dict[str, Any], latest: bool) -> None:
    decision = verdict["decision"]
    text = (
        f"**Verdict: {decision.upper()}** for {masked(verdict['card_last4'])} "
        f"({verdict['_where']}) · score {fmt_num(verdict['score'], 2)} · reasons: "
        f"{', '.join(verdict['reasons']) or 'none'} · transaction `{verdict['transaction_id']}` "
        f"decided {fmt_ms(verdict['decided_at'])} UTC"
    )
    box = {"decline": st.error, "review": st.warning}.get(decision, st.success)
    if not latest:
        with st.expander(f"Earlier: {decision} for {masked(verdict['card_last4'])}"):
            box(text)
            _evidence(verdict)
        return
    box(text)
    _evidence(verdict)


def _evidence(verdict: dict[str, Any]) -> None:
    evidence = verdict.get("evidence") or {}
    left, right = st.columns(2)
    with left:
        st.markdown("**Travel evidence**")
        travel = evidence.get("travel")
        st.code("\n".join(evidence_lines(travel)) if travel else "no located earlier use", None)
    with right:
        st.markdown("**Velocity evidence**")
        st.code("\n".join(evidence_lines(evidence.get("velocity") or {})), language=None)
