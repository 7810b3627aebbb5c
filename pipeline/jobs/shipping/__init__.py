"""Job `shipping`: container histories across ships, the shipping rules, days-late voyages."""
