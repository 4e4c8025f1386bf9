"""m0serve --workers N: a supervisor that never loads Python, binds the
listener and execs N workers of the same binary.

Every answer of apps/prefork_app.py carries the pid of the worker that
served it, so a test knows which worker holds each of its connections
(a connection stays on the worker it was placed on for its life). A test
that needs a connection on a given worker opens connections and keeps the
others open meanwhile: the least-loaded handoff then places the next ones
on the worker that holds fewer, so it gets there within a few.

Clients: http.client keep-alive connections (one connection each, so a
failure is attributed to the worker that held it), requests, the raw SSE
reader of test_realtime, raw sockets."""

import concurrent.futures
import http.client
import json
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import types
from pathlib import Path

import pytest
import requests

from conftest import (APPS, HOST, HTTP_TIMEOUT, children_of, M0SERVE, READY_TIMEOUT, ROOT, RawReader, free_port, http_request,
                      read_response, wait_until)
from test_realtime import SSE

# What this module checks is decided in Go: it runs with one CPython (conftest.py).
pytestmark = pytest.mark.once

SPEC = "prefork_app:application"
ARMED_RE = re.compile(r"^\[worker (\d+)\] pid=(\d+) armed for a graceful stop$", re.M)
BANNER_RE = re.compile(r"^🔥 m0serve: (?P<spec>\S+) on http://(?P<host>[^:]+):(?P<port>\d+) "
                       r"\(protocol=wsgi workers=(?P<workers>\d+)\)(?: .*)?$", re.M)
GIVE_UP_RE = re.compile(r"^m0serve: worker (\d+) died 5 times in a row within 10s of starting "
                        r"\(last: [^)]*\); giving up$", re.M)


# --------------------------------------------------------------------------
# helpers


def armed(server):
    """[(worker number, pid)] in the order the armed lines were printed."""
    return [(int(n), int(p)) for n, p in ARMED_RE.findall(server.stdout)]


def banners(server):
    return BANNER_RE.findall(server.stdout)


def wait_banners(server, n, timeout=READY_TIMEOUT):
    """Waits for n banners in all (the server's whole life); fails, naming
    what it saw, if the server exits or they do not come."""
    def enough():
        if len(banners(server)) >= n:
            return True
        if server.proc.poll() is not None:
            raise AssertionError(f"m0serve exited with {server.proc.returncode} before {n} banners\n"
                                 f"{server.describe()}")
        return False

    wait_until(enough, timeout, lambda: f"{n} banners\n{server.describe()}")


def current(server):
    """{worker number: pid} of the newest armed line of each worker."""
    out = {}
    for n, p in armed(server):
        out[n] = p
    return out


