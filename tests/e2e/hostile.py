"""The hostile-HTTP table: requests a server in front of an application must
answer strictly, each with the answer RFC 9110/9112 leaves us (the strict
one where the RFC allows a choice), and a probe that sends one on a raw
socket and reports what came back.

tests/e2e/test_hostile.py runs the table on both of m0's front ends;
bench/hostile runs it on the peers for docs/reliability.md, a markdown
table with a column per server (bold: an answer other than the table's):

    python tests/e2e/hostile.py m0=127.0.0.1:8000+ws gunicorn=127.0.0.1:8001 ...

Each request names its own target, /h/NAME (and /smuggled/NAME for a
request hidden in another's body), so a recording application (apps/
recorder.py) tells which requests reached it.
"""

from __future__ import annotations

import argparse
import socket
import sys
from dataclasses import dataclass, field

TIMEOUT = 5.0
MAX_BODY = 1 << 20  # the --max-body the table's server runs with
FOLLOW = b"GET /h/follow HTTP/1.1\r\nHost: x\r\n\r\n"


@dataclass
class Case:
    name: str
    raw: bytes
    # The status of each response expected on the connection, in order;
    # a set where the RFC leaves more than one right answer.
    want: tuple[int | frozenset[int], ...]
    # After a refusal the connection is closed; an accepted request leaves
    # it open, and a second request on it is answered 200.
    reached: tuple[str, ...] = ()  # targets the application must see
    why: str = ""
    headers: dict[str, str] = field(default_factory=dict)  # expected in the last response
    # An accepted request on which the server may close the connection
    # after its answer (HTTP/1.0 without keep-alive).
    may_close: bool = False
    # Only an application that takes WebSockets (ASGI) answers it.
    websocket: bool = False
    # A refusal after which the connection may stay open: the request was
    # framed soundly, only its content is refused.
    may_keep: bool = False

    @property
    def accepted(self) -> bool:
        last = self.want[-1]
        return isinstance(last, int) and last < 400


def _req(name: str, *lines: str, version: str = "HTTP/1.1", method: str = "GET", body: bytes = b"",
         host: bool = True) -> bytes:
    head = [f"{method} /h/{name} {version}"]
    if host:
        head.append("Host: x")
    head += lines
    return ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body


def _smuggle(name: str) -> bytes:
    return f"GET /smuggled/{name} HTTP/1.1\r\nHost: x\r\n\r\n".encode()


def _chunked(name: str, body: bytes) -> bytes:
    return _req(name, "Transfer-Encoding: chunked", method="POST", body=body)


