# Run once in the namespace of the built-in _m0 module when the interpreter
# starts. Nothing here is on the per-request path except FileWrapper.
import importlib
import inspect
import json
import sys
import threading  # here, on the main thread: threading.main_thread() is the thread it is first imported on
import traceback


def _format_exc(etype, value, tb):
    return "".join(traceback.format_exception(etype, value, tb)).rstrip("\n")


class RequestTimeout(BaseException):
    """Raised in the thread of a request that has run past the server's
    --timeout, at its next bytecode."""


def _timed_out(header):
    """Writes header, then every Python thread's stack, on standard error
    (fd 2), as one record: a request has run past --timeout."""
    import faulthandler
    import os
    sys.stderr.flush()
    os.write(2, header.encode("utf-8", "replace"))
    faulthandler.dump_traceback(file=2, all_threads=True)
    return ""


class FileWrapper:
    """wsgi.file_wrapper: iterates a file-like object in blocks."""

    def __init__(self, filelike, blksize=8192):
        self.filelike = filelike
        # The body is buffered or streamed by the server; bigger reads cost less.
        self.blksize = max(int(blksize), 65536)

    def __iter__(self):
        return self

    def __next__(self):
        data = self.filelike.read(self.blksize)
        if data:
            return data
        raise StopIteration

    def close(self):
        close = getattr(self.filelike, "close", None)
        if close is not None:
            close()


def _wsgi_template(multithread, multiprocess):
    return {
        "wsgi.version": (1, 0),
        "wsgi.url_scheme": "http",
        "wsgi.errors": sys.stderr,
        "wsgi.multithread": multithread,
        "wsgi.multiprocess": multiprocess,
        "wsgi.run_once": False,
        "wsgi.file_wrapper": FileWrapper,
        "wsgi.input_terminated": True,
        "SCRIPT_NAME": "",
    }


class LoadError(Exception):
    """The application spec named nothing that can be served."""


_loaded_apps = {}


class _Loaded:
    def __init__(self, spec, app, protocol):
        self.spec = spec
        self.app = app
        self.protocol = protocol


def _candidates(spec):
    if ":" in spec:
        module, _, attr = spec.partition(":")
        return [(module, attr or "application")], False
    m = spec
    return [
        (m + ".asgi", "application"),
        (m + ".wsgi", "application"),
        (m, "app"),
        (m + ".main", "app"),
        (m, "application"),
    ], True


def _missing_itself(err, module):
    # A ModuleNotFoundError for the candidate (or a parent package of it) means
    # "try the next one"; one raised from inside the module is the app's error.
    name = err.name or ""
    return module == name or module.startswith(name + ".")


def _resolve(obj, attr):
    call = attr.endswith("()")
    for part in (attr[:-2] if call else attr).split("."):
        obj = getattr(obj, part)
    return obj() if call else obj


def _classify(app):
    if inspect.iscoroutinefunction(app):
        return "asgi"
    call = getattr(app, "__call__", None)
    if call is not None and inspect.iscoroutinefunction(call):
        return "asgi"
    return "wsgi"


def _load(arg):
    req = json.loads(arg)
    spec, app_dir = req["spec"], req["app_dir"]
    forced = req.get("protocol") or ""
    accept = [forced] if forced else req.get("accept") or ["wsgi", "asgi"]
    if req.get("sys_path"):  # a subinterpreter takes the main interpreter's path
        sys.path[:] = req["sys_path"]
    if app_dir and (not sys.path or sys.path[0] != app_dir):
        sys.path.insert(0, app_dir)
    candidates, bare = _candidates(spec)
    tried = []
    found = None
    for module_name, attr in candidates:
        tried.append(module_name + ":" + attr)
        try:
            module = _import(module_name)
        except ModuleNotFoundError as err:
            if bare and _missing_itself(err, module_name):
                continue
            raise
        try:
            app = _resolve(module, attr)
        except AttributeError:
            if bare:
                continue
            raise LoadError(
                "module %r has no attribute %r" % (module_name, attr)
            ) from None
        if not callable(app):
            raise LoadError("%s:%s is not callable (it is %s)" % (module_name, attr, type(app).__name__))
        detected = _classify(app)
        loaded = _Loaded(module_name + ":" + attr, app, forced or detected)
        _loaded_apps[loaded.spec] = app
        # Discovery passes over a candidate of a protocol this server does
        # not take (a Django project's asgi.py, when serving WSGI).
        if not bare or detected in accept:
            return loaded
        found = found or loaded
    if found is not None:
        return found
    raise LoadError("no application found for %r (tried %s)" % (spec, ", ".join(tried)))


