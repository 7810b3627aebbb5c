"""Container shipping: ships on real sea lanes, containers, ports; voyage data arrives late."""
