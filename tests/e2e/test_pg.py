"""--pg-listen: two m0serve instances on different ports sharing one real
PostgreSQL, which this module starts (initdb and pg_ctl, as the postgres
user when run as root; scripts/test installs Debian's postgresql). A
subscriber on one instance gets what the other publishes, with ids from
one sequence; a client that reconnects to the other instance is replayed
exactly; a frame published from SQL (a trigger's m0.publish) reaches both."""

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
import requests

from conftest import APPS, HTTP_TIMEOUT, READY_TIMEOUT, free_port
from test_realtime import SSE

# What this module checks is decided in Go: it runs with one CPython (conftest.py).
pytestmark = pytest.mark.once

SPEC = "prefork_app:application"


def pg_bin(name):
    found = shutil.which(name) or (sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}")) or [None])[-1]
    assert found, f"no {name}: install PostgreSQL (scripts/test installs Debian's postgresql)"
    return found


@pytest.fixture(scope="module")
def pg():
    """A PostgreSQL of this module's own; its DSN."""
    root = Path(tempfile.mkdtemp(prefix="m0pg"))
    prefix = []
    if os.geteuid() == 0:
        pw = pwd.getpwnam("postgres")
        os.chown(root, pw.pw_uid, pw.pw_gid)
        prefix = ["runuser", "-u", "postgres", "--"]
    data, port = root / "data", free_port()
    subprocess.run([*prefix, pg_bin("initdb"), "-D", str(data), "-A", "trust", "-U", "m0", "--no-sync"],
                   check=True, capture_output=True, timeout=120)
    opts = f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off"
    subprocess.run([*prefix, pg_bin("pg_ctl"), "-D", str(data), "-o", opts, "-l", str(root / "log"), "-w", "start"],
                   check=True, capture_output=True, timeout=120)
    try:
        yield f"postgres://m0@127.0.0.1:{port}/postgres?sslmode=disable"
    finally:
        subprocess.run([*prefix, pg_bin("pg_ctl"), "-D", str(data), "-m", "immediate", "stop"], capture_output=True, timeout=60)
        shutil.rmtree(root, ignore_errors=True)


def psql(dsn, sql):
    proc = subprocess.run([pg_bin("psql"), dsn, "-v", "ON_ERROR_STOP=1", "-Atc", sql], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


@pytest.fixture(params=[1, 2], ids=["single", "workers-2"])
def pair(request, serve, pg):
    """Two instances of prefork_app under --realtime --pg-listen, the
    second with one worker or two."""
    a = serve(SPEC, app_dir=APPS, args=("--realtime", "--pg-listen", pg))
    b = serve(SPEC, app_dir=APPS, wait=False, args=("--realtime", "--pg-listen", pg, "--workers", str(request.param)))
    b.wait_ready()
    if request.param > 1:
        deadline = time.monotonic() + READY_TIMEOUT
        while b.stdout.count("🔥 m0serve:") < request.param:
            assert time.monotonic() < deadline, b.describe()
            time.sleep(0.05)
    return [a, b]


def publish(server, channel, data):
    r = requests.post(server.url(f"/publish?c={channel}"), data=data, timeout=HTTP_TIMEOUT)
    assert r.status_code == 200, r.text
    return r.json()["id"]


def seq(event_id):
    epoch, _, n = event_id.partition("-")
    return epoch, int(n)


def test_frames_cross_instances_with_one_id_space(pair):
    a, b = pair
    sub_a, sub_b = SSE(a, "/hold?c=news"), SSE(b, "/hold?c=news")
    sub_a.position()
    sub_b.position()
    ids = [publish(a if i % 2 == 0 else b, "news", f"frame {i}") for i in range(10)]
    assert len(set(ids)) == 10 and len({seq(i)[0] for i in ids}) == 1, ids
    assert [seq(i)[1] for i in ids] == sorted(seq(i)[1] for i in ids), ids
    for sub in (sub_a, sub_b):
        got = [sub.event() for _ in range(10)]
        assert [e["id"] for e in got] == ids, (got, ids)
        assert [e["data"] for e in got] == [f"frame {i}".encode() for i in range(10)]


def test_reconnect_to_the_other_instance_is_replayed(pair):
    a, b = pair
    sub = SSE(a, "/hold?c=room")
    sub.position()
    first = publish(a, "room", "one")
    assert sub.event()["id"] == first
    sub.close()
    missed = [publish(b, "room", "two"), publish(a, "room", "three")]
    again = SSE(b, "/hold?c=room", last_id=first)
    got = [again.event() for _ in range(2)]
    assert [e["id"] for e in got] == missed and [e["data"] for e in got] == [b"two", b"three"], got


def test_sql_publishes_to_both(pair, pg):
    a, b = pair
    sub_a, sub_b = SSE(a, "/hold?c=orders"), SSE(b, "/hold?c=orders")
    sub_a.position()
    sub_b.position()
    # What a trigger on a model's table does.
    psql(pg, """
        CREATE TABLE IF NOT EXISTS shop_order (id serial PRIMARY KEY, item text);
        CREATE OR REPLACE FUNCTION shop_order_published() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN PERFORM m0.publish('orders', row_to_json(NEW)::text); RETURN NEW; END $$;
        DROP TRIGGER IF EXISTS shop_order_published ON shop_order;
        CREATE TRIGGER shop_order_published AFTER INSERT ON shop_order
            FOR EACH ROW EXECUTE FUNCTION shop_order_published();
        INSERT INTO shop_order (item) VALUES ('tea');
    """)
    ea, eb = sub_a.event(), sub_b.event()
    assert ea["id"] == eb["id"] and b'"item":"tea"' in ea["data"], (ea, eb)


def test_unreachable_database_is_refused(tmp_path):
    from conftest import M0SERVE
    proc = subprocess.run([str(M0SERVE), "--realtime", "--pg-listen", "postgres://m0:hunter2@127.0.0.1:1/m0",
                           "--app-dir", str(APPS), SPEC], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 78, proc.stderr
    assert "hunter2" not in proc.stderr and "xxxxx" in proc.stderr and "PgBouncer" in proc.stderr, proc.stderr
