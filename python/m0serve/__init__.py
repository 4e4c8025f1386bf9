"""The Python side of m0serve: publishing to its realtime channels, and
signing stream URLs for its hold mounts."""

from . import grant, m0pub

__all__ = ["grant", "m0pub"]
__version__ = "0.1.0"
