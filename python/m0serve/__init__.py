"""The Python side of m0serve: publishing to its realtime channels, and
signing stream URLs for its hold mounts.

Installed from PyPI as ``m0serve-go`` (the wheel carries the m0serve
command too). ``__version__`` is the installed distribution's: the one copy
of the version is the Go constant the command prints (``m0serve --version``).
"""

from importlib.metadata import PackageNotFoundError, version

from . import grant, m0pub

__all__ = ["grant", "m0pub", "__version__"]

#: The distribution this package is installed from.
DISTRIBUTION = "m0serve-go"

try:
    __version__ = version(DISTRIBUTION)
except PackageNotFoundError:  # imported from a source tree, not installed
    __version__ = "0+unknown"
