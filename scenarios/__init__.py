"""Domain scenarios: what entities exist and what they truly do, with faults and labels."""
