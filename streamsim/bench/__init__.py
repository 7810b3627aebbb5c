"""Benchmarks: each measures a subject and a reference tool in the same run and reports the ratio,
because these machines are noisy and only same-run ratios compare."""