def cases(max_body: int = MAX_BODY) -> list[Case]:
    big = "a" * (20 << 10)
    s = _smuggle
    table = [
        # The request line.
        Case("version-9.9", _req("version-9.9", version="HTTP/9.9"), (505,), why="RFC 9110 15.6.6"),
        Case("version-2.0", _req("version-2.0", version="HTTP/2.0"), (505,), why="HTTP/2 is not spoken over HTTP/1 framing"),
        Case("version-1.2", _req("version-1.2", version="HTTP/1.2"), (200,), ("/h/version-1.2",),
             why="RFC 9110 2.5: a higher minor version is served as 1.1", may_close=True),
        Case("version-1.0", _req("version-1.0", version="HTTP/1.0"), (200,), ("/h/version-1.0",), may_close=True),
        Case("version-0.9", b"GET /h/version-0.9\r\n\r\n", (400,), why="no HTTP/0.9"),
        Case("version-lowercase", _req("version-lowercase", version="http/1.1"), (400,),
             why="RFC 9112 2.3: HTTP-name is case-sensitive"),
        Case("version-garbage", _req("version-garbage", version="HTTP/1.1x"), (400,)),
        Case("method-bad-byte", b"G(T /h/method-bad-byte HTTP/1.1\r\nHost: x\r\n\r\n", (400,),
             why="a method is a token"),
        Case("target-no-slash", b"GET h/target-no-slash HTTP/1.1\r\nHost: x\r\n\r\n", (400,)),
        Case("target-control", b"GET /h/target\x01control HTTP/1.1\r\nHost: x\r\n\r\n", (400,)),
        Case("target-obs-text", b"GET /h/target-caf\xc3\xa9 HTTP/1.1\r\nHost: x\r\n\r\n", (400,),
             why="RFC 9112 3.2: a target is URI characters; others are percent-encoded"),
        Case("target-fragment", b"GET /h/target-fragment?b=1#frag HTTP/1.1\r\nHost: x\r\n\r\n", (200,),
             ("/h/target-fragment?b=1",), why="RFC 9112 3.2: no fragment in a target; dropped, as browsers do"),
        Case("target-fragment-path", b"GET /h/target-fragment-path#frag?b=1 HTTP/1.1\r\nHost: x\r\n\r\n", (200,),
             ("/h/target-fragment-path",), why="everything from the '#' on is the fragment"),
        Case("target-two-spaces", b"GET  /h/target-two-spaces HTTP/1.1\r\nHost: x\r\n\r\n", (400,),
             why="RFC 9112 3: one SP between the parts"),
        Case("absolute-form", b"GET http://x/h/absolute-form HTTP/1.1\r\nHost: x\r\n\r\n", (200,),
             ("/h/absolute-form",), why="RFC 9112 3.2.2: a server MUST accept it"),
        Case("asterisk-options", b"OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n", (200,),
             why="answered by the server, as net/http does"),
        Case("asterisk-get", b"GET * HTTP/1.1\r\nHost: x\r\n\r\n", (400,),
             why="asterisk-form is for OPTIONS only"),
        Case("line-too-long", _req("line-too-long?" + big), (frozenset({414, 431}),),
             why="the request line and headers share the 16 KiB head"),
        # Host.
        Case("host-missing", _req("host-missing", host=False), (400,), why="RFC 9112 3.2"),
        Case("host-missing-1.0", _req("host-missing-1.0", version="HTTP/1.0", host=False), (200,),
             ("/h/host-missing-1.0",), may_close=True),
        Case("host-doubled", _req("host-doubled", "Host: y"), (400,), why="RFC 9112 3.2"),
        Case("host-bad", b"GET /h/host-bad HTTP/1.1\r\nHost: a b\r\n\r\n", (400,)),
        # Header lines.
        Case("bare-lf", b"GET /h/bare-lf HTTP/1.1\nHost: x\n\n", (400,),
             why="RFC 9112 2.2 allows it; a proxy that disagrees is a smuggling path"),
        Case("bare-cr", b"GET /h/bare-cr HTTP/1.1\r\nHost: x\rX-A: b\r\n\r\n", (400,), why="RFC 9112 2.2"),
        Case("obs-fold", _req("obs-fold", "X-A: a", " b"), (400,), why="RFC 9112 5.2: rejected, not unfolded"),
        Case("space-before-colon", _req("space-before-colon", "X-A : b"), (400,), why="RFC 9112 5.1: MUST reject"),
        Case("name-control", _req("name-control", "X\x01A: b"), (400,)),
        Case("name-empty", _req("name-empty", ": b"), (400,)),
        Case("no-colon", _req("no-colon", "X-A b"), (400,)),
        Case("value-control", _req("value-control", "X-A: a\x01b"), (400,), why="RFC 9110 5.5"),
        Case("value-nul", _req("value-nul", "X-A: a\x00b"), (400,), why="RFC 9110 5.5"),
        Case("value-del", _req("value-del", "X-A: a\x7fb"), (400,)),
        Case("value-obs-text", _req("value-obs-text", "X-A: caf\xe9"), (200,), ("/h/value-obs-text",),
             why="obs-text is allowed"),
        Case("header-too-big", _req("header-too-big", "X-A: " + big), (431,)),
        Case("header-count", _req("header-count", *(f"X-{i}: v" for i in range(101))), (431,),
             why="more than 100 header lines"),
        Case("header-count-100", _req("header-count-100", *(f"X-{i}: v" for i in range(99))), (200,),
             ("/h/header-count-100",)),
        # Framing.
        Case("cl-te", _req("cl-te", "Content-Length: 5", "Transfer-Encoding: chunked", method="POST",
                           body=b"0\r\n\r\n" + s("cl-te")), (400,),
             why="RFC 9112 6.1: both is the smuggling shape; refused and closed"),
        Case("te-cl", _req("te-cl", "Transfer-Encoding: chunked", "Content-Length: 40", method="POST",
                           body=b"0\r\n\r\n" + s("te-cl")), (400,)),
        Case("cl-twice-same", _req("cl-twice-same", "Content-Length: 5", "Content-Length: 5",
                                   method="POST", body=b"hello"), (400,),
             why="RFC 9110 8.6 allows either; the strict one"),
        Case("cl-list-same", _req("cl-list-same", "Content-Length: 5, 5", method="POST", body=b"hello"), (400,)),
        Case("cl-conflict", _req("cl-conflict", "Content-Length: 5", "Content-Length: 6", method="POST",
                                 body=b"hello!"), (400,)),
        Case("cl-plus", _req("cl-plus", "Content-Length: +5", method="POST", body=b"hello"), (400,)),
        Case("cl-negative", _req("cl-negative", "Content-Length: -1", method="POST"), (400,)),
        Case("cl-hex", _req("cl-hex", "Content-Length: 0x5", method="POST", body=b"hello"), (400,)),
        Case("cl-overflow", _req("cl-overflow", "Content-Length: 99999999999999999999999", method="POST"),
             (frozenset({400, 413}),)),
        Case("cl-leading-zeros", _req("cl-leading-zeros", "Content-Length: 005", method="POST", body=b"hello"),
             (200,), ("/h/cl-leading-zeros",), why="1*DIGIT"),
        Case("te-gzip", _req("te-gzip", "Transfer-Encoding: gzip", method="POST"), (501,),
             why="RFC 9112 6.1: an unknown coding"),
        Case("te-chunked-not-last", _req("te-chunked-not-last", "Transfer-Encoding: chunked, gzip", method="POST",
                                         body=b"0\r\n\r\n"), (frozenset({400, 501}),), why="RFC 9112 6.3"),
        Case("te-chunked-twice", _req("te-chunked-twice", "Transfer-Encoding: chunked, chunked", method="POST",
                                      body=b"0\r\n\r\n"), (400,), why="RFC 9112 6.1"),
        Case("te-identity", _req("te-identity", "Transfer-Encoding: identity", method="POST"),
             (frozenset({400, 501}),)),
        Case("te-http10", _req("te-http10", "Transfer-Encoding: chunked", method="POST", version="HTTP/1.0",
                               body=b"0\r\n\r\n"), (400,), why="RFC 9112 6.1: faulty framing"),
        Case("te-vtab", _req("te-vtab", "Transfer-Encoding: \x0bchunked", method="POST",
                             body=b"0\r\n\r\n"), (frozenset({400, 501}),)),
        Case("chunk-ok", _chunked("chunk-ok", b"5\r\nhello\r\n0\r\n\r\n"), (200,), ("/h/chunk-ok",)),
        Case("chunk-extension", _chunked("chunk-extension", b"5;a=b;c\r\nhello\r\n0\r\n\r\n"), (200,),
             ("/h/chunk-extension",), why="RFC 9112 7.1.1: extensions are ignored"),
        Case("chunk-trailer", _chunked("chunk-trailer", b"5\r\nhello\r\n0\r\nX-T: 1\r\n\r\n"), (200,),
             ("/h/chunk-trailer",)),
        Case("chunk-trailer-fields", _chunked("chunk-trailer-fields", b"5\r\nhello\r\n0\r\nContent-Type: text/plain\r\n"
                                              b"Content-Length: 40\r\nTransfer-Encoding: chunked\r\nHost: y\r\n\r\n"),
             (200,), ("/h/chunk-trailer-fields",),
             why="RFC 9112 7.1.2: trailer fields may be discarded; they are, whatever their names"),
        Case("chunk-trailer-no-colon", _chunked("chunk-trailer-no-colon", b"5\r\nhello\r\n0\r\nX-T 1\r\n\r\n"), (400,),
             why="RFC 9112 5: a field line has a colon"),
        Case("chunk-trailer-space-before-colon", _chunked("chunk-trailer-space-before-colon",
                                                          b"5\r\nhello\r\n0\r\nX-T : 1\r\n\r\n"), (400,),
             why="RFC 9112 5.1"),
        Case("chunk-extension-bws", _chunked("chunk-extension-bws", b"5 ; a = b ;c\r\nhello\r\n0\r\n\r\n"), (200,),
             ("/h/chunk-extension-bws",), why="RFC 9112 7.1.1: BWS around ';' and '='"),
        Case("chunk-extension-quoted", _chunked("chunk-extension-quoted", b'5;a="b; \\"c"\r\nhello\r\n0\r\n\r\n'),
             (200,), ("/h/chunk-extension-quoted",), why="RFC 9112 7.1.1: a value may be a quoted-string"),
        Case("chunk-size-trailing-space", _chunked("chunk-size-trailing-space", b"5 \r\nhello\r\n0\r\n\r\n"), (400,),
             why="RFC 9112 7.1: chunk-size [ chunk-ext ] CRLF; BWS only before ';'"),
        Case("chunk-extension-empty-name", _chunked("chunk-extension-empty-name", b"5;\r\nhello\r\n0\r\n\r\n"), (400,),
             why="RFC 9112 7.1.1: chunk-ext-name is a token"),
        Case("chunk-extension-empty-value", _chunked("chunk-extension-empty-value", b"5;a=\r\nhello\r\n0\r\n\r\n"), (400,),
             why="RFC 9112 7.1.1: chunk-ext-val is a token or a quoted-string"),
        Case("chunk-size-overflow", _chunked("chunk-size-overflow", b"FFFFFFFFFFFFFFFFFFFF\r\nhello\r\n0\r\n\r\n"),
             (frozenset({400, 413}),)),
        Case("chunk-size-0x", _chunked("chunk-size-0x", b"0x5\r\nhello\r\n0\r\n\r\n"), (400,)),
        Case("chunk-size-negative", _chunked("chunk-size-negative", b"-5\r\nhello\r\n0\r\n\r\n"), (400,)),
        Case("chunk-size-space", _chunked("chunk-size-space", b" 5\r\nhello\r\n0\r\n\r\n"), (400,)),
        Case("chunk-size-empty", _chunked("chunk-size-empty", b"\r\nhello\r\n0\r\n\r\n"), (400,)),
        Case("chunk-extension-control", _chunked("chunk-extension-control", b"5;a=\x01\r\nhello\r\n0\r\n\r\n"),
             (400,)),
        Case("chunk-data-overrun", _chunked("chunk-data-overrun", b"5\r\nhelloXX\r\n0\r\n\r\n" + s("chunk-data-overrun")),
             (400,)),
        Case("chunk-bare-lf", _chunked("chunk-bare-lf", b"5\nhello\n0\n\n"), (400,)),
        Case("chunk-extension-long", _chunked("chunk-extension-long", b"5;" + big.encode() + b"\r\nhello\r\n0\r\n\r\n"),
             (frozenset({400, 413, 431}),), why="bounded"),
        # Pipelining: the bad one in the middle ends the connection; the
        # one after it is never read.
        Case("pipelined-bad-middle", _req("pipelined-1") + _req("pipelined-2", version="HTTP/9.9")
             + _req("pipelined-3"), (200, 505), ("/h/pipelined-1",)),
        Case("pipelined-ok", _req("pipelined-a") + _req("pipelined-b"), (200, 200), ("/h/pipelined-a", "/h/pipelined-b")),
        # Expect.
        Case("expect-over-cap", _req("expect-over-cap", "Expect: 100-continue", f"Content-Length: {2 * max_body}",
                                     method="POST"), (413,), why="answered before the body is sent"),
        Case("expect-unknown", _req("expect-unknown", "Expect: something", "Content-Length: 5", method="POST",
                                    body=b"hello"), (417,), why="RFC 9110 10.1.1"),
        # WebSocket handshakes.
        Case("websocket-bad-key", _req("websocket-bad-key", "Upgrade: websocket", "Connection: Upgrade",
                                       "Sec-WebSocket-Key: short", "Sec-WebSocket-Version: 13"), (400,),
             why="RFC 6455 4.2.1", websocket=True, may_keep=True),
        Case("websocket-bad-version", _req("websocket-bad-version", "Upgrade: websocket", "Connection: Upgrade",
                                           "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==",
                                           "Sec-WebSocket-Version: 8"), (frozenset({400, 426}),),
             headers={"sec-websocket-version": "13"}, why="RFC 6455 4.4", websocket=True, may_keep=True),
    ]
    return table


