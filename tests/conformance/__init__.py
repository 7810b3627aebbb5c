"""Conformance corpora: event sequences with the alerts every form of a rule must raise."""