# ---- free-threaded CPython ---------------------------------------------------
# On a free-threaded build an extension module that does not declare that it
# runs without the GIL turns the GIL back on as it is imported, and CPython
# says so in a RuntimeWarning. The application's imports are watched for it,
# so that the server can name the module in one line and in the doctor.

_GIL_WARNING = "The global interpreter lock (GIL) has been enabled to load module '"
_gil_enabled_by = ""  # the module whose import turned the GIL back on


def _import(module_name):
    """importlib.import_module, noting which module turned the GIL back on
    when the import did. That warning is taken (m0serve says it in one line
    of its own); every other goes to the showwarning in place, as it comes,
    and whatever the import sets up (filters, logging.captureWarnings) is
    left as it set it."""
    is_on = getattr(sys, "_is_gil_enabled", None)
    if is_on is None or is_on():
        return importlib.import_module(module_name)
    import warnings

    shown = warnings.showwarning

    def watch(message, category, filename, lineno, file=None, line=None):
        global _gil_enabled_by
        text = str(message)
        if issubclass(category, RuntimeWarning) and text.startswith(_GIL_WARNING) and not _gil_enabled_by:
            _gil_enabled_by = text[len(_GIL_WARNING):].split("'", 1)[0]
            return
        shown(message, category, filename, lineno, file, line)

    warnings.showwarning = watch
    try:
        return importlib.import_module(module_name)
    finally:
        if warnings.showwarning is watch:  # not replaced by the application meanwhile
            warnings.showwarning = shown


def _immortal_constants():
    """On a free-threaded build, give a module compiled from source the
    constants a .pyc would give it.

    CPython 3.13t interns and immortalizes a code object's constants as it
    makes the code object, except under the built-in compile(), which
    importlib uses for a module that has no .pyc (PYTHONDONTWRITEBYTECODE,
    a read-only directory, the first start after a deploy). Such a module's
    constants keep reference counts that every thread running its code
    writes to, and two threads of a CPU-bound view then run little faster
    than one. Loading the compiled code back through marshal, as a .pyc is
    loaded, makes every code object again (nested ones too) with its
    constants immortal. A no-op on a GIL build, where nothing contends.

    The wrapper's code is named as importlib's own, so that an import's
    traceback (a SyntaxError in the application, say) is cleaned of
    importlib's frames as before."""
    if "t" not in getattr(sys, "abiflags", ""):  # a free-threaded build's flags carry "t"
        return
    import marshal
    from importlib import _bootstrap_external

    compiled = _bootstrap_external.SourceLoader.source_to_code

    def source_to_code(self, *args, **kwargs):
        return marshal.loads(marshal.dumps(compiled(self, *args, **kwargs)))

    source_to_code.__doc__ = compiled.__doc__
    source_to_code.__code__ = source_to_code.__code__.replace(co_filename=compiled.__code__.co_filename)
    _bootstrap_external.SourceLoader.source_to_code = source_to_code


_immortal_constants()


