"""Processes: starting and stopping what a rung measures and what it needs, apart from measuring it.

Inputs: a rung's `RungConfig`, the environment its servers run in, CPU lists. It starts the target
(pinned to its CPU set, inside its CPU budget's cgroup when it has one: `cpubudget.py`), the mock
upstream, ingest workers, a private Redis, the embedded stack and the local cluster's stores and API
nodes (`cluster.py`). Outputs: the started processes, each with a log of its own, in a `ProcessSet`
whose exit stops them all, on errors and Ctrl-C too; `measuring` samples and drives what it started.
"""
