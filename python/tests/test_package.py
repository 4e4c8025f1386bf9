"""The package as python/ installs it: under a name of its own, so that
``pip install m0serve-go`` afterwards installs the command, and with the
version the command prints."""

from __future__ import annotations

import re
from importlib.metadata import version
from pathlib import Path

import m0serve

ROOT = Path(__file__).resolve().parents[2]


def test_installed_alone_under_a_name_of_its_own() -> None:
    source = (ROOT / "internal" / "version" / "version.go").read_text()
    m = re.search(r'const Number = "([^"]+)"', source)
    assert m, "no version constant in internal/version/version.go"
    assert version("m0serve-go-nocommand") == m.group(1)
    assert m0serve.__version__ == m.group(1)
