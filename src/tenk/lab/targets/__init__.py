"""What the lab measures besides tenk: the naive baselines, and the mock vendor tenk and they call."""
