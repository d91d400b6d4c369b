"""The lab: open-loop load from weighted mixes, one-variable ladders, capacity search, and reports."""
