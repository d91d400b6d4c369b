"""Measuring: running a ladder's rungs and finding out who set each ceiling.

Inputs: a `Ladder` and run options. It has `processes` start and stop what each rung needs (target,
mock upstream, workers, the embedded stack), runs each rung `repeats` times interleaved (fixed
rate or capacity search), samples the CPU of every process and core each second, and names the
bottleneck. Outputs: per-repeat rung documents, handed to `results`.
"""
