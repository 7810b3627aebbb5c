"""`python -m streamsim` is the `streamsim` command."""

from streamsim.cli import main

main()
