"""pip install m0serve-go: the wheel scripts/wheel builds, installed with pip
--no-index into a fresh virtualenv of the interpreter running these tests
(scripts/test runs them under CPython 3.10, 3.11, 3.12 and 3.13), serves the
Flask and FastAPI examples with the installed command, activated and not,
imports as a package, says its version alike everywhere, and uninstalls
without a trace; and the sdist, built and installed with pip, builds the
binary with the Go toolchain on PATH.

The wheel is built once per run of scripts/test (M0_WHEEL names it), or
here when M0_WHEEL is unset. The examples' own dependencies (Flask,
FastAPI) come from the test virtualenv through a .pth file: the fresh
virtualenv holds m0serve alone, from the wheel."""

import json
import os
import re
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from conftest import EXAMPLES, READY_RE, ROOT, Server

WHEEL_RE = re.compile(r"^m0serve_go-(?P<version>[^-]+)-py3-none-manylinux_(?P<major>\d+)_(?P<minor>\d+)_(?P<arch>x86_64|aarch64)"
                      r"(?:\.manylinux\w+)?\.whl$")
# The one copy of the version, which the wheel's metadata is read from.
VERSION = re.search(r'const Number = "([^"]+)"', (ROOT / "internal" / "version" / "version.go").read_text())[1]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    given = os.environ.get("M0_WHEEL")
    if given:
        return Path(given)
    out = tmp_path_factory.mktemp("dist")
    proc = subprocess.run([str(ROOT / "scripts" / "wheel"), str(out)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return Path(proc.stdout.strip().splitlines()[-1])


def files_under(root):
    return {p.relative_to(root) for p in Path(root).rglob("*") if "__pycache__" not in p.parts}


@pytest.fixture(scope="module")
def venv(tmp_path_factory, wheel):
    """A fresh virtualenv of this interpreter with the wheel installed, and
    the files it had before."""
    root = tmp_path_factory.mktemp("wheelvenv") / "venv"
    base = Path(sys.base_prefix) / "bin" / f"python{sys.version_info.major}.{sys.version_info.minor}"
    subprocess.run([str(base), "-m", "venv", str(root)], check=True, timeout=120)
    before = files_under(root)
    proc = subprocess.run([str(root / "bin" / "pip"), "install", "--no-index", "--disable-pip-version-check", str(wheel)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    purelib = Path(subprocess.run([str(root / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                  capture_output=True, text=True, check=True).stdout.strip())
    pth = purelib / "m0serve-e2e-deps.pth"
    pth.write_text(sysconfig.get_paths()["purelib"] + "\n")
    yield root, before, pth
    pth.unlink(missing_ok=True)


def test_wheel_name_and_tag(wheel):
    """py3-none (one wheel for every CPython 3.10+), its version the
    package's, tagged with the binary's glibc floor, which this machine
    meets."""
    m = WHEEL_RE.match(wheel.name)
    assert m, wheel.name
    assert m["version"] == VERSION, (m["version"], VERSION)
    floor = (int(m["major"]), int(m["minor"]))
    libc = os.confstr("CS_GNU_LIBC_VERSION").split()[1]
    assert floor <= tuple(int(x) for x in libc.split(".")[:2]), f"the wheel wants glibc {floor}, this machine has {libc}"


def test_metadata_says_which_project_this_is(wheel):
    """The PyPI page (the wheel's long description) is python/PYPI.md: how
    to install and run the command, and which of the two m0serve projects
    this is."""
    import zipfile
    with zipfile.ZipFile(wheel) as z:
        [name] = [n for n in z.namelist() if n.endswith(".dist-info/METADATA")]
        metadata = z.read(name).decode()
    head, _, description = metadata.partition("\n\n")
    assert "Name: m0serve-go\n" in head and "Description-Content-Type: text/markdown" in head, head
    assert "Classifier: Operating System :: MacOS" in head, head
    assert description.strip() == (ROOT / "python" / "PYPI.md").read_text().strip()
    assert "pip install m0serve-go" in description and "PyPI's `m0serve` is another project" in description


def test_tag_is_the_binarys_glibc_floor(venv):
    """The tag's glibc is the newest version the installed binary imports,
    as readelf reads it."""
    root, _, _ = venv
    wheel_tag = next(p for p in (root / "lib").rglob("WHEEL") if "m0serve" in str(p)).read_text()
    floor = re.search(r"manylinux_(\d+)_(\d+)_", wheel_tag)
    out = subprocess.run(["readelf", "-V", "--wide", str(root / "bin" / "m0serve")], capture_output=True, text=True, check=True).stdout
    versions = {tuple(map(int, v.split("."))) for v in re.findall(r"Name: GLIBC_(\d+\.\d+(?:\.\d+)?)", out)}
    assert floor and versions, (wheel_tag, out[-2000:])
    assert (int(floor[1]), int(floor[2])) == max(v[:2] for v in versions), (floor.group(0), sorted(versions))


def serve(venv_root, tmp_path, spec, app_dir, activated):
    """The installed m0serve serving spec: by its path with a PATH that has
    no virtualenv on it, or by name with the virtualenv activated."""
    bin_dir = venv_root / "bin"
    if activated:
        env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "VIRTUAL_ENV": str(venv_root)}
    else:
        env = {"PATH": "/usr/bin:/bin", "VIRTUAL_ENV": None}
    env.update({"PYTHONPATH": None, "M0_PYTHON_LIBRARY": None, "MOJO_PYTHON_LIBRARY": None})
    server = Server(spec, tmp_path / ("activated" if activated else "by-path"), app_dir=app_dir,
                    binary=bin_dir / "m0serve", env=env)
    server.start()
    server.wait_ready()
    return server


@pytest.mark.gil  # FastAPI
@pytest.mark.parametrize("activated", [False, True], ids=["by-path", "activated"])
def test_installed_command_serves_flask_and_fastapi(venv, tmp_path, activated):
    root, _, _ = venv
    for spec, app_dir, path, check in [
        ("app:app", EXAMPLES / "flask_app", "/json", lambda r: r.json() == {"hello": "world"}),
        ("main:app", EXAMPLES / "fastapi_app", "/", lambda r: r.json() == {"hello": "world", "lifespan": "lifespan ran"}),
    ]:
        server = serve(root, tmp_path / spec.split(":")[0], spec, app_dir, activated)
        try:
            assert READY_RE.match(server.ready_line), server.ready_line
            r = server.get(path)
            assert r.status_code == 200 and check(r), (r.status_code, r.text)
            # The interpreter is the virtualenv's, found beside the command.
            doctor = subprocess.run([str(root / "bin" / "m0serve"), "--doctor", "--app-dir", str(app_dir), spec],
                                    env=server.env, capture_output=True, text=True, timeout=120)
            report = json.loads(doctor.stdout.strip().splitlines()[-1])
            assert report["python"]["virtualenv"] == str(root), report["python"]
            assert report["python"]["version"].startswith(f"{sys.version_info.major}.{sys.version_info.minor}.")
        finally:
            server.stop()


def test_package_imports(venv):
    """From the wheel's own files in the fresh virtualenv, not from the
    test virtualenv the .pth reaches."""
    root, _, _ = venv
    proc = subprocess.run([str(root / "bin" / "python"), "-I", "-c",
                           "from m0serve import m0pub, grant; import m0serve, sysconfig; "
                           "print(m0serve.__file__); print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    where, purelib = proc.stdout.split()
    assert Path(where).parent == Path(purelib) / "m0serve", (where, purelib)


def test_the_version_is_the_same_everywhere(venv):
    """The wheel's, the binary's (--version and -V), the doctor's and the
    package's: the one in internal/version."""
    root, _, _ = venv
    binary = str(root / "bin" / "m0serve")
    for flag in ("--version", "-V"):
        proc = subprocess.run([binary, flag], capture_output=True, text=True, timeout=30)
        assert proc.returncode == 0 and proc.stderr == "", (flag, proc.returncode, proc.stderr)
        m = re.fullmatch(r"m0serve (\S+) \(m0serve-go, commit (\S+), (go1\.\S+), (linux/(?:amd64|arm64))\)\n", proc.stdout)
        assert m and m[1] == VERSION and m[2] != "unknown", proc.stdout
    doctor = subprocess.run([binary, "--doctor"], capture_output=True, text=True, timeout=60,
                            env={"PATH": f"{root / 'bin'}:/usr/bin:/bin"})
    build = json.loads(doctor.stdout.strip().splitlines()[-1])["build"]
    assert build["version"] == VERSION and build["distribution"] == "m0serve-go", build
    assert build["commit"] == m[2] and build["go"] == m[3] and build["platform"] == m[4], (build, proc.stdout)
    pkg = subprocess.run([str(root / "bin" / "python"), "-I", "-c", "import m0serve; print(m0serve.__version__)"],
                         capture_output=True, text=True, timeout=60)
    assert pkg.stdout.strip() == VERSION, pkg.stdout + pkg.stderr


def test_uninstall_leaves_nothing(venv):
    root, before, pth = venv
    pth.unlink()
    proc = subprocess.run([str(root / "bin" / "pip"), "uninstall", "-y", "--disable-pip-version-check", "m0serve-go"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    left = files_under(root) - before
    assert not left, sorted(map(str, left))
    assert not (root / "bin" / "m0serve").exists()


@pytest.mark.once
def test_the_sdist_builds_and_serves(tmp_path):
    """The sdist (what scripts/wheel --all publishes beside the wheels:
    that one when M0_SDIST names it, as scripts/test --foreign does, else
    one built here), installed with pip into a fresh virtualenv: its build
    hook builds the binary with the Go toolchain on PATH, stamped with the
    commit the sdist was made from; the binary serves. twine's metadata
    check is scripts/wheel --all's."""
    given = os.environ.get("M0_SDIST")
    if given:
        sdist = Path(given)
    else:
        out = tmp_path / "sdist"
        proc = subprocess.run([sys.executable, "-m", "hatchling", "build", "--target", "sdist", "--directory", str(out)],
                              cwd=ROOT, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        [sdist] = out.glob("m0serve_go-*.tar.gz")
    assert sdist.name == f"m0serve_go-{VERSION}.tar.gz", sdist.name
    import tarfile
    with tarfile.open(sdist) as t:
        names = {n.split("/", 1)[1] for n in t.getnames() if "/" in n}
        commit = t.extractfile(f"m0serve_go-{VERSION}/COMMIT").read().decode().strip()
    assert {"go.mod", "go.sum", "cmd/m0serve/main.go", "internal/cpython/m0py.c", "python/m0serve/m0pub.py",
            "scripts/hatch_build.py", "scripts/glibcfloor/main.go", "pyproject.toml"} <= names, sorted(names)
    assert not [n for n in names if n.endswith("_test.go") or "/testdata/" in n], "tests in the sdist"
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    assert commit.removesuffix("-dirty") == head[:12], (commit, head)
    root = tmp_path / "venv"
    base = Path(sys.base_prefix) / "bin" / f"python{sys.version_info.major}.{sys.version_info.minor}"
    subprocess.run([str(base), "-m", "venv", str(root)], check=True, timeout=120)
    # Not from the checkout: pip unpacks the sdist and builds there (no .git).
    proc = subprocess.run([str(root / "bin" / "pip"), "install", "--disable-pip-version-check", str(sdist)],
                          capture_output=True, text=True, timeout=900, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    version = subprocess.run([str(root / "bin" / "m0serve"), "--version"], capture_output=True, text=True, timeout=30)
    assert version.stdout.startswith(f"m0serve {VERSION} (m0serve-go, commit {commit}, "), version.stdout
    pth = Path(subprocess.run([str(root / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                              capture_output=True, text=True, check=True).stdout.strip()) / "m0serve-e2e-deps.pth"
    pth.write_text(sysconfig.get_paths()["purelib"] + "\n")
    server = serve(root, tmp_path, "app:app", EXAMPLES / "flask_app", activated=False)
    try:
        r = server.get("/json")
        assert r.status_code == 200 and r.json() == {"hello": "world"}, (r.status_code, r.text)
    finally:
        server.stop()
