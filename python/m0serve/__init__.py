"""The Python side of m0serve: publishing to its realtime channels, and
signing stream URLs for its hold mounts.

Installed from PyPI as ``m0serve-go`` (the wheel carries the m0serve
command too). ``__version__`` is the installed distribution's: the one copy
of the version is the Go constant the command prints (``m0serve --version``).
"""

from importlib.metadata import PackageNotFoundError, version

from . import grant, m0pub

__all__ = ["grant", "m0pub", "__version__"]

#: The distribution this package is installed from: the wheel with the
#: command. ``pip install ./python`` installs the package alone, as
#: ``m0serve-go-nocommand``, never published.
DISTRIBUTION = "m0serve-go"
_ALONE = "m0serve-go-nocommand"


def _version() -> str:
    for name in (DISTRIBUTION, _ALONE):
        try:
            return version(name)
        except PackageNotFoundError:
            continue
    return "0+unknown"  # imported from a source tree, not installed


__version__ = _version()