def state(pid):
    """The state letter of pid ("Z" for a zombie), or None once it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return None


def alive(pid):
    """True while pid exists and is not a zombie."""
    return state(pid) not in (None, "Z")


def seq_of(event_id):
    """An event id "EPOCH-SEQ" (the epoch in base 36) as (epoch, seq)."""
    m = re.fullmatch(r"([0-9a-z]+)-(\d+)", event_id or "")
    assert m, f"not an event id: {event_id!r}"
    return int(m.group(1), 36), int(m.group(2))


class Conn:
    """One keep-alive HTTP/1.1 connection (http.client), and the worker that
    serves it: the pid its first response names. Every later response on it
    must name the same pid."""

    def __init__(self, server, timeout=HTTP_TIMEOUT):
        self.server = server
        self.c = http.client.HTTPConnection(HOST, server.port, timeout=timeout)
        self.pid = None
        self.pid = self.get("/pid")["pid"]

    def request(self, method, path, body=None):
        # http.client would open a new connection, maybe to another worker.
        assert self.pid is None or self.c.sock is not None, f"the server closed the connection to pid {self.pid}"
        self.c.request(method, path, body=body)
        r = self.c.getresponse()
        data = r.read()
        assert r.status == 200, f"{method} {path} -> {r.status}: {data[:2000]!r}"
        out = json.loads(data)
        if self.pid is not None and "pid" in out:
            assert out["pid"] == self.pid, f"a connection moved from worker pid {self.pid} to {out['pid']}"
        return out

    def get(self, path):
        return self.request("GET", path)

    def publish(self, channel, data):
        out = self.request("POST", f"/publish?c={channel}", body=data.encode())
        assert out["id"], out
        return out["id"]

    def close(self):
        self.c.close()


def steer(server, pid, opener, held, limit=8):
    """What opener() opens (a Conn, an SSE) on the worker of pid, the others
    it opens on the way kept in held (open) so the handoff steers the next
    to the worker that holds fewer. Fails after limit tries."""
    seen = []
    for _ in range(limit):
        x = opener()
        got = x.pid if isinstance(x, Conn) else int(x.headers["x-pid"])
        if got == pid:
            return x
        seen.append(got)
        held.append(x)
    raise AssertionError(f"{limit} connections in a row landed elsewhere than pid {pid}: {seen}\n{server.describe()}")


def sse_opener(server, path, last_id=None):
    def open_():
        s = SSE(server, path, last_id=last_id)
        assert s.status == 200 and "x-pid" in s.headers, (s.status, s.headers)
        return s
    return open_


def close_all(xs):
    for x in xs:
        x.close()
    xs.clear()


@pytest.fixture
def prefork(serve, tmp_path):
    """Factory: prefork(workers, args=..., env=...) -> a server of prefork_app
    under --workers N --realtime, every worker's banner printed. The app
    writes its markers to server.state."""
    count = [0]

    def start(workers, *, args=(), env=None, spec=SPEC, app_dir=APPS, realtime=True, wait=True, flag=True):
        count[0] += 1
        state = tmp_path / f"state{count[0]}"
        state.mkdir()
        full_env = {"M0_PREFORK_STATE": str(state), "M0_PREFORK_PYTHON": sys.executable, **(env or {})}
        if not flag:  # the count from the environment
            full_env["M0_WORKERS"] = str(workers)
        server = serve(spec, app_dir=app_dir, wait=False, env=full_env,
                       args=(*(("--workers", str(workers)) if flag else ()), *(("--realtime",) if realtime else ()),
                             *args))
        server.state = state
        if wait:
            wait_banners(server, workers)
            wait_until(lambda: len(current(server)) == workers, 5,
                       lambda: f"{workers} armed lines\n{server.describe()}")
        return server

    return start


def wait_started(server, tags, timeout=10):
    wait_until(lambda: all((server.state / f"started-{t}").exists() for t in tags), timeout,
               lambda: f"the requests {tags} to start; started: {sorted(p.name for p in server.state.iterdir())}\n"
                       f"{server.describe()}")


def wait_replaced(server, slot, old_pid, timeout=15):
    """The pid of worker slot's replacement, once it has printed its banner
    (every worker armed so far, this one included, has printed one)."""
    wait_until(lambda: current(server).get(slot) not in (None, old_pid), timeout,
               lambda: f"worker {slot} (pid {old_pid}) to be replaced\n{server.describe()}")
    new = current(server)[slot]
    wait_banners(server, len(armed(server)), timeout)
    return new


# --------------------------------------------------------------------------
# 1. start-up: N armed lines and banners, and the doctor


def test_banners_and_armed_lines(prefork):
    server = prefork(3)
    lines = armed(server)
    assert sorted(n for n, _ in lines) == [0, 1, 2], server.describe()
    pids = [p for _, p in lines]
    assert len(set(pids)) == 3 and server.proc.pid not in pids, server.describe()
    bs = banners(server)
    assert len(bs) == 3, server.describe()
    for spec, host, port, workers in bs:
        assert (spec, host, int(port), int(workers)) == (SPEC, HOST, server.port, 3), bs
    # The workers are the supervisor's children, running the same binary.
    assert children_of(server.proc.pid) == set(pids)
    for pid in pids:
        assert os.readlink(f"/proc/{pid}/exe") == os.readlink(f"/proc/{server.proc.pid}/exe")
    # The supervisor never loads Python.
    maps = Path(f"/proc/{server.proc.pid}/maps").read_text()
    assert "libpython" not in maps, "the supervisor mapped libpython"


def test_workers_from_the_environment(prefork):
    server = prefork(2, flag=False)
    assert sorted(current(server)) == [0, 1]
    assert [int(b[3]) for b in banners(server)] == [2, 2], server.stdout


def test_doctor_reports_the_prefork_topology(tmp_path):
    p = subprocess.run([str(M0SERVE), "--doctor", "--workers", "2", "--realtime", "--app-dir", str(APPS), SPEC],
                       capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert p.returncode == 0, p
    topo = json.loads(p.stdout.strip().splitlines()[-1])["topology"]
    assert topo["mode"] == "prefork" and topo["supervisor"] is True and topo["workers"] == 2, topo
    assert topo["bus"] == "unix datagram mesh" and topo["ids"] == "shared memory page", topo
    assert topo["handoff"] is True, topo
    p = subprocess.run([str(M0SERVE), "--doctor", "--workers", "2", "--app-dir", str(APPS), SPEC],
                       capture_output=True, text=True, timeout=60, cwd=tmp_path, env={**os.environ, "M0_HANDOFF": "0"})
    assert p.returncode == 0, p
    topo = json.loads(p.stdout.strip().splitlines()[-1])["topology"]
    assert topo["mode"] == "prefork" and topo["handoff"] is False, topo


# --------------------------------------------------------------------------
# 2. kill -9 of one worker under load


def test_kill9_worker_under_load(prefork, capsys):
    server = prefork(2)
    pids = current(server)
    victim, survivor = pids[1], pids[0]
    threads = 6
    go = threading.Barrier(threads + 1)
    stop = threading.Event()
    killed_at = [None]
    logs = [[] for _ in range(threads)]

    def load(i):
        """Requests on one keep-alive connection; a failure closes it and the
        next request opens another. Each outcome is logged with the worker
        that held the connection (None: a new connection, no answer yet)."""
        c = http.client.HTTPConnection(HOST, server.port, timeout=HTTP_TIMEOUT)
        owner = None
        log = logs[i]
        go.wait()
        while not stop.is_set():
            if c.sock is None:
                owner = None
            after = killed_at[0] is not None
            try:
                c.request("GET", "/pid")
                r = c.getresponse()
                body = r.read()
                if r.status != 200:
                    log.append(("status", owner, r.status, after))
                    continue
                pid = json.loads(body)["pid"]
                if owner is not None and pid != owner:
                    log.append(("moved", owner, pid, after))
                owner = pid
                log.append(("ok", pid, None, after))
            except (OSError, http.client.HTTPException) as e:
                log.append(("fail", owner, repr(e), after))
                c.close()
        c.close()

    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        futures = [pool.submit(load, i) for i in range(threads)]
        go.wait()
        time.sleep(0.7)
        # Both workers hold some of the connections before the kill.
        owners = {e[1] for log in logs for e in log if e[0] == "ok"}
        assert owners == {victim, survivor}, f"the load did not spread: {owners}"
        mark = server.mark()
        os.kill(victim, signal.SIGKILL)
        killed_at[0] = time.monotonic()
        time.sleep(1.3)
        stop.set()
        for f in futures:
            f.result(timeout=30)

    events = [e for log in logs for e in log]
    summary = {k: sum(1 for e in events if (e[0], e[1]) == k) for k in {(e[0], e[1]) for e in events}}
    assert not [e for e in events if e[0] in ("moved", "status")], summary
    on_survivor = [e for e in events if e[0] == "fail" and e[1] == survivor]
    assert not on_survivor, f"requests failed on connections the surviving worker held: {on_survivor[:5]}; {summary}"
    # The surviving worker's connections kept serving after the kill.
    assert sum(1 for e in events if e[0] == "ok" and e[1] == survivor and e[3]) > 0, summary
    # A new connection's first request never failed: connections in the
    # listener's queue are not lost with a worker.
    fresh = [e for e in events if e[0] == "fail" and e[1] is None]
    assert not fresh, f"new connections failed: {fresh[:5]}; {summary}"

    with capsys.disabled():
        name = {victim: "killed", survivor: "survivor", None: "new connection"}
        print(f"\n[prefork] kill -9 under load, requests by the worker holding the connection: "
              + ", ".join(f"{what} on {name.get(owner, 'replacement')}: {n}" for (what, owner), n in sorted(
                  summary.items(), key=lambda kv: (kv[0][0], str(kv[0][1])))))
    server.wait_for_stderr(rf"^m0serve: worker 1 \(pid {victim}\) signal: killed; replacing it", since=mark)
    new = wait_replaced(server, 1, victim)
    assert new not in (victim, survivor)
    held = []
    c = steer(server, new, lambda: Conn(server), held)
    assert c.get("/pid")["pid"] == new
    c.close()
    close_all(held)
    assert current(server) == {0: survivor, 1: new}


# --------------------------------------------------------------------------
# 3. SIGTERM to the supervisor: in-flight requests finish, holds close


def test_sigterm_drains_every_worker(prefork):
    server = prefork(2)
    pids = current(server)
    held = []
    # A held stream on each worker.
    streams = [steer(server, pid, sse_opener(server, "/hold?c=drain"), held) for pid in pids.values()]
    close_all(held)
    # Four slow requests, one connection each, opened one after the other
    # so that the handoff puts some on each worker.
    tags = [f"slow{i}" for i in range(4)]
    with concurrent.futures.ThreadPoolExecutor(len(tags)) as pool:
        slow = []
        for t in tags:
            slow.append(pool.submit(requests.get, server.url(f"/sleep?s=1&tag={t}"), timeout=HTTP_TIMEOUT))
            wait_started(server, [t])
        t0 = time.monotonic()
        server.send_signal(signal.SIGTERM)
        results = [f.result(timeout=HTTP_TIMEOUT) for f in slow]
    assert [r.status_code for r in results] == [200] * 4, [r.text for r in results]
    assert {r.json()["pid"] for r in results} == set(pids.values()), "the slow requests did not reach both workers"
    for s in streams:
        b = s.next(timeout=6)
        assert b is not None and b.get("retry"), (b, s.reader.raw[-500:])
        assert s.next(timeout=6) is None and s.ended, "a held stream did not end cleanly"
        s.close()
    rc = server.wait_exit(10)
    took = time.monotonic() - t0
    assert rc == 0, server.describe()
    assert took < 6, f"the drain took {took:.1f}s"
    for pid in pids.values():
        assert not alive(pid)


@pytest.mark.each_version  # nothing on stderr: a warning of any version would show
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_idle_server_stops(prefork, sig):
    server = prefork(2)
    pids = list(current(server).values())
    server.send_signal(sig)
    assert server.wait_exit(10) == 0, server.describe()
    assert not any(alive(p) for p in pids)
    assert server.stderr == "", server.stderr


class WorkerNotNamed(AssertionError):
    pass


def test_drain_bound_names_the_busy_worker(prefork):
    server = prefork(2)
    pids = current(server)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        stuck = pool.submit(requests.get, server.url("/sleep?s=20&tag=stuck"), timeout=30)
        wait_started(server, ["stuck"])
        busy = int((server.state / "started-stuck").read_text())
        slot = {p: n for n, p in pids.items()}[busy]
        t0 = time.monotonic()
        server.send_signal(signal.SIGTERM)
        rc = server.wait_exit(15)
        took = time.monotonic() - t0
        with pytest.raises(requests.RequestException):
            stuck.result(timeout=30)  # the connection went with the worker
    assert rc == 0, server.describe()
    assert 4.5 <= took <= 7, f"the drain took {took:.1f}s, want about 5"
    assert not alive(busy)
    named = [line for line in server.stderr.splitlines()
             if re.search(rf"\bworker {slot}\b|\bpid[ =]{busy}\b", line)]
    if not named:
        raise WorkerNotNamed(f"stderr does not name worker {slot} (pid {busy}):\n{server.stderr}")


# --------------------------------------------------------------------------
# 4-6. ids, the bus, the journal across workers


def test_ids_are_shared_and_survive_a_replacement(prefork):
    server = prefork(2)
    pids = current(server)
    held = []
    a = steer(server, pids[0], lambda: Conn(server), held)
    b = steer(server, pids[1], lambda: Conn(server), held)
    ids = [(a if i % 2 == 0 else b).publish("ids", f"f{i}") for i in range(6)]
    parsed = [seq_of(i) for i in ids]
    assert len(set(ids)) == 6 and parsed == sorted(parsed), ids
    epoch = parsed[0][0]
    assert {e for e, _ in parsed} == {epoch}, ids
    assert [s for _, s in parsed] == list(range(parsed[0][1], parsed[0][1] + 6)), ids  # one counter, no holes
    mark = server.mark()
    os.kill(pids[1], signal.SIGKILL)
    b.close()
    server.wait_for_stderr(rf"^m0serve: worker 1 \(pid {pids[1]}\) signal: killed", since=mark)
    during = a.publish("ids", "while worker 1 is replaced")
    new = wait_replaced(server, 1, pids[1])
    c = steer(server, new, lambda: Conn(server), held)
    after = [(c if i % 2 == 0 else a).publish("ids", f"g{i}") for i in range(4)]
    more = [seq_of(i) for i in [during, *after]]
    assert {e for e, _ in more} == {epoch}, (ids, during, after)
    assert [s for _, s in more] == list(range(parsed[-1][1] + 1, parsed[-1][1] + 6)), (ids, during, after)
    close_all(held)


def test_frames_reach_subscribers_on_every_worker(prefork):
    server = prefork(2)
    pids = current(server)
    held = []
    subs = {pid: steer(server, pid, sse_opener(server, "/hold?c=mesh"), held) for pid in pids.values()}
    close_all(held)
    conns = {pid: steer(server, pid, lambda: Conn(server), held) for pid in pids.values()}
    # One frame at a time, from each worker in turn: each subscriber, on
    # either worker, receives every one with the id its view returned.
    for i in range(4):
        source = list(pids.values())[i % 2]
        fid = conns[source].publish("mesh", f"from {source} #{i}")
        for pid, s in subs.items():
            assert s.event(timeout=5) == {"data": f"from {source} #{i}".encode(), "id": fid}, \
                f"subscriber on {pid}, frame from {source}"
    close_all(held)
    for s in subs.values():
        s.close()


def test_live_frames_keep_their_order_across_workers(prefork):
    """Frames published at once from views on two workers (two connections
    on each, 50 frames each) reach every subscriber in the order of their
    ids: an SSE client's last event id is where it resumes, so a frame sent
    after one with a higher id is one a client cut between them never gets."""
    server = prefork(2, args=("--replay-frames", "512"))
    pids = current(server)
    held = []
    subs = {pid: steer(server, pid, sse_opener(server, "/hold?c=order"), held) for pid in pids.values()}
    close_all(held)
    conns = [steer(server, pid, lambda: Conn(server), held) for pid in [*pids.values(), *pids.values()]]
    with concurrent.futures.ThreadPoolExecutor(len(conns)) as pool:
        futures = [pool.submit(lambda c: [c.publish("order", "x") for _ in range(50)], c) for c in conns]
        ids = sorted((i for f in futures for i in f.result()), key=seq_of)
    got = {pid: [s.event(timeout=5)["id"] for _ in ids] for pid, s in subs.items()}
    # Every frame arrived, once, and the ids are one dense run.
    assert all(sorted(g, key=seq_of) == ids for g in got.values()), got
    assert [seq_of(i)[1] for i in ids] == list(range(seq_of(ids[0])[1], seq_of(ids[0])[1] + 200)), ids
    for pid, g in got.items():
        late = [k for k in range(1, len(g)) if seq_of(g[k]) < seq_of(g[k - 1])]
        if not late:
            continue
        # A client cut just before the late frame resumes with the id it
        # saw last, and is never sent the late one.
        k = late[0]
        resumed = steer(server, pid, sse_opener(server, "/hold?c=order", last_id=g[k - 1]), held)
        end = conns[0].publish("order", "end")
        replay = []
        while not replay or replay[-1] not in (end, "m0-gap"):
            e = resumed.event(timeout=5)
            replay.append(e.get("id") or e.get("event"))
        resumed.close()
        raise AssertionError(f"the subscriber on pid {pid} received {g[k - 1]} before {g[k]} "
                             f"({len(late)} frames late of {len(g)}); resuming from {g[k - 1]} it is sent "
                             f"{replay[:5]}..., without {g[k]}")
    close_all(held)
    for s in subs.values():
        s.close()


def test_reconnect_to_a_replaced_worker_is_replayed(prefork):
    server = prefork(2)
    pids = current(server)
    held = []
    s = steer(server, pids[1], sse_opener(server, "/hold?c=warm"), held)
    close_all(held)
    pub = steer(server, pids[0], lambda: Conn(server), held)
    seen = [pub.publish("warm", f"seen {i}") for i in range(3)]
    for i, fid in enumerate(seen):
        assert s.event(timeout=5) == {"data": f"seen {i}".encode(), "id": fid}
    s.close()
    mark = server.mark()
    os.kill(pids[1], signal.SIGKILL)
    server.wait_for_stderr(rf"^m0serve: worker 1 \(pid {pids[1]}\) signal: killed", since=mark)
    missed = [pub.publish("warm", f"missed {i}") for i in range(3)]  # while worker 1 is gone
    new = wait_replaced(server, 1, pids[1])
    assert "found no sibling's journal" not in server.stderr_since(mark), server.stderr_since(mark)
    # A client cut after the first frame lands on the replacement. The
    # replacement's own journal begins after the frames published before it
    # started; the sibling's journal, warmed from, reaches back to them.
    again = steer(server, new, sse_opener(server, "/hold?c=warm", last_id=seen[0]), held)
    want = [(f"seen {i}", fid) for i, fid in enumerate(seen)][1:]
    want += [(f"missed {i}", fid) for i, fid in enumerate(missed)]
    for data, fid in want:
        e = again.event(timeout=5)
        assert e == {"data": data.encode(), "id": fid}, (e, want)
    live = pub.publish("warm", "live")
    assert again.event(timeout=5) == {"data": b"live", "id": live}
    assert again.positions == []
    again.close()
    close_all(held)


# --------------------------------------------------------------------------
# 7-9. failures: at start-up, a crash loop, the supervisor killed


@pytest.mark.each_version  # the interpreter's traceback, printed once
def test_import_error_stops_the_server_once(prefork, tmp_path):
    server = prefork(3, spec="prefork_import_error:application", realtime=False, wait=False)
    rc = server.wait_exit(READY_TIMEOUT)
    assert rc == 1, server.describe()
    err = server.stderr
    assert err.count("Traceback (most recent call last)") == 1, err
    assert err.count("\nRuntimeError: prefork-import-failure\n") == 1, err
    assert len(re.findall(r"^m0serve: cannot load prefork_import_error:application", err, re.M)) == 1, err
    assert banners(server) == [], server.stdout
    # What one worker says alone is what the supervisor says for three.
    one = subprocess.run([str(M0SERVE), "--host", HOST, "--port", str(free_port()), "--app-dir", str(APPS),
                          "prefork_import_error:application"], capture_output=True, text=True, timeout=60,
                         cwd=tmp_path, env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    assert one.returncode == 1 and one.stderr == err, (one.stderr, err)
    # No worker outlives the supervisor.
    for _, pid in armed(server):
        assert not alive(pid)


def test_crash_loop_gives_up(prefork, tmp_path):
    die = tmp_path / "die"
    server = prefork(2, env={"M0_PREFORK_DIE_FILE": str(die)})
    t0 = time.monotonic()
    die.touch()  # from now on every worker exits 0.2 s after it starts
    rc = server.wait_exit(30)
    took = time.monotonic() - t0
    assert rc == 1, server.describe()
    err = server.stderr
    gave_up = GIVE_UP_RE.findall(err)
    assert len(gave_up) == 1, err
    assert "exit status 3" in err
    slot = int(gave_up[0])
    # Replaced with backoff before it gave up: 4 replacements of that worker.
    replaced = re.findall(rf"^m0serve: worker {slot} \(pid \d+\) exit status 3; replacing it in (\S+)$", err, re.M)
    assert replaced == ["100ms", "200ms", "400ms", "800ms"], err
    assert GIVE_UP_RE.fullmatch(err.strip().splitlines()[-1]), err  # its last word
    assert took < 20, f"giving up took {took:.1f}s"
    for _, pid in armed(server):
        assert not alive(pid)


def test_sigkill_of_the_supervisor_leaves_no_worker(prefork):
    server = prefork(2)
    pids = list(current(server).values())
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        slow = pool.submit(requests.get, server.url("/sleep?s=1&tag=k"), timeout=HTTP_TIMEOUT)
        wait_started(server, ["k"])
        os.kill(server.proc.pid, signal.SIGKILL)
        server.proc.wait(10)
        server.returncode = server.proc.returncode
        r = slow.result(timeout=HTTP_TIMEOUT)
    # The worker drained itself: its request finished.
    assert r.status_code == 200 and r.json()["slept"] == 1
    wait_until(lambda: not any(alive(p) for p in pids), 7,
               lambda: f"the workers {[p for p in pids if alive(p)]} to exit\n{server.describe()}")

    def refused():
        try:
            socket.create_connection((HOST, server.port), timeout=1).close()
        except ConnectionRefusedError:
            return True
        return False

    wait_until(refused, 5, "the listener to close")


# --------------------------------------------------------------------------
# 10. --reload


RELOAD_APP = '''\
import os
import time
{top}
VERSION = "{version}"


def application(environ, start_response):
    if environ["PATH_INFO"] == "/sleep":
        time.sleep(1)
    body = ('{{"version": "%s", "pid": %d}}' % (VERSION, os.getpid())).encode()
    start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
    return [body]
'''


def test_reload(prefork, tmp_path):
    app_dir = tmp_path / "reload_app"
    app_dir.mkdir()
    src = app_dir / "reload_mod.py"
    src.write_text(RELOAD_APP.format(top="", version="v1"))
    server = prefork(2, spec="reload_mod:application", app_dir=app_dir, realtime=False, args=("--reload",))

    def versions(n=4):
        """(version, pid) of n requests, each on a connection of its own,
        all held open at once so that they spread over the workers."""
        conns = [Conn(server) for _ in range(n)]
        out = {(c.get("/pid")["version"], c.pid) for c in conns}
        close_all(conns)
        return out

    v1 = versions()
    old = set(current(server).values())
    assert v1 == {("v1", p) for p in old}, v1

    mark = server.mark()
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        # A request in flight on a previous worker finishes there.
        slow = pool.submit(Conn(server).get, "/sleep")
        src.write_text(RELOAD_APP.format(top="", version="v2"))
        server.wait_for_stderr(rf"^m0serve: {re.escape(str(src))} changed; reloading$", since=mark)
        assert slow.result(timeout=HTTP_TIMEOUT)["version"] == "v1"
    wait_banners(server, 4)
    v2 = versions()
    assert {v for v, _ in v2} == {"v2"} and len({p for _, p in v2}) == 2, v2
    v2_pids = {p for _, p in v2}
    assert not v2_pids & old and not any(alive(p) for p in old), (v2, old)

    mark = server.mark()
    src.write_text(RELOAD_APP.format(top='raise RuntimeError("reload-" + "broken")', version="v-broken"))
    server.wait_for_stderr(r"^m0serve: the change did not load; the previous workers serve on$", since=mark,
                           timeout=15)
    err = server.stderr_since(mark)
    assert err.count("Traceback (most recent call last)") == 1, err
    assert err.count("\nRuntimeError: reload-broken\n") == 1, err
    served = versions()
    assert {v for v, _ in served} == {"v2"} and {p for _, p in served} <= v2_pids, served
    assert all(alive(p) for p in v2_pids), "the previous workers did not serve on"
    assert len(banners(server)) == 4

    mark = server.mark()
    src.write_text(RELOAD_APP.format(top="", version="v3"))
    server.wait_for_stderr(r"changed; reloading$", since=mark)
    wait_banners(server, 6)
    v3 = versions()
    assert {v for v, _ in v3} == {"v3"} and len({p for _, p in v3}) == 2 and not {p for _, p in v3} & v2_pids, v3


class RequestDropped(AssertionError):
    pass


def test_reload_drops_no_request(prefork, tmp_path):
    """Requests on new connections, from 8 threads, while the workers are
    replaced: each is answered, by the previous code and then the new.
    Up to 6 reloads, to the first dropped request."""
    app_dir = tmp_path / "reload_app"
    app_dir.mkdir()
    src = app_dir / "reload_mod.py"
    src.write_text(RELOAD_APP.format(top="", version="v0"))
    server = prefork(2, spec="reload_mod:application", app_dir=app_dir, realtime=False, args=("--reload",))
    request = http_request("GET", "/", server.port, [("Connection", "close")])

    def one():
        try:
            with server.connect() as s:
                s.sendall(request)
                r = read_response(RawReader(s))
        except OSError as e:
            return ("dropped", repr(e))
        if r.status is None:
            return ("dropped", "no response: " + repr(r))
        assert r.status == 200 and r.complete, r
        return ("ok", json.loads(r.body)["version"])

    for k in range(1, 7):
        stop = threading.Event()
        logs = [[] for _ in range(8)]

        def loop(log):
            while not stop.is_set():
                log.append(one())

        with concurrent.futures.ThreadPoolExecutor(len(logs)) as pool:
            futures = [pool.submit(loop, log) for log in logs]
            src.write_text(RELOAD_APP.format(top="", version=f"v{k}"))
            wait_banners(server, 2 + 2 * k)
            stop.set()
            for f in futures:
                f.result(timeout=30)
        for log in logs:  # each thread saw the previous code, then the new
            versions = [v for what, v in log if what == "ok"]
            assert versions == sorted(versions) and set(versions) <= {f"v{k - 1}", f"v{k}"}, versions
        dropped = [v for log in logs for what, v in log if what == "dropped"]
        if dropped:
            raise RequestDropped(f"reload {k}: {len(dropped)} of {sum(map(len, logs))} requests on new "
                                 f"connections got no response: {dropped[:3]}")


def page_slots(pid, workers):
    """[(open connections, serving pid)] of each worker, as the shared page
    (prefork/page.go) that process pid maps says."""
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("/memfd:m0-page"):
            data = Path(f"/proc/{pid}/fd/{fd}").read_bytes()[:4096]
            assert data[:8] == b"m0page\x00\x01", data[:8]
            return [struct.unpack_from("<qq", data, 64 + 16 * i) for i in range(workers)]
    raise AssertionError(f"pid {pid} maps no m0 page")


class HandoffLost(AssertionError):
    pass


def test_failed_reload_keeps_the_handoff(prefork, tmp_path):
    app_dir = tmp_path / "reload_app"
    app_dir.mkdir()
    src = app_dir / "reload_mod.py"
    src.write_text(RELOAD_APP.format(top="", version="v1"))
    server = prefork(2, spec="reload_mod:application", app_dir=app_dir, realtime=False, args=("--reload",))
    pids = current(server)
    assert [serving for _, serving in page_slots(pids[0], 2)] == [pids[0], pids[1]]
    mark = server.mark()
    src.write_text(RELOAD_APP.format(top='raise RuntimeError("reload-" + "broken")', version="v-broken"))
    server.wait_for_stderr(r"^m0serve: the change did not load; the previous workers serve on$", since=mark,
                           timeout=15)
    # The reload's workers are gone; the previous ones serve.
    wait_until(lambda: children_of(server.proc.pid) == set(pids.values()), 10,
               lambda: f"only the previous workers to be left: {children_of(server.proc.pid)} vs {pids}")
    slots = page_slots(pids[0], 2)
    if [serving for _, serving in slots] != [pids[0], pids[1]]:
        raise HandoffLost(f"after the failed reload the page says (open, serving pid) {slots}; the workers are {pids}")
    # Connections held open one after the other spread over both.
    conns = [Conn(server) for _ in range(6)]
    spread = sorted(sum(1 for c in conns if c.pid == p) for p in pids.values())
    close_all(conns)
    if spread[0] < 2:
        raise HandoffLost(f"6 connections held at once spread as {spread}")


# --------------------------------------------------------------------------
# 11. PID 1 of a new PID namespace


def descendants(pid):
    out = []
    for c in sorted(children_of(pid)):
        out += [c, *descendants(c)]
    return out


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("unshare") is None,
                    reason="a new PID namespace needs root and unshare(1)")
def test_pid1_with_workers(tmp_path):
    port = free_port()
    state_dir = tmp_path / "state"
    state_dir.mkdir()
    out, err = open(tmp_path / "stdout.log", "w+"), open(tmp_path / "stderr.log", "w+")
    proc = subprocess.Popen(
        ["unshare", "--pid", "--fork", "--mount-proc", str(M0SERVE), "--host", HOST, "--port", str(port),
         "--app-dir", str(APPS), "--workers", "2", SPEC],
        stdout=out, stderr=err, stdin=subprocess.DEVNULL, start_new_session=True,
        env={**os.environ, "M0_PREFORK_STATE": str(state_dir), "PYTHONDONTWRITEBYTECODE": "1"})

    def text():
        return (tmp_path / "stdout.log").read_text() + "\n--- stderr ---\n" + (tmp_path / "stderr.log").read_text()

    try:
        wait_until(lambda: len(BANNER_RE.findall((tmp_path / "stdout.log").read_text())) == 2
                   or proc.poll() is not None, READY_TIMEOUT, lambda: f"two banners\n{text()}")
        assert proc.poll() is None, text()
        (init,) = children_of(proc.pid)
        nspid = [l for l in Path(f"/proc/{init}/status").read_text().splitlines() if l.startswith("NSpid:")][0]
        assert nspid.split()[-1] == "1", nspid
        everyone = descendants(init)
        assert len(everyone) == 3, everyone  # the supervisor and two workers
        url = f"http://{HOST}:{port}"
        conns = [Conn(types.SimpleNamespace(port=port)) for _ in range(4)]
        assert len({c.pid for c in conns}) == 2, [c.pid for c in conns]  # both workers serve
        close_all(conns)
        # A worker's orphaned grandchild is handed to PID 1, which reaps it.
        assert requests.get(url + "/orphan", timeout=HTTP_TIMEOUT).status_code == 200
        wait_until(lambda: len(descendants(init)) == 3 and not any(state(p) == "Z" for p in children_of(init)),
                   5, lambda: f"PID 1 to reap the orphan: {[(p, state(p)) for p in descendants(init)]}")
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            slow = pool.submit(requests.get, url + "/sleep?s=1&tag=pid1", timeout=HTTP_TIMEOUT)
            wait_until(lambda: (state_dir / "started-pid1").exists(), 10, "the slow request to start")
            os.kill(init, signal.SIGTERM)
            r = slow.result(timeout=HTTP_TIMEOUT)
        assert r.status_code == 200, r.text
        assert proc.wait(15) == 0, text()
        for pid in [init, *everyone]:
            assert not alive(pid), (pid, everyone)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        out.close()
        err.close()


# --------------------------------------------------------------------------
# 12. /__metrics: every worker's series


def parse_metrics(text, name):
    """{frozenset(labels): value} of metric name's samples."""
    out = {}
    for m in re.finditer(rf"^{re.escape(name)}\{{([^}}]*)\}} (\S+)$", text, re.M):
        labels = frozenset(re.findall(r'(\w+)="([^"]*)"', m.group(1)))
        out[labels] = float(m.group(2))
    return out


