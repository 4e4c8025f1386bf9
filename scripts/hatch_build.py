"""The wheel's build hook: builds the m0serve binary with the Go toolchain,
puts it in the wheel's scripts (pip installs it as bin/m0serve), and tags
the wheel for the platform the binary runs on: py3-none-manylinux_X_Y_ARCH,
where glibc X.Y is the oldest the binary runs on (scripts/glibcfloor). One
wheel serves every CPython 3.10 and newer: the binary loads libpython when
it starts.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface


class GoBinary(BuildHookInterface):  # type: ignore[type-arg]
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        go = os.environ.get("GO") or shutil.which("go")
        if go is None:
            raise RuntimeError(
                "building the m0serve wheel needs the Go toolchain (go 1.26 or newer, https://go.dev/dl/) "
                "on PATH, or GO naming it; a C compiler too (cgo)"
            )
        root = Path(self.root)
        out = root / "build" / "m0serve-wheel"
        out.mkdir(parents=True, exist_ok=True)
        binary = out / "m0serve"
        env = dict(os.environ, CGO_ENABLED="1")
        subprocess.run(
            [go, "build", "-trimpath", "-ldflags=-s -w", "-o", str(binary), "./cmd/m0serve"],
            cwd=root, env=env, check=True,
        )
        tag = subprocess.run(
            [go, "run", "./scripts/glibcfloor", str(binary)],
            cwd=root, env=env, check=True, capture_output=True, text=True,
        ).stdout.strip()
        build_data["tag"] = f"py3-none-{tag}"
        build_data["pure_python"] = False
        build_data["shared_scripts"][str(binary)] = "m0serve"
