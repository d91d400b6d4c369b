"""tenk-doctor's own release, read from its installed metadata: doctor installs without the service, so it
cannot take the service's `tenk.__version__`."""

from importlib.metadata import version

__version__ = version("tenk-doctor")
