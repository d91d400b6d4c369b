"""tenk: an async Python API stack built for ten thousand requests per second, and the lab that proves it.

`tenk` spans distributions: this one (the service) and tenk-doctor (`tenk.doctor`, which installs alone and ships
no `tenk/__init__.py`). Installed side by side in one site-packages they share one directory; installed apart
(the editable dev workspace: each member's own src on sys.path) `extend_path` adds the other portions of
`tenk` to this package's path, so `import tenk.doctor` finds packages/tenk-doctor/src/tenk/doctor."""

from pkgutil import extend_path

__path__ = extend_path(__path__, __name__)

__version__ = "0.1.0"
