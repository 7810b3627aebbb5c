"""The Streamlit control panel (`streamsim ui`, or `streamlit run ui/app.py`).

- `app`: the entry point: sidebar (API status) and page navigation;
- `client`: the API client (URL and control token from the environment);
- `knobs`: which sliders a scenario gets and how they become run overrides;
- `view`: what pages share (errors, formats); `sections/`: one page each (runs, live, map,
  alerts, try_it, evaluation).
"""
