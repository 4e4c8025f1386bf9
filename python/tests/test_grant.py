"""m0serve.grant signs as the committed vectors say (Go is held to the same
file, realtime/testdata/grants.json)."""

from __future__ import annotations

import json
import pathlib
from typing import Any

import pytest

from m0serve import grant

VECTORS = pathlib.Path(__file__).resolve().parents[2] / "realtime" / "testdata" / "grants.json"


def vectors() -> list[dict[str, Any]]:
    data: dict[str, Any] = json.loads(VECTORS.read_text(encoding="utf-8"))
    out: list[dict[str, Any]] = data["vectors"]
    return out


@pytest.mark.parametrize("v", vectors(), ids=lambda v: f"{v['prefix']}-{v['channel']}-{v['bound']}")
def test_vectors(v: dict[str, Any]) -> None:
    ttl = 100
    url = grant.stream_url(
        v["prefix"],
        v["channel"],
        session=v["session"] if v["bound"] else None,
        ttl=ttl,
        key=v["key"],
        now=v["exp"] - ttl,
    )
    assert url == f"{v['prefix']}?{v['query']}"


def test_key_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    v = vectors()[0]
    monkeypatch.setenv("M0_GRANT_KEY", v["key"])
    assert grant.stream_url(v["prefix"], v["channel"], ttl=1, now=v["exp"] - 1) == f"{v['prefix']}?{v['query']}"


def test_no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("M0_GRANT_KEY", raising=False)
    with pytest.raises(grant.NoGrantKey, match="M0_GRANT_KEY"):
        grant.stream_url("/live", "room")
    with pytest.raises(grant.NoGrantKey, match="has 5"):
        grant.stream_url("/live", "room", key="short")


@pytest.mark.parametrize(
    "args,kwargs",
    [
        (("live", "room"), {}),
        (("/live", ""), {}),
        (("/live", "\x01x"), {}),
        (("/live", "room"), {"ttl": True}),
        (("/live", "room"), {"ttl": "60"}),
        (("/live", "x" * 1025), {}),
    ],
)
def test_refusals(args: tuple[str, str], kwargs: dict[str, Any]) -> None:
    with pytest.raises(grant.GrantError):
        grant.stream_url(*args, key="k" * 32, **kwargs)


def test_refusals_are_value_errors_and_no_key_a_runtime_error_too() -> None:
    assert issubclass(grant.GrantError, ValueError)
    assert issubclass(grant.NoGrantKey, grant.GrantError) and issubclass(grant.NoGrantKey, RuntimeError)


def test_what_the_other_implementation_takes() -> None:
    """A session as bytes signs as the same str does; an empty session binds
    to an empty cookie; a ttl of zero or less signs a grant already expired."""
    v = vectors()[0]
    bound = next(x for x in vectors() if x["bound"])
    as_bytes = grant.stream_url(bound["prefix"], bound["channel"], session=bound["session"].encode(), ttl=100,
                                key=bound["key"].encode(), now=bound["exp"] - 100)
    assert as_bytes == f"{bound['prefix']}?{bound['query']}"
    assert "ses=1" in grant.stream_url("/live", "room", session="", key="k" * 32)
    expired = grant.stream_url(v["prefix"], v["channel"], ttl=-10, key=v["key"], now=1000)
    assert "exp=990&" in expired
    assert "exp=1001&" in grant.stream_url(v["prefix"], v["channel"], ttl=1.5, key=v["key"], now=999.5)
    assert grant.DEFAULT_TTL == 60


def test_session_must_be_text() -> None:
    with pytest.raises(TypeError):
        grant.stream_url("/live", "room", session=7, key="k" * 32)  # type: ignore[arg-type]