def test_metrics_of_every_worker(prefork):
    server = prefork(2, args=("--metrics",), realtime=False)
    pids = current(server)
    slot = {p: n for n, p in pids.items()}
    held = []
    conns = {pid: steer(server, pid, lambda: Conn(server), held) for pid in pids.values()}
    for i in range(3):
        conns[pids[0]].get("/pid")
    for i in range(5):
        conns[pids[1]].get("/pid")
    # Every GET 200 each worker served: the Conns' first requests and those.
    served = {0: 0, 1: 0}
    for c in [*held, *conns.values()]:
        served[slot[c.pid]] += 1
    served[0] += 3
    served[1] += 5
    close_all(held)
    for pid, c in conns.items():
        c.c.request("GET", "/__metrics")
        r = c.c.getresponse()
        text = r.read().decode()
        assert r.status == 200, text
        counts = parse_metrics(text, "m0_http_request_duration_seconds_count")
        by_worker = {dict(k)["worker"]: v for k, v in counts.items()
                     if dict(k).get("method") == "GET" and dict(k).get("code") == "200"}
        assert by_worker == {"0": served[0], "1": served[1]}, (f"scraped through worker {slot[pid]}", by_worker, served)
        # Every series is labelled with its worker, and both workers' are here.
        for family in ("process_resident_memory_bytes", "go_goroutines"):
            workers = {w for w in re.findall(rf'^{family}\{{worker="(\d+)"\}} ', text, re.M)}
            assert workers == {"0", "1"}, (family, text[:3000])
        assert not re.search(r"^m0_http_request_duration_seconds_count\{(?![^}]*worker=)", text, re.M)
    close_all(list(conns.values()))


