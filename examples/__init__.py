"""Apps built on tenk's public API, which the suite runs: each is the code a docs page shows."""