@dataclass
class Result:
    statuses: list[int]
    closed: bool  # the server closed the connection after its answers
    follow: int | None  # the status of a valid request sent after, if the connection stayed open
    headers: dict[str, str]

    def describe(self) -> str:
        got = ",".join(map(str, self.statuses)) or "none"
        if self.follow is not None:
            got += f" then {self.follow}"
        return got + (" closed" if self.closed else " open")


def _read_response(sock: socket.socket, buf: bytearray) -> tuple[int, dict[str, str]] | None:
    """One response off sock (buf holds bytes read ahead); None at EOF."""
    while b"\r\n\r\n" not in buf:
        chunk = sock.recv(65536)
        if not chunk:
            return None
        buf += chunk
    head, _, rest = bytes(buf).partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ")[1])
    headers: dict[str, str] = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        headers[k.strip().lower()] = v.strip()
    del buf[: len(head) + 4]
    if status == 100:
        return _read_response(sock, buf)
    if "content-length" in headers:
        n = int(headers["content-length"])
        while len(buf) < n:
            chunk = sock.recv(65536)
            if not chunk:
                break
            buf += chunk
        del buf[:n]
    elif headers.get("transfer-encoding", "").lower() == "chunked":
        while not buf.endswith(b"0\r\n\r\n"):
            chunk = sock.recv(65536)
            if not chunk:
                break
            buf += chunk
        buf.clear()
    elif status not in (101, 204, 304) and status >= 200:
        while chunk := sock.recv(65536):  # a body to the close
            buf += chunk
        buf.clear()
    return status, headers


