"""An application written for the other m0serve (PyPI's ``m0serve``, the
original implementation of this design) runs here unchanged: every call of
its ``m0pub`` and ``grant`` binds the same arguments here, and the calls an
application makes answer alike outside a server (where both send nothing).

Its wheel is downloaded once into build/other-m0serve, and its two modules,
stdlib-only, are read from it as the contract; its server is not run."""

from __future__ import annotations

import importlib.util
import inspect
import subprocess
import sys
import types
import warnings
import zipfile
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from m0serve import grant, m0pub

OTHER = "m0serve==1.16.0"
CACHE = Path(__file__).resolve().parents[2] / "build" / "other-m0serve"

# Their grant's token format: a bare token for their hold mount's ?g=
# parameter, and the pieces it is made of. This server's stream URL signs
# the mount's prefix too, so a token without one has no counterpart;
# stream_url, the call both have, is what an application renders.
NOT_HERE = {("grant", "issue"), ("grant", "key_id"), ("grant", "session_binding"), ("grant", "load_key")}


def _load(wheel: Path, name: str) -> types.ModuleType:
    with zipfile.ZipFile(wheel) as z:
        source = z.read(f"m0serve/{name}.py").decode()
    spec = importlib.util.spec_from_loader(f"other_{name}", loader=None)
    assert spec is not None
    mod = importlib.util.module_from_spec(spec)
    exec(compile(source, f"{wheel.name}/m0serve/{name}.py", "exec"), mod.__dict__)
    return mod


@pytest.fixture(scope="module")
def other() -> dict[str, types.ModuleType]:
    wheels = sorted(CACHE.glob("m0serve-1.16.0-*.whl"))
    if not wheels:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary", ":all:",
             "--platform", "manylinux_2_35_x86_64", "--dest", str(CACHE), OTHER],
            check=True, timeout=300,
        )
        wheels = sorted(CACHE.glob("m0serve-1.16.0-*.whl"))
    assert wheels, f"pip downloaded no {OTHER} wheel into {CACHE}"
    return {"m0pub": _load(wheels[0], "m0pub"), "grant": _load(wheels[0], "grant")}


@pytest.fixture
def outside(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A process no server started: none of either server's variables."""
    for name in ("M0_BUS", "M0_BUS_WRITE_FDS", "M0_BUS_WRITE_IDS", "M0_SHARED_ID_ADDR", "M0_SHARED_ID_FD",
                 "M0_CORE_LIB", "M0_GRANT_KEY", "M0_GRANT_KEY_PREV"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delitem(sys.modules, "_m0", raising=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # ours says once that nothing was sent
        yield


def public_functions(mod: types.ModuleType) -> dict[str, Callable[..., Any]]:
    return {n: f for n, f in vars(mod).items()
            if not n.startswith("_") and inspect.isfunction(f) and f.__module__ == mod.__name__}


@pytest.mark.parametrize("module", ["m0pub", "grant"])
def test_every_call_of_theirs_binds_here(other: dict[str, types.ModuleType], module: str) -> None:
    ours = {"m0pub": m0pub, "grant": grant}[module]
    theirs = public_functions(other[module])
    assert theirs, f"no public functions read from their {module}"
    for name, fn in theirs.items():
        if (module, name) in NOT_HERE:
            assert not hasattr(ours, name), f"{module}.{name} is here after all: take it off NOT_HERE"
            continue
        assert hasattr(ours, name), f"their {module}.{name} has no counterpart here"
        mine = inspect.signature(getattr(ours, name)).parameters
        positional = [p for p in mine.values() if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        for i, p in enumerate(inspect.signature(fn).parameters.values()):
            if p.kind is p.VAR_KEYWORD:
                continue  # their stream_url forwards **kwargs to issue: checked below by name
            assert p.name in mine, f"{module}.{name}: their parameter {p.name} is not here"
            if p.kind is p.POSITIONAL_OR_KEYWORD:
                assert i < len(positional) and positional[i].name == p.name, \
                    f"{module}.{name}: {p.name} is their positional parameter {i}, not ours"
            if p.default is not p.empty:
                assert mine[p.name].default is not p.empty, f"{module}.{name}: {p.name} is optional there"
    # Their stream_url(prefix, channel, **kwargs) takes issue's keywords.
    for p in inspect.signature(other["grant"].issue).parameters.values():
        if p.kind is p.KEYWORD_ONLY:
            assert p.name in inspect.signature(grant.stream_url).parameters, p.name


def test_the_same_calls_answer_alike_outside_a_server(other: dict[str, types.ModuleType], outside: None) -> None:
    """Neither raises; both send nothing and say so with a falsy answer."""
    for mod in (other["m0pub"], m0pub):
        assert not mod.publish("room", "hello")
        assert not mod.publish("room", "hello", event="greeting")
        assert not mod.publish("room", "hello", None)
        assert not mod.publish_with_id("room", "hello", event="greeting")[0]
        assert not mod.publish_frame("room", mod.sse_event("hello", event="greeting"))
        assert mod.child_fds() == [] and mod.bus_write_fds() == []
        assert mod.next_event_id() == mod.NO_EVENT_ID == -1
        statement, params = mod.notify_sql("news", "hello", event="greeting")
        assert isinstance(statement, str) and statement.count("%s") == len(params)
    cases: list[tuple[str, Any, Any]] = [("hello", None, -1), ("two\nlines", "update", 7), ("", None, -1)]
    for data, event, event_id in cases:
        assert m0pub.sse_event(data, event, event_id) == other["m0pub"].sse_event(data, event, event_id)


def test_the_same_grant_calls_sign_alike(other: dict[str, types.ModuleType], outside: None,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    key = b"k" * 32
    for mod in (other["grant"], grant):
        for kwargs in [{}, {"session": "abc123"}, {"session": b"abc123"}, {"session": None, "ttl": 3600},
                       {"session": "abc123", "ttl": -5}, {"now": 1_700_000_000.0}]:
            url = mod.stream_url("/live", "room", key=key, **kwargs)
            assert isinstance(url, str) and url.startswith("/live") and "room" in url, (mod.__name__, url)
        # A channel both refuse, and no key: the same exception class catches both.
        with pytest.raises(mod.GrantError):
            mod.stream_url("/live", "\x01bad", key=key)
        with pytest.raises(mod.GrantError):
            mod.stream_url("/live", "room")
        monkeypatch.setenv("M0_GRANT_KEY", key.decode())
        assert mod.stream_url("/live", "room", session="abc123").startswith("/live")
        monkeypatch.delenv("M0_GRANT_KEY")
