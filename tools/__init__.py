"""Contributor tooling: the commit-message check `make` installs, and CI runs on submitted commits."""
