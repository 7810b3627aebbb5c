"""Scoring decisions against truth: `streamsim evaluate SCENARIO`.

sources (truth, endpoint decisions, pipeline alerts, run record, progress)
  -> detections (one row per decision that names a label type)
  -> scores per path and label type (precision, recall, F1, support, latency)
"""
