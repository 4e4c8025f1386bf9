# Run once in the namespace of the built-in _m0 module when the interpreter
# starts. Nothing here is on the per-request path except FileWrapper.
import importlib
import inspect
import json
import sys
import traceback


def _format_exc(etype, value, tb):
    return "".join(traceback.format_exception(etype, value, tb)).rstrip("\n")


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
    if app_dir and (not sys.path or sys.path[0] != app_dir):
        sys.path.insert(0, app_dir)
    candidates, bare = _candidates(spec)
    tried = []
    found = None
    for module_name, attr in candidates:
        tried.append(module_name + ":" + attr)
        try:
            module = importlib.import_module(module_name)
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
        # Discovery passes over a candidate of a protocol this server does
        # not take (a Django project's asgi.py, when serving WSGI).
        if not bare or detected in accept:
            return loaded
        found = found or loaded
    if found is not None:
        return found
    raise LoadError("no application found for %r (tried %s)" % (spec, ", ".join(tried)))


def _addsitedirs(arg):
    import site

    added = []
    for d in json.loads(arg):
        if d not in sys.path:
            site.addsitedir(d)
            added.append(d)
    return json.dumps(added)