def _gil(_arg):
    """The GIL's state, as JSON: whether it is on now, and, where it can be
    off (3.13+), the module that turned it on or the variable."""
    import os

    is_on = getattr(sys, "_is_gil_enabled", None)
    on = True if is_on is None else bool(is_on())
    by = ""
    if is_on is not None and on:
        by = _gil_enabled_by or ("PYTHON_GIL=" + os.environ["PYTHON_GIL"] if os.environ.get("PYTHON_GIL") else "")
    return json.dumps({"enabled": on, "by": by})


def _addsitedirs(arg):
    import site

    added = []
    for d in json.loads(arg):
        if d not in sys.path:
            site.addsitedir(d)
            added.append(d)
    return json.dumps(added)


# ---- ASGI ------------------------------------------------------------------
# The executor's loop. The per-request path (scope, receive, send, the task)
# is in C (asgi.c); what is here runs once, or once per lifespan event.

_A_SHUTDOWN, _A_STOP = 8, 9
_C_LOOP, _C_LIFESPAN = 20, 21
_L_STARTED, _L_FAILED, _L_UNSUPPORTED, _L_STOPPED, _L_STOP_FAILED = 0, 1, 2, 3, 4


class _Lifespan:
    """The lifespan protocol, as uvicorn's "auto": an application that does
    not take it is served anyway."""

    def __init__(self, loop, app, state, answer):
        import asyncio

        self.answer = answer
        self.app = app
        self.state = state
        self.inbox = asyncio.Queue()
        self.phase = "startup"
        self.answered = False
        self.task = loop.create_task(self.run())

    async def receive(self):
        return await self.inbox.get()

    async def send(self, message):
        kind = message.get("type") if isinstance(message, dict) else None
        text = str(message.get("message", "")) if isinstance(message, dict) else ""
        if self.phase == "startup" and kind == "lifespan.startup.complete":
            self._answer(_L_STARTED, "")
        elif self.phase == "startup" and kind == "lifespan.startup.failed":
            self._answer(_L_FAILED, text or "lifespan.startup.failed")
        elif self.phase == "shutdown" and kind == "lifespan.shutdown.complete":
            self._answer(_L_STOPPED, "")
        elif self.phase == "shutdown" and kind == "lifespan.shutdown.failed":
            self._answer(_L_STOP_FAILED, text or "lifespan.shutdown.failed")
        else:
            raise RuntimeError("asgi: unexpected lifespan message %r in the %s phase" % (kind, self.phase))

    def _answer(self, code, text):
        self.answered = True
        self.answer(code, text)

    async def run(self):
        scope = {
            "type": "lifespan",
            "asgi": {"version": "3.0", "spec_version": "2.0"},
            "state": self.state,
        }
        await self.inbox.put({"type": "lifespan.startup"})
        try:
            await self.app(scope, self.receive, self.send)
        except BaseException as exc:  # noqa: BLE001 - reported, never raised in the loop
            if self.phase == "startup" and not self.answered:
                # uvicorn's "auto": an application that raises before it
                # answers does not support lifespan, and is served anyway.
                self._answer(_L_UNSUPPORTED, _format_exc(type(exc), exc, exc.__traceback__))
            elif self.phase == "shutdown" and not self.answered:
                self._answer(_L_STOP_FAILED, _format_exc(type(exc), exc, exc.__traceback__))
            return
        if not self.answered:
            self._answer(_L_UNSUPPORTED if self.phase == "startup" else _L_STOPPED, "")

    def shutdown(self):
        self.phase = "shutdown"
        self.answered = False
        if self.task.done():
            # The application returned (no lifespan, or a failed startup).
            self._answer(_L_STOPPED, "")
            return
        self.inbox.put_nowait({"type": "lifespan.shutdown"})


async def _receive_later(waiter, take):
    """What receive() returns when no message is there yet: it waits to be
    woken, then takes the message, or waits again when another receive()
    took it first. A cancellation before it resumes leaves the message for
    the next receive()."""
    while True:
        await waiter
        message, waiter = take()
        if waiter is None:
            return message


