"""The build hook of the m0serve-go wheel and sdist.

The wheel: builds the m0serve binary with the Go toolchain, puts it in the
wheel's scripts (pip installs it as bin/m0serve), and tags the wheel for
the platform the binary runs on, py3-none-manylinux_X_Y_ARCH, where glibc
X.Y is the oldest the binary runs on, read from its versioned imports, or
py3-none-macosx_X_Y_ARCH for a macOS binary, X.Y its minimum macOS
(scripts/glibcfloor). One wheel serves every CPython 3.10 and newer: the
binary loads libpython when it starts. m0 is built for Linux and macOS
(docs/running.md, "Platforms").

The build is the host's (the Go toolchain and C compiler on PATH) unless the
environment says otherwise: GOOS, GOARCH, CC (and cgo's flags), as
scripts/wheel --all sets them to cross-build with `zig cc` against an old
glibc and for macOS.

The binary is stamped with the commit it is built from: the checkout's
(git), or, built from an sdist, the one the sdist recorded in COMMIT.

The sdist: the Go sources and this hook, and COMMIT.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

VERSION_PACKAGE = "github.com/m0serve/m0/internal/version"


def _commit(root: Path) -> str:
    """The commit of the checkout at root (12 hex digits, -dirty when it has
    uncommitted changes to tracked files), else the sdist's COMMIT, else ""."""
    git = shutil.which("git")
    if git and (root / ".git").exists():
        head = subprocess.run([git, "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True)
        if head.returncode == 0:
            rev = head.stdout.strip()[:12]
            dirty = subprocess.run([git, "status", "--porcelain", "--untracked-files=no"], cwd=root,
                                   capture_output=True, text=True)
            return rev + ("-dirty" if dirty.returncode == 0 and dirty.stdout.strip() else "")
    recorded = root / "COMMIT"
    if recorded.is_file():
        return recorded.read_text().strip()
    return ""


class GoBinary(BuildHookInterface):  # type: ignore[type-arg]
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        root = Path(self.root)
        if self.target_name == "sdist":
            commit = _commit(root)
            if commit:
                out = root / "build" / "m0serve-sdist"
                out.mkdir(parents=True, exist_ok=True)
                (out / "COMMIT").write_text(commit + "\n")
                build_data["force_include"][str(out / "COMMIT")] = "COMMIT"
            return
        go = os.environ.get("GO") or shutil.which("go")
        if go is None:
            raise RuntimeError(
                "building the m0serve wheel needs the Go toolchain (go 1.26 or newer, https://go.dev/dl/) "
                "on PATH, or GO naming it; a C compiler too (cgo)"
            )
        goos = os.environ.get("GOOS") or subprocess.run(
            [go, "env", "GOOS"], check=True, capture_output=True, text=True).stdout.strip()
        if goos not in ("linux", "darwin"):
            raise RuntimeError(
                f"m0serve builds for Linux and macOS, not GOOS={goos} (docs/running.md, Platforms)"
            )
        out = root / "build" / "m0serve-wheel"
        out.mkdir(parents=True, exist_ok=True)
        binary = out / "m0serve"
        env = dict(os.environ, CGO_ENABLED="1")
        ldflags = "-s -w"
        commit = _commit(root)
        if commit:
            ldflags += f" -X {VERSION_PACKAGE}.commit={commit}"
        subprocess.run(
            [go, "build", "-trimpath", "-buildvcs=false", f"-ldflags={ldflags}", "-o", str(binary), "./cmd/m0serve"],
            cwd=root, env=env, check=True,
        )
        host = {k: v for k, v in env.items()
                if k not in ("GOOS", "GOARCH", "CC", "CGO_ENABLED", "CGO_CFLAGS", "CGO_LDFLAGS")}
        tag = subprocess.run(
            [go, "run", "./scripts/glibcfloor", str(binary)],
            cwd=root, env=host, check=True, capture_output=True, text=True,
        ).stdout.strip()
        build_data["tag"] = f"py3-none-{tag}"
        build_data["pure_python"] = False
        build_data["shared_scripts"][str(binary)] = "m0serve"