# --------------------------------------------------------------------------
# 13. connection spread


def open_at_once(server, n):
    """n connections opened at once, each asked /pid, all held open; returns
    ({pid: count}, sockets)."""
    barrier = threading.Barrier(n)

    def one(_):
        barrier.wait()
        s = socket.create_connection((HOST, server.port), timeout=HTTP_TIMEOUT)
        s.sendall(http_request("GET", "/pid", server.port))
        r = read_response(RawReader(s))
        assert r.status == 200, r
        return json.loads(r.body)["pid"], s

    with concurrent.futures.ThreadPoolExecutor(n) as pool:
        got = list(pool.map(one, range(n)))
    counts = {}
    for pid, _ in got:
        counts[pid] = counts.get(pid, 0) + 1
    return counts, [s for _, s in got]


def test_connections_spread(prefork):
    server = prefork(2)
    pids = set(current(server).values())
    counts, socks = open_at_once(server, 16)
    for s in socks:
        s.close()
    assert set(counts) <= pids and sum(counts.values()) == 16
    assert all(5 <= counts.get(p, 0) <= 11 for p in pids), f"16 connections spread as {counts}"


def test_connections_without_handoff_reported(prefork, capsys):
    server = prefork(2, env={"M0_HANDOFF": "0"})
    pids = set(current(server).values())
    counts, socks = open_at_once(server, 16)
    for s in socks:
        s.close()
    assert sum(counts.values()) == 16 and set(counts) <= pids
    with capsys.disabled():
        print(f"\n[prefork] M0_HANDOFF=0: 16 connections spread as {sorted(counts.get(p, 0) for p in pids)}")