def _asgi_run(exec_id, app, in_fd, opts):
    """Runs executor exec_id's loop for app until Go stops it."""
    import asyncio

    def answer(code, text):
        asgi_notify(exec_id, _C_LIFESPAN, code, text)

    lifespan = None

    def event(kind, flags):
        if kind == _A_SHUTDOWN:
            if lifespan is None:
                answer(_L_STOPPED, "")
            else:
                lifespan.shutdown()
        elif kind == _A_STOP:
            loop.stop()

    o = json.loads(opts)
    want = o.get("loop", "auto")
    loop = None
    name = "asyncio"
    if want in ("auto", "uvloop"):
        try:
            import uvloop
        except ImportError:
            if want == "uvloop":
                raise
        else:
            loop = uvloop.new_event_loop()
            name = "uvloop"
    if loop is None:
        loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    eager = sys.version_info >= (3, 12)
    state = {}
    asgi_setup(exec_id, loop, app, state, eager, event)
    try:
        loop.add_reader(in_fd, asgi_drain, exec_id)
        asgi_notify(exec_id, _C_LOOP, 1 if eager else 0, name)
        if o.get("lifespan", True):
            lifespan = _Lifespan(loop, app, state, answer)
        else:
            answer(_L_UNSUPPORTED, "")
        loop.run_forever()
        loop.remove_reader(in_fd)
        tasks = [t for t in asyncio.all_tasks(loop) if not t.done()]
        for t in tasks:
            t.cancel()
        if tasks:
            loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
        loop.run_until_complete(loop.shutdown_asyncgens())
    finally:
        asgi_teardown(exec_id)
        asyncio.set_event_loop(None)
        if not loop.is_running():
            loop.close()