def probe(addr: tuple[str, int], case: Case, prefix: str = "") -> Result:
    """Sends case on a new connection to addr, its targets under prefix."""
    raw, follow_req = case.raw, FOLLOW
    if prefix:
        p = prefix.encode()
        raw = raw.replace(b"/h/", p + b"/h/").replace(b"/smuggled/", p + b"/smuggled/")
        follow_req = follow_req.replace(b"/h/", p + b"/h/")
    with socket.create_connection(addr, timeout=TIMEOUT) as sock:
        sock.sendall(raw)
        buf = bytearray()
        statuses: list[int] = []
        headers: dict[str, str] = {}
        closed = False
        try:
            for _ in case.want:
                got = _read_response(sock, buf)
                if got is None:
                    closed = True
                    break
                statuses.append(got[0])
                headers = got[1]
                if got[0] == 101:
                    break
        except (ConnectionResetError, TimeoutError, socket.timeout):
            closed = True
        follow = None
        if not closed:
            # Did the server close, or does it answer a valid request next?
            try:
                sock.sendall(follow_req)
                got = _read_response(sock, buf)
                if got is None:
                    closed = True
                else:
                    follow = got[0]
            except (ConnectionResetError, BrokenPipeError, TimeoutError, socket.timeout):
                closed = True
        return Result(statuses, closed, follow, headers)