# --------------------------------------------------------------------------
# 14-15. a child process of a view publishes


def child_server(prefork):
    """A server whose application imports m0serve from python/ (the source
    the package is built from), whose m0pub hands a child the bus."""
    path = os.pathsep.join(p for p in (str(ROOT / "python"), os.environ.get("PYTHONPATH")) if p)
    server = prefork(2, env={"PYTHONPATH": path})
    has = server.get_json("/has-child-fds")
    assert has["child_fds"] and has["bus_write_fds"], has
    return server


@pytest.mark.each_version  # m0pub in a child process of this interpreter
def test_child_publishes_numbered(prefork):
    server = child_server(prefork)
    pids = current(server)
    held = []
    sub = steer(server, pids[0], sse_opener(server, "/hold?c=kid"), held)
    close_all(held)
    on0 = steer(server, pids[0], lambda: Conn(server), held)
    on1 = steer(server, pids[1], lambda: Conn(server), held)
    before = on0.publish("kid", "before")
    out = on1.get("/child?c=kid&form=numbered&data=from-a-child")
    assert out["code"] == 0 and isinstance(out["result"], str), out
    after = on1.publish("kid", "after")
    assert sub.event(timeout=5) == {"data": b"before", "id": before}
    assert sub.event(timeout=5) == {"data": b"from-a-child", "id": out["result"]}
    assert sub.event(timeout=5) == {"data": b"after", "id": after}
    (e0, s0), (e1, s1), (e2, s2) = seq_of(before), seq_of(out["result"]), seq_of(after)
    assert e0 == e1 == e2 and s0 + 1 == s1 and s1 + 1 == s2, (before, out, after)
    sub.close()
    close_all(held)


@pytest.mark.each_version  # m0pub in a child process of this interpreter
def test_child_publishes_unnumbered(prefork):
    server = child_server(prefork)
    pids = current(server)
    held = []
    subs = [steer(server, pid, sse_opener(server, "/hold?c=kid"), held) for pid in pids.values()]
    close_all(held)
    on1 = steer(server, pids[1], lambda: Conn(server), held)
    before = on1.publish("kid", "before")
    out = on1.get("/child?c=kid&form=unnumbered&data=unnumbered-child")
    assert out["code"] == 0 and out["result"] is True, out
    got = []
    for s in subs:
        assert s.event(timeout=5) == {"data": b"before", "id": before}
        e = s.event(timeout=5)
        assert e["data"] == b"unnumbered-child", e
        got.append(e["id"])
    # One frame, numbered once, by one worker: the same id on both.
    assert got[0] == got[1] and seq_of(got[0]) > seq_of(before), (before, got)
    after = on1.publish("kid", "after")
    assert seq_of(after) > seq_of(got[0])
    for s in subs:
        assert s.event(timeout=5) == {"data": b"after", "id": after}
        s.close()
    close_all(held)
