"""Load tests: an open-model arrival rate against the fraud endpoint, latency without
coordinated omission, SLOs checked, a JSON report and charts (`streamsim loadtest FILE`)."""
