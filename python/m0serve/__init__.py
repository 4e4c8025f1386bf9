"""The Python side of m0serve: publishing to its realtime channels."""

from . import m0pub

__all__ = ["m0pub"]
__version__ = "0.1.0"
