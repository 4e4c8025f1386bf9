"""Free-threaded CPython (docs/running.md#free-threaded-cpython).

On a free-threaded build (the suite's interpreter is python3.13t) the pool's
threads run the application at once, --threads N is accepted, an ASGI
application is refused with 78, and an extension module that turns the GIL
back on is named in one line and in the doctor. On a GIL build the same
tests check the other side of each rule: one thread at a time, --threads
above 1 refused."""

import json
import os
import shutil
import subprocess
import sysconfig
import textwrap
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests

from conftest import APPS, EXAMPLES, FREE_THREADED, HTTP_TIMEOUT, M0SERVE, ROOT, free_port

CPU_BOUND = ROOT / "bench" / "apps"  # cpu_bound.py: the benchmark's CPU-bound view
ft_only = pytest.mark.skipif(not FREE_THREADED, reason="needs a free-threaded CPython (python3.13t)")


def doctor(tmp_path, *args, env=None):
    out = subprocess.run([str(M0SERVE), "--doctor", "--app-dir", str(APPS), *args], cwd=tmp_path,
                         capture_output=True, text=True, timeout=60, env=env)
    return out.returncode, json.loads(out.stdout.strip().splitlines()[-1]), out.stderr


def check(report, name):
    return next((c for c in report["checks"] if c["name"] == name), None)


def work(n, seed):
    """The oracle: cpu_bound.py's recurrence, written again here so that a
    wrong answer from the server cannot also be the expected one."""
    x = seed
    for _ in range(n):
        x = (x * 1103515245 + 12345) & 0x7FFFFFFF
    return x


def test_the_doctor_says_which_build(tmp_path):
    code, report, _ = doctor(tmp_path, "ft_app:application")
    assert code == 0, report["checks"]
    assert report["python"]["free_threaded"] is FREE_THREADED
    assert report["python"]["gil_disabled"] is FREE_THREADED
    if FREE_THREADED:
        assert report["python"]["gil_enabled"] is False
        assert report["python"]["gil_enabled_by"] is None
        gil = check(report, "gil")
        assert gil == {"name": "gil", "ok": True}, gil
        assert report["declares"]["max_threads"] == 0
    else:
        assert "gil_enabled" not in report["python"]
        assert check(report, "gil") is None
        assert report["declares"]["max_threads"] == 1


def test_two_requests_run_python_at_once(serve):
    # The application sets a switch interval of 1000 s: on a GIL build a
    # thread spinning in pure Python keeps the GIL, so the two sides of the
    # rendezvous cannot both see the other; on a free-threaded build they do.
    server = serve("ft_app:application", blocking_threads=2)
    assert server.get_json("/gil")["gil_enabled"] is (not FREE_THREADED)
    within = 10 if FREE_THREADED else 2
    with ThreadPoolExecutor(2) as pool:
        a = pool.submit(server.get_json, f"/meet?side=a&within={within}", timeout=within + 10)
        time.sleep(0.2)
        b = pool.submit(server.get_json, f"/meet?side=b&within={within}", timeout=within + 10)
        met = [a.result()["met"], b.result()["met"]]
    if FREE_THREADED:
        assert met == [True, True]
    else:
        assert met.count(False) == 1, met  # the first spun alone until its deadline


@ft_only
def test_parallel_answers_are_not_mixed_up(serve):
    # Many requests at once on every thread, each answer computed from its
    # own query: a request whose environ, body or headers crossed another's
    # would answer another seed or a wrong value.
    server = serve("cpu_bound:application", app_dir=CPU_BOUND, blocking_threads=4)
    session = requests.Session()

    def one(seed):
        n = 2000 + seed % 7 * 500
        r = session.get(server.url(f"/?n={n}&seed={seed}"), timeout=30)
        assert r.status_code == 200
        return seed, n, r.text

    with ThreadPoolExecutor(16) as pool:
        results = list(pool.map(one, range(400)))
    for seed, n, got in results:
        assert got == f"{work(n, seed)}\n", (seed, n)


@ft_only
def test_threads_run_loops_each_with_a_pool(serve):
    server = serve("cpu_bound:application", app_dir=CPU_BOUND, args=("--threads", "2"), blocking_threads=2)
    assert "threads=2" in server.ready_line
    with ThreadPoolExecutor(8) as pool:
        got = list(pool.map(lambda s: server.get(f"/?n=1000&seed={s}").text, range(64)))
    assert got == [f"{work(1000, s)}\n" for s in range(64)]