class _BufferedASGI:
    """An ASGI application as a WSGI callable, for --blocking-threads N > 0:
    each request runs to its end on the pool thread that took it, on that
    thread's own event loop, with its body buffered both ways. The scope is
    built from the WSGI environ, so a header whose name holds an underscore
    is dropped, as for WSGI. The lifespan runs on a loop of its own thread,
    which lives as long as the process."""

    def __init__(self, app):
        import threading

        self.app = app
        self.state = {}
        self.local = threading.local()
        self.lifespan = None
        self.outcome = None
        self.answered = threading.Event()

    # -- lifespan

    def _answer(self, code, text):
        self.outcome = (code, text)
        self.answered.set()

    def startup(self):
        import asyncio
        import threading

        def run():
            loop = asyncio.new_event_loop()
            self.lifespan_loop = loop
            asyncio.set_event_loop(loop)
            self.lifespan = _Lifespan(loop, self.app, self.state, self._answer)
            loop.run_forever()

        self.answered.clear()
        threading.Thread(target=run, name="m0-lifespan", daemon=True).start()
        self.answered.wait()
        return self.outcome

    def shutdown(self):
        if self.lifespan is None:
            return (_L_STOPPED, "")
        self.answered.clear()
        self.lifespan_loop.call_soon_threadsafe(self.lifespan.shutdown)
        self.answered.wait()
        self.lifespan_loop.call_soon_threadsafe(self.lifespan_loop.stop)
        return self.outcome

    # -- requests

    def _loop(self):
        loop = getattr(self.local, "loop", None)
        if loop is None:
            import asyncio

            loop = self.local.loop = asyncio.new_event_loop()
        return loop

    def _scope(self, environ):
        headers = []
        for key, value in environ.items():
            if key.startswith("HTTP_"):
                name = key[5:]
            elif key in ("CONTENT_TYPE", "CONTENT_LENGTH"):
                name = key
            else:
                continue
            headers.append((name.lower().replace("_", "-").encode("latin-1"), value.encode("latin-1")))
        uri = environ.get("REQUEST_URI") or environ.get("RAW_URI") or environ.get("PATH_INFO", "/")
        raw_path = uri.split("?", 1)[0].encode("latin-1")
        # ASGI's path is the whole path; root_path is the mount's prefix in it.
        path = (environ.get("SCRIPT_NAME", "") + environ.get("PATH_INFO", "")).encode("latin-1").decode("utf-8", "replace")
        client = None
        if environ.get("REMOTE_ADDR"):
            client = (environ["REMOTE_ADDR"], int(environ.get("REMOTE_PORT") or 0))
        return {
            "type": "http",
            "asgi": {"version": "3.0", "spec_version": "2.3"},
            "http_version": environ.get("SERVER_PROTOCOL", "HTTP/1.1")[5:],
            "method": environ["REQUEST_METHOD"],
            "scheme": environ.get("wsgi.url_scheme", "http"),
            "path": path,
            "raw_path": raw_path,
            "query_string": environ.get("QUERY_STRING", "").encode("latin-1"),
            "root_path": environ.get("SCRIPT_NAME", ""),
            "headers": headers,
            "client": client,
            "server": (environ.get("SERVER_NAME", ""), int(environ.get("SERVER_PORT") or 0)),
            "state": dict(self.state),
            "extensions": {"http.response.pathsend": {}},
        }

    def __call__(self, environ, start_response):
        import asyncio
        import http

        scope = self._scope(environ)
        body = environ["wsgi.input"].read()
        loop = self._loop()
        done = asyncio.Event()
        response = {"status": None, "headers": [], "body": [], "complete": False}
        delivered = False

        async def receive():
            nonlocal delivered
            if not delivered:
                delivered = True
                return {"type": "http.request", "body": body, "more_body": False}
            await done.wait()
            return {"type": "http.disconnect"}

        async def send(message):
            kind = message["type"]
            if response["status"] is None:
                if kind != "http.response.start":
                    raise RuntimeError("Expected ASGI message 'http.response.start', but got '%s'." % kind)
                response["status"] = int(message["status"])
                response["headers"] = [
                    (bytes(n).decode("latin-1"), bytes(v).decode("latin-1"))
                    for n, v in message.get("headers", [])
                ]
            elif response["complete"]:
                raise RuntimeError("Unexpected ASGI message '%s' sent, after response already completed." % kind)
            elif kind == "http.response.body":
                response["body"].append(bytes(message.get("body", b"")))
                if not message.get("more_body", False):
                    response["complete"] = True
                    done.set()
            elif kind == "http.response.pathsend":
                # The body is buffered on this path: the file's bytes, read here.
                with open(message["path"], "rb") as f:
                    response["body"].append(f.read())
                response["complete"] = True
                done.set()
            else:
                raise RuntimeError("Expected ASGI message 'http.response.body', but got '%s'." % kind)

        async def call():
            await self.app(scope, receive, send)

        loop.run_until_complete(call())
        if not response["complete"]:
            raise RuntimeError(
                "ASGI callable returned without %s response."
                % ("starting" if response["status"] is None else "completing")
            )
        status = response["status"]
        try:
            reason = http.HTTPStatus(status).phrase
        except ValueError:
            reason = "Unknown"
        start_response("%d %s" % (status, reason), response["headers"])
        return [b"".join(response["body"])]


_buffered = {}


def _asgi_buffered(spec):
    b = _BufferedASGI(_loaded_apps[spec])
    b.id = str(len(_buffered) + 1)
    _buffered[b.id] = b
    return b


def _asgi_buffered_as(arg):
    """The application a subinterpreter loaded, wrapped under the key the
    main interpreter's wrapper has, so that its lifespan is called alike."""
    req = json.loads(arg)
    b = _BufferedASGI(_loaded_apps[req["spec"]])
    b.id = req["id"]
    _buffered[b.id] = b
    return b


def _asgi_buffered_lifespan(arg):
    req = json.loads(arg)
    b = _buffered[req["id"]]
    code, text = b.startup() if req["phase"] == "startup" else b.shutdown()
    return json.dumps({"code": code, "msg": text})
