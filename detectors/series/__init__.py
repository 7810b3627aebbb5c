"""The signal rules over one entity's time series (vehicles, sensors): threshold, step,
flatline, silence, trend, z-score, GPS jump, speeding and harsh braking; `base` holds what
they share (input preparation and the stateful base class)."""
