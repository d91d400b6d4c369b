"""Driving the load: turning a mix and a rate into requests, and measuring what that cost.

Inputs: a `LoadRun` (generator.py), which k6 and wrk alike take: a `Mix`, a rate (k6, open loop) or a
connection count (wrk, closed loop), a base URL, the run's files and CPUs.
Outputs: `LoadFigures` (goodput, latency percentiles, errors by reason, the generator's CPU and
whether it was the bottleneck), the run's latency histogram and its per-second live series.
"""
