"""Results: the files a run leaves and what a person reads from them.

Inputs: per-repeat rung documents (from `measuring`) or `results.json` folders. Outputs: the
median-and-interval summary of each rung, `results.json`, `report.md` and `report.html` (verdict
first), `tenk lab compare` labels and its regression gate, and `tenk lab merge` of segment runs
(exact percentiles from added HdrHistograms), and `tenk lab plan`, a deployment sized from the
measured per-request costs. Provenance records where a result came from.
"""
