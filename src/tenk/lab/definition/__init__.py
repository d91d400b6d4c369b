"""Definition: what a run is asked to measure.

Inputs: ladder TOML files (`[defaults]`, `[[rung]]`, `[[claim]]`, `repeats`) and mix TOML files
(weighted endpoints, variables), built-in (`tenk/lab/mixes/`) or the user's. Outputs: a checked
`Ladder` (every rung expanded to its full `RungConfig`, with its one change against the previous
rung) and `Mix` objects. Every error names the file, the line and the key (`_tomlpos`).
"""