def verdict(case: Case, r: Result) -> str | None:
    """What is wrong with r as the answer to case, or None."""
    if len(r.statuses) != len(case.want):
        return f"{r.describe()}: wanted {len(case.want)} responses"
    for got, want in zip(r.statuses, case.want):
        if got != want and not (isinstance(want, frozenset) and got in want):
            return f"{r.describe()}: wanted {_show(case.want)}"
    if case.accepted and r.follow != 200 and not (case.may_close and r.closed):
        return f"{r.describe()}: the connection should stay usable"
    if not case.accepted and not r.closed and not (case.may_keep and r.follow == 200):
        return f"{r.describe()}: a refused request leaves the connection open"
    for k, v in case.headers.items():
        if r.headers.get(k) != v:
            return f"{r.describe()}: wanted header {k}: {v}, got {r.headers.get(k)!r}"
    return None


def _show(want: tuple[int | frozenset[int], ...]) -> str:
    return ",".join("/".join(map(str, sorted(w))) if isinstance(w, frozenset) else str(w) for w in want)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("servers", nargs="+", metavar="NAME=HOST:PORT[/PREFIX][+ws]",
                    help="a server to try; +ws: its application takes WebSockets")
    ap.add_argument("--max-body", type=int, default=MAX_BODY)
    args = ap.parse_args()
    columns = []
    for spec in args.servers:
        name, _, rest = spec.rpartition("=")
        websocket = rest.endswith("+ws")
        rest = rest.removesuffix("+ws")
        addr, slash, prefix = rest.partition("/")
        host, _, port = addr.rpartition(":")
        columns.append((name or addr, (host, int(port)), slash + prefix if prefix else "", websocket))
    print("| case | strict answer | " + " | ".join(c[0] for c in columns) + " |")
    print("|---|---|" + "---|" * len(columns))
    differs = 0
    for case in cases(args.max_body):
        cells = []
        for _, addr, prefix, websocket in columns:
            if case.websocket and not websocket:
                cells.append("n/a")
                continue
            try:
                r = probe(addr, case, prefix)
                wrong = verdict(case, r)
                cell = r.describe()
            except OSError as e:
                wrong, cell = str(e), type(e).__name__
            if wrong is not None:
                differs += 1
                cell = f"**{cell}**"
            cells.append(cell)
        want = _show(case.want) + (" closed" if not case.accepted and not case.may_keep else "")
        print(f"| {case.name} | {want} | " + " | ".join(cells) + " |")
    return 1 if differs else 0


if __name__ == "__main__":
    sys.exit(main())