def test_threads_above_one_needs_a_free_threaded_build(tmp_path):
    code, report, _ = doctor(tmp_path, "--threads", "2", "ft_app:application")
    if FREE_THREADED:
        assert code == 0, report["checks"]
        assert report["config"]["threads"]["value"] == "2"
    else:
        assert code == 78
        failed = check(report, "max-threads")
        assert "free-threaded CPython" in failed["detail"], failed


@ft_only
def test_an_asgi_application_is_refused(tmp_path):
    out = subprocess.run([str(M0SERVE), "--app-dir", str(APPS), "--port", str(free_port()), "asgi_raw:application"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 78, out
    line = out.stderr.strip().splitlines()[-1]
    assert "is an ASGI application" in line and "free-threaded build" in line, line
    assert "python3.13, not python3.13t" in line and ".python-version" in line, line
    code, report, _ = doctor(tmp_path, "asgi_raw:application")
    assert code == 78
    assert check(report, "free-threaded")["exit"] == 78


@ft_only
def test_an_asgi_mount_is_refused(tmp_path):
    code, report, _ = doctor(tmp_path, "--mount", "/api=asgi_raw:application", "ft_app:application")
    assert code == 78
    assert "is an ASGI application" in check(report, "free-threaded")["detail"]


NOGIL_C = textwrap.dedent("""
    #define PY_SSIZE_T_CLEAN
    #include <Python.h>
    /* Single-phase initialisation and no Py_mod_gil: importing it turns the
     * GIL back on. */
    static struct PyModuleDef def = {PyModuleDef_HEAD_INIT, "m0_needs_gil", NULL, -1, NULL};
    PyMODINIT_FUNC PyInit_m0_needs_gil(void) { return PyModule_Create(&def); }
""")


CONSTANTS_APP = """
import json
import sys


def immortal(obj):
    is_immortal = getattr(sys, "_is_immortal", None)  # 3.14
    return is_immortal(obj) if is_immortal else sys.getrefcount(obj) >= 2**30


def step(x):
    return (x * 1103515245 + 12345) & 0x7FFFFFFF


def outer():
    def inner(x):
        return x * 2718281828
    return inner


def const(code, value):
    # By value: where a constant sits in co_consts changes between versions.
    return next(c for c in code.co_consts if c == value)


def application(environ, start_response):
    body = json.dumps({
        "function": immortal(const(step.__code__, 1103515245)),
        "nested": immortal(const(outer().__code__, 2718281828)),
        "compiled_here": immortal(const(compile("y = 3141592653", "<here>", "exec"), 3141592653)),
    }).encode()
    start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
    return [body]
"""


def test_a_module_without_a_pyc_gets_immortal_constants(tmp_path, serve):
    # CPython 3.13t immortalizes a code object's constants, but not under
    # compile(), which importlib uses for a module with no .pyc: every
    # thread running its code then writes to the constants' reference
    # counts, and a CPU-bound view stops scaling with threads. m0serve loads
    # such a module as if from a .pyc (internal/cpython/bootstrap.py,
    # _immortal_constants). A GIL build's large ints are not immortal either
    # way; an explicit compile() in the application is left as CPython does it.
    app_dir = tmp_path / "app"
    app_dir.mkdir()
    (app_dir / "consts.py").write_text(CONSTANTS_APP)
    server = serve("consts:application", app_dir=app_dir, env={"PYTHONDONTWRITEBYTECODE": "1"})
    assert not (app_dir / "__pycache__").exists()
    got = server.get_json("/")
    assert got == {"function": FREE_THREADED, "nested": FREE_THREADED, "compiled_here": False}, got


@ft_only
def test_a_module_that_turns_the_gil_on_is_named(tmp_path, serve):
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        pytest.fail("no C compiler on PATH (scripts/test installs gcc)")
    app_dir = tmp_path / "app"
    app_dir.mkdir()
    (app_dir / "m0_needs_gil.c").write_text(NOGIL_C)
    ext = app_dir / ("m0_needs_gil" + sysconfig.get_config_var("EXT_SUFFIX"))
    subprocess.run([cc, "-shared", "-fPIC", "-O0", "-I", sysconfig.get_paths()["include"],
                    str(app_dir / "m0_needs_gil.c"), "-o", str(ext)], check=True)
    (app_dir / "gilapp.py").write_text(textwrap.dedent("""
        import sys
        import warnings
        import m0_needs_gil
        warnings.warn("the application's own warning", UserWarning)

        def application(environ, start_response):
            body = repr(sys._is_gil_enabled()).encode()
            start_response("200 OK", [("Content-Length", str(len(body)))])
            return [body]
    """))
    code, report, stderr = doctor(tmp_path, "--app-dir", str(app_dir), "gilapp:application")
    assert code == 0, report["checks"]
    assert report["python"]["gil_enabled"] is True
    assert report["python"]["gil_enabled_by"] == "m0_needs_gil"
    gil = check(report, "gil")
    assert gil["ok"] is True and "importing m0_needs_gil turned it back on" in gil["warning"], gil
    assert "the application's own warning" in stderr  # other warnings still shown

    server = serve("gilapp:application", app_dir=app_dir)
    assert server.get("/").text == "True"
    lines = [line for line in server.stderr.splitlines() if "turned it back on" in line]
    assert len(lines) == 1 and lines[0].startswith("m0serve: the GIL is on: importing m0_needs_gil"), server.stderr
    assert "PYTHON_GIL=0" in lines[0]

    # PYTHON_GIL=0 keeps it off, as CPython documents: no line, no warning.
    code, report, _ = doctor(tmp_path, "--app-dir", str(app_dir), "gilapp:application",
                             env={**os.environ, "PYTHON_GIL": "0"})
    assert code == 0
    assert report["python"]["gil_enabled"] is False
    assert "warning" not in check(report, "gil")


def seq(fid):
    return int(fid.rsplit("-", 1)[1])


def test_publishes_from_many_threads_at_once_keep_order_and_lose_nothing(serve):
    # Four views at once, each publishing from four Python threads at once
    # (sixteen publishers; in parallel on a free-threaded build): every id is
    # unique and rises in each thread's order, and a stream that resumes
    # from before the first replays every frame, in id order, each
    # thread's frames in the order it published them.
    from test_realtime import SSE

    server = serve("realtime_app:application", args=("--realtime", "--replay-frames", "4096"), blocking_threads=4)
    first = server.post("/publish?c=burst", data=b"start").json()["id"]
    with ThreadPoolExecutor(4) as pool:
        bursts = list(pool.map(lambda _: server.get_json("/publish-burst?c=burst&threads=4&n=150", timeout=60), range(4)))
    ids = {}
    for v, threads in enumerate(bursts):
        for t, got in enumerate(threads):
            assert len(got) == 150 and all(isinstance(i, str) for i in got), got[:3]
            assert [seq(i) for i in got] == sorted(seq(i) for i in got), (v, t)
            for i, fid in enumerate(got):
                ids[fid] = f"{t}.{i}".encode(), v
    assert len(ids) == 4 * 4 * 150
    s = SSE(server, "/hold?c=burst", last_id=first)
    seen = [s.event(timeout=10) for _ in range(len(ids))]
    assert [seq(e["id"]) for e in seen] == sorted(seq(i) for i in ids)
    last = {}
    for e in seen:
        data, view = ids[e["id"]]
        assert e["data"] == data
        t, i = map(int, data.split(b"."))
        assert last.get((view, t), -1) == i - 1
        last[(view, t)] = i


def test_flask_answers_under_parallel_load_are_each_their_own(serve):
    # The Flask example on every pool thread at once: each request's body,
    # query and header come back in its own answer, never another's.
    server = serve("app:app", app_dir=EXAMPLES / "flask_app", blocking_threads=4)

    def one(i):
        with requests.Session() as s:
            body = (f"body {i} " * (1 + i % 50)).encode()
            r = s.post(server.url("/echo"), data=body, headers={"Content-Type": f"text/x-{i}"}, timeout=30)
            assert (r.status_code, r.content, r.headers["Content-Type"]) == (200, body, f"text/x-{i}")
            h = s.get(server.url(f"/headers?n={i}"), headers={"X-Request": str(i)}, timeout=30).json()
            assert (h["query"], h["X-Request"], h["path"]) == (f"n={i}", str(i), "/headers"), h
        return i

    with ThreadPoolExecutor(16) as pool:
        assert sorted(pool.map(one, range(300))) == list(range(300))


def test_django_writes_under_parallel_load_are_each_kept_once(django_server):
    # Guestbook entries signed from eight clients at once, each through its
    # own session and CSRF token: every one is stored once, as written.
    from test_django import csrf_token

    tag = f"ft-{time.monotonic_ns()}"

    def sign(i):
        with requests.Session() as s:
            page = s.get(django_server.url("/"), timeout=HTTP_TIMEOUT)
            r = s.post(django_server.url("/"), timeout=HTTP_TIMEOUT, allow_redirects=False, data={
                "csrfmiddlewaretoken": csrf_token(page.text), "name": f"n{i}", "message": f"{tag} {i}"})
            assert r.status_code == 302, r.text[:500]

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(sign, range(80)))
    entries = django_server.get_json("/entries.json")
    mine = sorted((e["name"], e["message"]) for e in entries if e["message"].startswith(tag + " "))
    assert mine == sorted((f"n{i}", f"{tag} {i}") for i in range(80))
