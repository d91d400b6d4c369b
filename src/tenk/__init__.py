"""tenk: an async Python API stack built for ten thousand requests per second, and the lab that proves it."""

__version__ = "0.1.0"
