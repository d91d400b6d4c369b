"""One module per family of rules; each exposes `check(context)` yielding findings."""
