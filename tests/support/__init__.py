"""The suite's own helpers: waiting, the app in process, `tenk serve` processes, the worker fixture. The
stack and the credentials, which the benchmarks share, are in harness/. Conftests only declare fixtures."""
