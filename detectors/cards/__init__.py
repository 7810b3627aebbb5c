"""The card rules: velocity (card testing), impossible travel, compromised terminal and the
spending anomaly (account takeover), each with its params, vectorised and stateful forms."""
