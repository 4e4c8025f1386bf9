#define _GNU_SOURCE /* SCHED_BATCH */
#include "m0py_int.h"

#include <dlfcn.h>
#include <sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/syscall.h>
#else
#include <errno.h>
#include <pthread.h>
#include <pthread/qos.h>
#endif
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "_cgo_export.h"

/* ---- the function table ------------------------------------------------ */

struct m0_pytable py;

static void *lib;
int m0_free_threaded;

int m0_load(const char *path, int free_threaded, char *errbuf, size_t errlen)
{
	m0_free_threaded = free_threaded;
	lib = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
	if (!lib) {
		snprintf(errbuf, errlen, "%s", dlerror());
		return -1;
	}
#define X(ret, name, args)                                                              \
	py.name = (ret(*) args)dlsym(lib, #name);                                        \
	if (!py.name) {                                                                  \
		snprintf(errbuf, errlen, "%s does not export %s (not a CPython 3.10+ library)", \
			 path, #name);                                                   \
		return -1;                                                               \
	}
	M0_PY_FUNCS(X)
#undef X
#define X(name)                                                                         \
	py.name = dlsym(lib, #name);                                                     \
	if (!py.name) {                                                                  \
		snprintf(errbuf, errlen, "%s does not export %s (not a CPython 3.10+ library)", \
			 path, #name);                                                   \
		return -1;                                                               \
	}
	M0_PY_DATA(X)
#undef X
#define X(ret, name, args) py.name = (ret(*) args)dlsym(lib, #name);
	M0_PY_OPTIONAL(X)
#undef X
	/* What the library is, whatever its name or its python3 says: only a
	 * free-threaded build exports the merge of its per-thread refcounts. */
	int is_ft = dlsym(lib, "_Py_MergeZeroLocalRefcount") != NULL;
	if (is_ft != !!free_threaded) {
		snprintf(errbuf, errlen, "%s is %s, but the python3 that describes it is %s", path,
			 is_ft ? "a free-threaded build" : "a GIL build", is_ft ? "a GIL build" : "a free-threaded build");
		return -1;
	}
	if (free_threaded && !(py.PyMutex_Lock && py.PyMutex_Unlock)) {
		snprintf(errbuf, errlen, "%s is a free-threaded build without PyMutex_Lock (not CPython 3.13t or newer)", path);
		return -1;
	}
	return 0;
}

/* ---- buffers ------------------------------------------------------------- */

int buf_reserve(m0_buf *b, size_t extra)
{
	if (b->len + extra <= b->cap)
		return 0;
	size_t cap = b->cap ? b->cap : 4096;
	while (cap < b->len + extra)
		cap *= 2;
	char *p = realloc(b->p, cap);
	if (!p)
		return -1;
	b->p = p;
	b->cap = cap;
	return 0;
}

int buf_put(m0_buf *b, const void *p, size_t n)
{
	if (buf_reserve(b, n) < 0)
		return -1;
	memcpy(b->p + b->len, p, n);
	b->len += n;
	return 0;
}

int buf_put_u32(m0_buf *b, uint32_t v)
{
	return buf_put(b, &v, sizeof v);
}

void buf_set(m0_buf *b, const char *s)
{
	b->len = 0;
	buf_put(b, s, strlen(s));
}

/* Python holds on to at most this much of a buffer between requests. */
#define M0_BUF_KEEP (1u << 20)

static void buf_reset(m0_buf *b)
{
	b->len = 0;
	if (b->cap > M0_BUF_KEEP) {
		free(b->p);
		b->p = NULL;
		b->cap = 0;
	}
}

/* ---- signals --------------------------------------------------------------
 * Go owns signals. Their handlers are saved before Python starts and put back
 * after it has started and after the application is imported, since both can
 * install handlers of their own. */

static const int m0_signals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
#define M0_NSIG (sizeof m0_signals / sizeof m0_signals[0])
static struct sigaction m0_saved[M0_NSIG];

void m0_save_signals(void)
{
	for (size_t i = 0; i < M0_NSIG; i++)
		sigaction(m0_signals[i], NULL, &m0_saved[i]);
}

void m0_restore_signals(void)
{
	for (size_t i = 0; i < M0_NSIG; i++)
		sigaction(m0_signals[i], &m0_saved[i], NULL);
}

/* ---- the interpreter ------------------------------------------------------ */

m0_interp m0_interps[M0_MAX_INTERPS];
static int m0_ninterps = 1;  /* slots taken (atomic) */
static m0_thread m0_main;    /* the thread that started the interpreter */

/* Each OS thread that runs Python has one thread state per interpreter it
 * runs, created on its first call there and used on that thread alone for
 * the rest of its life. */
static __thread m0_thread *m0_here[M0_MAX_INTERPS];

int m0_gil_counting;
uint64_t m0_gil_wait_ns, m0_gil_waits;

void m0_count_gil_waits(int on) { __atomic_store_n(&m0_gil_counting, on, __ATOMIC_RELAXED); }

void m0_gil_wait_totals(uint64_t *ns, uint64_t *n)
{
	*ns = __atomic_load_n(&m0_gil_wait_ns, __ATOMIC_RELAXED);
	*n = __atomic_load_n(&m0_gil_waits, __ATOMIC_RELAXED);
}

static PyObject *m0_log(PyObject *self, PyObject *args)
{
	(void)self;
	int level;
	const char *msg;
	if (!py.PyArg_ParseTuple(args, "is", &level, &msg))
		return NULL;
	PyThreadState *ts = py.PyEval_SaveThread(); /* never block in Go holding the GIL */
	go_log(level, (char *)msg);
	m0_attach(ts);
	py.Py_IncRef(Py_None);
	return Py_None;
}

/* _m0.publish(channel: str, data: bytes, event: str = "") -> str | False |
 * None: the frame's id, False when the channel refused it (or the event),
 * None when the process publishes nowhere (the server runs without a hub).
 * event is the frame's SSE event type, "" for none. Any thread holding the
 * GIL; the GIL is released while Go publishes. channel, data and event are
 * borrowed: Go copies what it keeps. */
static PyObject *m0_publish(PyObject *self, PyObject *args)
{
	(void)self;
	PyObject *channel, *data, *event = NULL;
	if (!py.PyArg_ParseTuple(args, "UO|U", &channel, &data, &event))
		return NULL;
	Py_ssize_t clen, dlen, elen = 0;
	const char *c = py.PyUnicode_AsUTF8AndSize(channel, &clen);
	char *d;
	if (!c || py.PyBytes_AsStringAndSize(data, &d, &dlen) < 0)
		return NULL;
	const char *e = "";
	if (event && !(e = py.PyUnicode_AsUTF8AndSize(event, &elen)))
		return NULL;
	char id[64];
	PyThreadState *ts = py.PyEval_SaveThread(); /* never block in Go holding the GIL */
	int rc = go_publish((char *)c, (size_t)clen, (char *)e, (size_t)elen, d, (size_t)dlen, id, sizeof id);
	m0_attach(ts);
	if (rc < 0) {
		py.Py_IncRef(Py_None);
		return Py_None;
	}
	if (rc == 0)
		return py.PyBool_FromLong(0);
	return py.PyUnicode_FromString(id);
}

static PyMethodDef m0_methods[] = {
	{"log", m0_log, METH_VARARGS, "log(level, message): write a line to the server's log."},
	{"publish", m0_publish, METH_VARARGS,
	 "publish(channel, data, event=''): publish a frame; its id, False if refused, None without a hub."},
	{NULL, NULL, 0, NULL},
};

static int bind_wsgi(m0_thread *t);

/* setup_interp makes _m0 in the interpreter whose GIL the caller holds,
 * with the ASGI executor's functions (an executor may run in any
 * interpreter), runs the bootstrap in it and keeps what the WSGI path
 * uses, in is. 0, or -1 with a Python exception set. */
static int setup_interp(m0_interp *is, const char *bootstrap)
{
	PyObject *name = py.PyUnicode_FromString("_m0");
	is->module = name ? py.PyModule_NewObject(name) : NULL;
	if (name)
		py.Py_DecRef(name);
	if (!is->module || py.PyModule_AddFunctions(is->module, m0_methods) < 0 ||
	    py.PyModule_AddFunctions(is->module, m0_asgi_methods) < 0)
		return -1;
	name = py.PyUnicode_InternFromString("_m0");
	int set = name ? py.PyDict_SetItem(py.PyImport_GetModuleDict(), name, is->module) : -1;
	if (name)
		py.Py_DecRef(name);
	if (set < 0)
		return -1;
	is->dict = py.PyModule_GetDict(is->module); /* borrowed, lives with the module */
	/* As a module imported from source has: code that reads its caller's
	 * globals (Cython's, uvloop's) looks up __builtins__ there. */
	PyObject *builtins = py.PyImport_ImportModule("builtins");
	set = builtins ? py.PyDict_SetItemString(is->dict, "__builtins__", builtins) : -1;
	if (builtins)
		py.Py_DecRef(builtins);
	if (set < 0)
		return -1;

	PyObject *code = py.Py_CompileString(bootstrap, "<m0 bootstrap>", Py_file_input);
	if (!code)
		return -1;
	PyObject *r = py.PyEval_EvalCode(code, is->dict, is->dict);
	py.Py_DecRef(code);
	if (!r)
		return -1;
	py.Py_DecRef(r);

	is->format_exc = py.PyDict_GetItemString(is->dict, "_format_exc");
	if (!is->format_exc) {
		py.PyErr_SetString(EXC(PyExc_RuntimeError), "bootstrap did not define _format_exc");
		return -1;
	}
	py.Py_IncRef(is->format_exc);
	PyObject *io = py.PyImport_ImportModule("io");
	if (!io)
		return -1;
	is->bytesio = py.PyObject_GetAttrString(io, "BytesIO");
	py.Py_DecRef(io);
	if (!is->bytesio)
		return -1;
	is->empty_bytes = py.PyBytes_FromStringAndSize("", 0);
	is->interp = py.PyInterpreterState_Get();
	return is->empty_bytes ? 0 : -1;
}

int m0_initialize(const char *program, const char *bootstrap, char *errbuf, size_t errlen)
{
	if (program && *program) {
		/* The program name makes sys.executable the real interpreter and lets
		 * getpath find the standard library and any pyvenv.cfg beside it. */
		wchar_t *w = py.Py_DecodeLocale(program, NULL);
		if (w)
			py.Py_SetProgramName(w); /* kept for the life of the process */
	}
	py.Py_InitializeEx(0);
	if (!py.Py_IsInitialized()) {
		snprintf(errbuf, errlen, "Py_InitializeEx failed");
		return -1;
	}

	if (setup_interp(&m0_interps[0], bootstrap) < 0)
		goto fail;
	m0_main.ident = py.PyThread_get_thread_ident();
	if (bind_wsgi(&m0_main) < 0)
		goto fail;
	m0_here[0] = &m0_main;
	m0_main.ts = py.PyEval_SaveThread();
	return 0;

fail:
	capture_error(&m0_main);
	snprintf(errbuf, errlen, "%.*s", (int)m0_main.err.len, m0_main.err.p ? m0_main.err.p : "");
	return -1;
}

/* ---- errors ------------------------------------------------------------------ */

/* capture_error moves the pending Python exception into t->err as traceback
 * text and clears it. The GIL is held. */
void capture_error(m0_thread *t)
{
	PyObject *type = NULL, *value = NULL, *tb = NULL;
	py.PyErr_Fetch(&type, &value, &tb);
	if (!type) {
		buf_set(&t->err, "unknown error (no Python exception was set)");
		return;
	}
	py.PyErr_NormalizeException(&type, &value, &tb);
	if (value && tb)
		py.PyException_SetTraceback(value, tb);
	PyObject *s = NULL, *fmt = m0_interps[t->interp].format_exc;
	if (fmt)
		s = py.PyObject_CallFunctionObjArgs(fmt, type, value ? value : Py_None, tb ? tb : Py_None, NULL);
	if (!s && value) {
		py.PyErr_Clear();
		s = py.PyObject_Str(value);
	}
	Py_ssize_t n = 0;
	const char *u = s ? py.PyUnicode_AsUTF8AndSize(s, &n) : NULL;
	if (u)
		buf_set(&t->err, ""), buf_put(&t->err, u, (size_t)n);
	else
		buf_set(&t->err, "unprintable exception");
	py.PyErr_Clear();
	if (s)
		py.Py_DecRef(s);
	py.Py_DecRef(type);
	if (value)
		py.Py_DecRef(value);
	if (tb)
		py.Py_DecRef(tb);
}

/* ---- threads ------------------------------------------------------------------- */

static PyObject *wsgi_start_response(PyObject *self, PyObject *args, PyObject *kwargs);
static PyObject *wsgi_write(PyObject *self, PyObject *data);

static PyMethodDef start_response_def = {
	"start_response", (PyCFunction)(void (*)(void))wsgi_start_response, METH_VARARGS | METH_KEYWORDS,
	"start_response(status, headers, exc_info=None) -> write"};
static PyMethodDef write_def = {"write", wsgi_write, METH_O, "write(data: bytes)"};

/* bind_wsgi gives the thread its start_response and write. The GIL is held. */
static int bind_wsgi(m0_thread *t)
{
	PyObject *cap = py.PyCapsule_New(t, "m0.thread", NULL);
	if (!cap)
		return -1;
	PyObject *mod = m0_interps[t->interp].module;
	t->start_response = py.PyCFunction_NewEx(&start_response_def, cap, mod);
	t->write = py.PyCFunction_NewEx(&write_def, cap, mod);
	py.Py_DecRef(cap);
	return t->start_response && t->write ? 0 : -1;
}

/* The scheduling class every Python thread takes when it is made. */
static int qos_set, qos_nice, qos_batch;

/* m0_apply_qos gives the calling thread the class; -1 and errno on failure.
 * On Linux a nice level of the thread's own, and SCHED_BATCH; on macOS the
 * quality-of-service class the nice level stands for (host/qos.go maps
 * the classes to levels). */
int m0_apply_qos(void)
{
	if (!qos_set)
		return 0;
#ifdef __linux__
	pid_t tid = (pid_t)syscall(SYS_gettid);
	if (setpriority(PRIO_PROCESS, (id_t)tid, qos_nice) < 0)
		return -1;
	struct sched_param sp = {0};
	if (qos_batch && sched_setscheduler(0, SCHED_BATCH, &sp) < 0)
		return -1;
	return 0;
#else
	qos_class_t class = QOS_CLASS_DEFAULT;
	if (qos_nice <= -10)
		class = QOS_CLASS_USER_INTERACTIVE;
	else if (qos_nice < 0)
		class = QOS_CLASS_USER_INITIATED;
	else if (qos_nice >= 10)
		class = QOS_CLASS_BACKGROUND;
	else if (qos_nice > 0)
		class = QOS_CLASS_UTILITY;
	int err = pthread_set_qos_class_self_np(class, 0);
	if (err) {
		errno = err;
		return -1;
	}
	return 0;
#endif
}

void m0_set_qos(int nice, int batch)
{
	qos_nice = nice;
	qos_batch = batch;
	qos_set = 1;
}

m0_thread *m0_thread_peek(int k)
{
	if (k < 0 || k >= M0_MAX_INTERPS)
		return NULL;
	return m0_here[k];
}

m0_thread *m0_thread_here(void)
{
	return m0_thread_in(0);
}

m0_thread *m0_thread_in(int k)
{
	if (k < 0 || k >= M0_MAX_INTERPS)
		return NULL;
	if (m0_here[k])
		return m0_here[k];
	PyInterpreterState *interp = m0_interps[k].interp; /* set before Go learns of k */
	if (!interp)
		return NULL;
	m0_thread *t = calloc(1, sizeof *t);
	if (!t)
		return NULL;
	m0_apply_qos(); /* checked at start-up on the main thread */
	t->interp = k;
	t->ts = py.PyThreadState_New(interp);
	if (!t->ts) {
		free(t);
		return NULL;
	}
	m0_attach(t->ts);
	t->ident = py.PyThread_get_thread_ident();
	if (bind_wsgi(t) < 0)
		capture_error(t);
	t->ts = py.PyEval_SaveThread();
	m0_here[k] = t;
	return t;
}

/* ---- subinterpreters ------------------------------------------------------------ */

int m0_interp_new(const char *bootstrap, char *errbuf, size_t errlen)
{
	if (!py.Py_NewInterpreterFromConfig || !py.PyThreadState_DeleteCurrent || m0_free_threaded) {
		snprintf(errbuf, errlen, "subinterpreters with their own GIL need a CPython 3.13 or newer GIL build");
		return -1;
	}
	int k = __atomic_fetch_add(&m0_ninterps, 1, __ATOMIC_RELAXED);
	if (k >= M0_MAX_INTERPS) {
		snprintf(errbuf, errlen, "at most %d interpreters", M0_MAX_INTERPS - 1);
		return -1;
	}
	m0_interp_config cfg = {
		.use_main_obmalloc = 0,
		.allow_fork = 0,
		.allow_exec = 0,
		.allow_threads = 1,
		/* Libraries start daemon threads (error reporters, pools); the
		 * interpreter is never ended while the process serves. */
		.allow_daemon_threads = 1,
		.check_multi_interp_extensions = 1,
		.gil = 2,
	};
	PyThreadState *ts = NULL;
	/* No thread state is current: the new one is, with its own GIL held. */
	m0_pystatus st = py.Py_NewInterpreterFromConfig(&ts, &cfg);
	if (st.type != 0 || !ts) {
		snprintf(errbuf, errlen, "Py_NewInterpreterFromConfig: %s", st.err_msg ? st.err_msg : "failed");
		return -1;
	}
	m0_thread *t = calloc(1, sizeof *t);
	if (!t) {
		snprintf(errbuf, errlen, "out of memory");
		py.PyEval_SaveThread();
		return -1;
	}
	t->interp = k;
	t->ts = ts;
	t->ident = py.PyThread_get_thread_ident();
	m0_interp *is = &m0_interps[k];
	if (setup_interp(is, bootstrap) < 0 || bind_wsgi(t) < 0) {
		capture_error(t);
		snprintf(errbuf, errlen, "%.*s", (int)t->err.len, t->err.p ? t->err.p : "");
		py.PyEval_SaveThread();
		return -1;
	}
	m0_apply_qos();
	m0_here[k] = t;
	t->ts = py.PyEval_SaveThread();
	return k;
}

/* ---- generic calls ------------------------------------------------------------- */

int m0_exec(m0_thread *t, const char *code)
{
	m0_attach(t->ts);
	int rc = 0;
	PyObject *main = py.PyImport_ImportModule("__main__");
	PyObject *c = main ? py.Py_CompileString(code, "<m0>", Py_file_input) : NULL;
	PyObject *g = main ? py.PyModule_GetDict(main) : NULL;
	PyObject *r = c ? py.PyEval_EvalCode(c, g, g) : NULL;
	if (!r) {
		capture_error(t);
		rc = -1;
	}
	if (r)
		py.Py_DecRef(r);
	if (c)
		py.Py_DecRef(c);
	if (main)
		py.Py_DecRef(main);
	t->ts = py.PyEval_SaveThread();
	return rc;
}

/* put_str puts str(o) into t->body as UTF-8. The GIL is held. */
static int put_str(m0_thread *t, PyObject *o)
{
	PyObject *s = py.PyObject_Str(o);
	Py_ssize_t n = 0;
	const char *u = s ? py.PyUnicode_AsUTF8AndSize(s, &n) : NULL;
	t->body.len = 0;
	if (u)
		buf_put(&t->body, u, (size_t)n);
	if (s)
		py.Py_DecRef(s);
	return u ? 0 : -1;
}

/* m0_eval_str evaluates expr in __main__ and puts str() of the result in t->body. */
int m0_eval_str(m0_thread *t, const char *expr)
{
	m0_attach(t->ts);
	int rc = -1;
	PyObject *main = py.PyImport_ImportModule("__main__");
	PyObject *c = main ? py.Py_CompileString(expr, "<m0>", Py_eval_input) : NULL;
	PyObject *g = main ? py.PyModule_GetDict(main) : NULL;
	PyObject *r = c ? py.PyEval_EvalCode(c, g, g) : NULL;
	if (r && put_str(t, r) == 0)
		rc = 0;
	if (rc < 0)
		capture_error(t);
	if (r)
		py.Py_DecRef(r);
	if (c)
		py.Py_DecRef(c);
	if (main)
		py.Py_DecRef(main);
	t->ts = py.PyEval_SaveThread();
	return rc;
}

/* m0_call_helper calls _m0.NAME(arg) and hands back a new reference to the result. */
int m0_call_helper(m0_thread *t, const char *name, const char *arg, uintptr_t *out)
{
	m0_attach(t->ts);
	int rc = -1;
	PyObject *fn = py.PyMapping_GetItemString(m0_interps[t->interp].dict, name);
	if (!fn) {
		py.PyErr_Clear(); /* the KeyError */
		py.PyErr_Format(EXC(PyExc_RuntimeError), "_m0 has no helper %s", name);
	}
	PyObject *a = fn ? py.PyUnicode_FromString(arg) : NULL;
	PyObject *r = fn && a ? py.PyObject_CallFunctionObjArgs(fn, a, NULL) : NULL;
	if (fn)
		py.Py_DecRef(fn);
	if (r) {
		*out = (uintptr_t)r;
		rc = 0;
	} else {
		capture_error(t);
	}
	if (a)
		py.Py_DecRef(a);
	t->ts = py.PyEval_SaveThread();
	return rc;
}

/* m0_str puts str(obj) in t->body. */
int m0_str(m0_thread *t, uintptr_t obj)
{
	m0_attach(t->ts);
	int rc = put_str(t, (PyObject *)obj);
	if (rc < 0)
		capture_error(t);
	t->ts = py.PyEval_SaveThread();
	return rc;
}

/* m0_getattr hands back a new reference to getattr(obj, name). */
int m0_getattr(m0_thread *t, uintptr_t obj, const char *name, uintptr_t *out)
{
	m0_attach(t->ts);
	PyObject *r = py.PyObject_GetAttrString((PyObject *)obj, name);
	if (r)
		*out = (uintptr_t)r;
	else
		capture_error(t);
	t->ts = py.PyEval_SaveThread();
	return r ? 0 : -1;
}

void m0_decref(m0_thread *t, uintptr_t obj)
{
	m0_attach(t->ts);
	py.Py_DecRef((PyObject *)obj);
	t->ts = py.PyEval_SaveThread();
}

/* ---- WSGI: start_response and write -------------------------------------------- */

static m0_thread *self_thread(PyObject *self)
{
	return py.PyCapsule_GetPointer(self, "m0.thread");
}

int is_tchar(unsigned char c)
{
	if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
		return 1;
	return c && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

/* latin1 encodes a str as latin-1 bytes; the caller owns the result. */
static PyObject *latin1(PyObject *s, const char *what)
{
	PyObject *b = py.PyUnicode_AsLatin1String(s);
	if (!b) {
		py.PyErr_Clear();
		py.PyErr_Format(EXC(PyExc_ValueError),
				"wsgi: %s must be a str of latin-1 characters", what);
	}
	return b;
}

/* parse_status checks "NNN reason" and returns the code, or -1 with an
 * exception set. */
static int parse_status(PyObject *status)
{
	PyObject *b = latin1(status, "the status");
	if (!b)
		return -1;
	char *s;
	Py_ssize_t n;
	py.PyBytes_AsStringAndSize(b, &s, &n);
	int ok = n >= 3 && s[0] >= '1' && s[0] <= '9' && s[1] >= '0' && s[1] <= '9' &&
		 s[2] >= '0' && s[2] <= '9' && (n == 3 || s[3] == ' ');
	for (Py_ssize_t i = 0; ok && i < n; i++)
		ok = (unsigned char)s[i] >= 0x20 && s[i] != 0x7f;
	int code = ok ? (s[0] - '0') * 100 + (s[1] - '0') * 10 + (s[2] - '0') : -1;
	if (code >= 0 && code < 200)
		ok = 0, code = -1; /* a final response; 1xx is not one */
	if (!ok)
		py.PyErr_Format(EXC(PyExc_ValueError),
				"wsgi: malformed status %R (want a str such as '200 OK')", status);
	py.Py_DecRef(b);
	return code;
}

/* set_not_bytes sets a TypeError naming what was not bytes. */
void set_not_bytes(PyObject *o, const char *what)
{
	py.PyErr_Clear();
	PyObject *tp = py.PyObject_Type(o);
	PyObject *nm = tp ? py.PyObject_GetAttrString(tp, "__name__") : NULL;
	const char *s = nm ? py.PyUnicode_AsUTF8AndSize(nm, NULL) : NULL;
	py.PyErr_Clear();
	py.PyErr_Format(EXC(PyExc_TypeError), "wsgi: %s must be bytes, not %s", what, s ? s : "?");
	if (nm)
		py.Py_DecRef(nm);
	if (tp)
		py.Py_DecRef(tp);
}

/* put_bytes appends a bytes object to t->body. */
static int put_bytes(m0_thread *t, PyObject *o, const char *what)
{
	char *p;
	Py_ssize_t n;
	if (py.PyBytes_AsStringAndSize(o, &p, &n) < 0) {
		set_not_bytes(o, what);
		return -1;
	}
	if (buf_put(&t->body, p, (size_t)n) < 0) {
		py.PyErr_SetString(EXC(PyExc_RuntimeError), "wsgi: out of memory buffering the body");
		return -1;
	}
	return 0;
}

/* header_item returns a new reference to item i of a header pair, as latin-1 bytes. */
static PyObject *header_item(PyObject *pair, Py_ssize_t i, const char *what)
{
	PyObject *s = py.PySequence_GetItem(pair, i);
	if (!s)
		return NULL;
	PyObject *b = latin1(s, what);
	py.Py_DecRef(s);
	return b;
}

/* put_header checks one (name, value) pair and appends it to t->head. */
static int put_header(m0_thread *t, PyObject *pair)
{
	if (py.PySequence_Size(pair) != 2) {
		py.PyErr_Clear();
		py.PyErr_Format(EXC(PyExc_ValueError),
				"wsgi: each header must be a (name, value) tuple, got %R", pair);
		return -1;
	}
	PyObject *nb = header_item(pair, 0, "a header name");
	if (!nb)
		return -1;
	PyObject *vb = header_item(pair, 1, "a header value");
	if (!vb) {
		py.Py_DecRef(nb);
		return -1;
	}
	int rc = -1;
	char *n, *v;
	Py_ssize_t nl, vl;
	py.PyBytes_AsStringAndSize(nb, &n, &nl);
	py.PyBytes_AsStringAndSize(vb, &v, &vl);
	int ok = nl > 0;
	for (Py_ssize_t i = 0; ok && i < nl; i++)
		ok = is_tchar((unsigned char)n[i]);
	if (!ok) {
		py.PyErr_Format(EXC(PyExc_ValueError), "wsgi: invalid header name %R", nb);
		goto out;
	}
	for (Py_ssize_t i = 0; i < vl; i++) {
		unsigned char c = (unsigned char)v[i];
		if ((c < 0x20 && c != '\t') || c == 0x7f) {
			py.PyErr_Format(EXC(PyExc_ValueError),
					"wsgi: header %R has a control character (CR, LF or NUL) in its value",
					nb);
			goto out;
		}
	}
	if (nl == 14 && strncasecmp(n, "content-length", 14) == 0)
		t->content_length = 1;
	if (buf_put_u32(&t->head, (uint32_t)nl) < 0 || buf_put(&t->head, n, (size_t)nl) < 0 ||
	    buf_put_u32(&t->head, (uint32_t)vl) < 0 || buf_put(&t->head, v, (size_t)vl) < 0) {
		py.PyErr_SetString(EXC(PyExc_RuntimeError), "wsgi: out of memory");
		goto out;
	}
	rc = 0;
out:
	py.Py_DecRef(nb);
	py.Py_DecRef(vb);
	return rc;
}

/* reraise raises the exception an exc_info tuple holds. */
static PyObject *reraise(PyObject *exc_info)
{
	PyObject *type = py.PySequence_GetItem(exc_info, 0);
	PyObject *value = type ? py.PySequence_GetItem(exc_info, 1) : NULL;
	PyObject *tb = value ? py.PySequence_GetItem(exc_info, 2) : NULL;
	if (!tb) {
		if (type)
			py.Py_DecRef(type);
		if (value)
			py.Py_DecRef(value);
		return NULL;
	}
	if (tb == Py_None) {
		py.Py_DecRef(tb);
		tb = NULL;
	}
	py.PyErr_Restore(type, value, tb);
	return NULL;
}

static PyObject *wsgi_start_response(PyObject *self, PyObject *args, PyObject *kwargs)
{
	static char *names[] = {"status", "headers", "exc_info", NULL};
	m0_thread *t = self_thread(self);
	PyObject *status, *headers, *exc_info = NULL;
	if (!t || !py.PyArg_ParseTupleAndKeywords(args, kwargs, "OO|O:start_response", names, &status,
						    &headers, &exc_info))
		return NULL;
	if (exc_info && exc_info != Py_None) {
		if (t->head_sent)
			return reraise(exc_info);
	} else if (t->status_set) {
		py.PyErr_SetString(EXC(PyExc_AssertionError),
				   "wsgi: start_response called a second time without exc_info");
		return NULL;
	}
	int code = parse_status(status);
	if (code < 0)
		return NULL;
	t->status_set = 0;
	t->content_length = 0;
	t->head.len = 0;
	PyObject *it = py.PyObject_GetIter(headers);
	if (!it)
		return NULL;
	PyObject *pair;
	while ((pair = py.PyIter_Next(it))) {
		int rc = put_header(t, pair);
		py.Py_DecRef(pair);
		if (rc < 0)
			break;
	}
	py.Py_DecRef(it);
	if (py.PyErr_Occurred()) {
		t->head.len = 0;
		return NULL;
	}
	t->status = code;
	t->status_set = 1;
	py.Py_IncRef(t->write);
	return t->write;
}

static PyObject *wsgi_write(PyObject *self, PyObject *data)
{
	m0_thread *t = self_thread(self);
	if (!t)
		return NULL;
	if (!t->status_set) {
		py.PyErr_SetString(EXC(PyExc_AssertionError),
				   "wsgi: write() called before start_response");
		return NULL;
	}
	if (put_bytes(t, data, "write() data") < 0)
		return NULL;
	/* PEP 3333: once write() is called the head counts as sent, so a later
	 * start_response with exc_info must re-raise, not replace it. */
	t->head_sent = 1;
	py.Py_IncRef(Py_None);
	return Py_None;
}

/* ---- WSGI: the call --------------------------------------------------------------- */

/* m0_wsgi_set_keys interns the environ keys Go names by number: packed holds
 * n NUL-terminated names, key 1 first. */
static int wsgi_call(m0_thread *t, uintptr_t app, uintptr_t tmpl, const char *req, size_t reqlen,
		     const char *body, size_t bodylen, int allow_stream);

int m0_wsgi_set_keys(m0_thread *t, const char *packed, size_t len, int n)
{
	m0_attach(t->ts);
	int rc = 0;
	m0_interp *is = &m0_interps[t->interp];
	is->keys = calloc((size_t)n, sizeof *is->keys);
	is->key_input = py.PyUnicode_InternFromString("wsgi.input");
	size_t off = 0;
	for (int i = 0; is->keys && i < n && off < len; i++) {
		is->keys[i] = py.PyUnicode_InternFromString(packed + off);
		off += strlen(packed + off) + 1;
		is->nkeys = i + 1;
	}
	if (!is->keys || !is->key_input || is->nkeys != n) {
		capture_error(t);
		rc = -1;
	}
	t->ts = py.PyEval_SaveThread();
	return rc;
}

/* m0_wsgi_template returns a new reference to the dict every environ is copied from. */
uintptr_t m0_wsgi_template(m0_thread *t, int multithread, int multiprocess)
{
	m0_attach(t->ts);
	PyObject *fn = py.PyMapping_GetItemString(m0_interps[t->interp].dict, "_wsgi_template");
	PyObject *mt = py.PyBool_FromLong(multithread), *mp = py.PyBool_FromLong(multiprocess);
	PyObject *r = fn ? py.PyObject_CallFunctionObjArgs(fn, mt, mp, NULL) : NULL;
	if (!r)
		capture_error(t);
	if (fn)
		py.Py_DecRef(fn);
	py.Py_DecRef(mt);
	py.Py_DecRef(mp);
	t->ts = py.PyEval_SaveThread();
	return (uintptr_t)r;
}

static int get_u16(const char *p, size_t len, size_t *i, size_t *out)
{
	uint16_t v;
	if (*i + 2 > len)
		return -1;
	memcpy(&v, p + *i, 2);
	*i += 2;
	*out = v;
	return 0;
}

static int get_u32(const char *p, size_t len, size_t *i, size_t *out)
{
	uint32_t v;
	if (*i + 4 > len)
		return -1;
	memcpy(&v, p + *i, 4);
	*i += 4;
	*out = v;
	return 0;
}

/* build_environ makes the environ from the template and Go's packed request:
 * entries of [u8 key id][u16 len, key if the id is 0][u32 len][value], every
 * string latin-1. */
static PyObject *build_environ(m0_interp *is, PyObject *tmpl, const char *req, size_t len,
			       const char *body, size_t bodylen)
{
	PyObject *env = py.PyDict_Copy(tmpl);
	if (!env)
		return NULL;
	size_t i = 0;
	while (i < len) {
		unsigned id = (unsigned char)req[i++];
		size_t kl = 0, vl = 0;
		PyObject *key;
		if (id) {
			if ((int)id > is->nkeys)
				goto bad;
			key = is->keys[id - 1];
			py.Py_IncRef(key);
		} else {
			if (get_u16(req, len, &i, &kl) < 0 || i + kl > len)
				goto bad;
			key = py.PyUnicode_DecodeLatin1(req + i, (Py_ssize_t)kl, NULL);
			i += kl;
		}
		if (!key)
			goto fail;
		if (get_u32(req, len, &i, &vl) < 0 || i + vl > len) {
			py.Py_DecRef(key);
			goto bad;
		}
		PyObject *val = py.PyUnicode_DecodeLatin1(req + i, (Py_ssize_t)vl, NULL);
		i += vl;
		int rc = val ? py.PyDict_SetItem(env, key, val) : -1;
		py.Py_DecRef(key);
		if (val)
			py.Py_DecRef(val);
		if (rc < 0)
			goto fail;
	}
	PyObject *b;
	if (bodylen) {
		b = py.PyBytes_FromStringAndSize(body, (Py_ssize_t)bodylen);
	} else {
		b = is->empty_bytes;
		py.Py_IncRef(b);
	}
	PyObject *input = b ? py.PyObject_CallFunctionObjArgs(is->bytesio, b, NULL) : NULL;
	if (b)
		py.Py_DecRef(b);
	int rc = input ? py.PyDict_SetItem(env, is->key_input, input) : -1;
	if (input)
		py.Py_DecRef(input);
	if (rc < 0)
		goto fail;
	return env;
bad:
	py.PyErr_SetString(EXC(PyExc_RuntimeError), "wsgi: malformed request buffer");
fail:
	py.Py_DecRef(env);
	return NULL;
}

/* close_result calls close() on what the application returned, if it has one,
 * and lets go of it. A failure is kept in t->err unless one is there already. */
static void clear_interrupt(m0_thread *t);

static void close_result(m0_thread *t)
{
	clear_interrupt(t); /* an interrupt not raised yet would be raised in close() */
	if (t->iter) {
		py.Py_DecRef(t->iter);
		t->iter = NULL;
	}
	PyObject *r = t->result;
	if (!r)
		return;
	t->result = NULL;
	/* A list or tuple has no close(): asking would raise and clear an
	 * AttributeError, formatted, on every request that returns one. */
	PyObject *tp = py.PyObject_Type(r);
	int plain = tp == py.PyList_Type || tp == py.PyTuple_Type;
	py.Py_DecRef(tp);
	if (!plain && py.PyObject_HasAttrString(r, "close")) {
		PyObject *c = py.PyObject_GetAttrString(r, "close");
		PyObject *x = c ? py.PyObject_CallFunctionObjArgs(c, NULL) : NULL;
		if (x)
			py.Py_DecRef(x);
		else if (t->err.len == 0)
			capture_error(t);
		else
			py.PyErr_Clear();
		if (c)
			py.Py_DecRef(c);
	}
	py.Py_DecRef(r);
}

/* ilock and iunlock order t's interrupt, set by one thread and taken back
 * by another, on a free-threaded build; under the GIL, which orders it
 * there, they do nothing. The caller's thread state is attached. */
static void ilock(m0_thread *t)
{
	if (m0_free_threaded)
		py.PyMutex_Lock(&t->imu);
}

static void iunlock(m0_thread *t)
{
	if (m0_free_threaded)
		py.PyMutex_Unlock(&t->imu);
}

/* clear_interrupt takes back an exception m0_wsgi_interrupt set to be
 * raised in t that has not been raised yet. The GIL is held. */
static void clear_interrupt(m0_thread *t)
{
	ilock(t);
	if (t->interrupted) {
		py.PyThreadState_SetAsyncExc(t->ident, NULL);
		t->interrupted = 0;
	}
	iunlock(t);
}

static void reset_request(m0_thread *t)
{
	clear_interrupt(t); /* one that came too late */
	if (t->result || t->iter)
		close_result(t);
	t->status_set = 0;
	t->head_sent = 0;
	t->status = 0;
	t->content_length = 0;
	buf_reset(&t->head);
	buf_reset(&t->body);
	buf_reset(&t->err);
}

/* drain reads every remaining item into t->body. */
static int drain(m0_thread *t)
{
	PyObject *item;
	while ((item = py.PyIter_Next(t->iter))) {
		int rc = put_bytes(t, item, "a body item");
		py.Py_DecRef(item);
		if (rc < 0)
			return -1;
	}
	return py.PyErr_Occurred() ? -1 : 0;
}

m0_thread *m0_wsgi_call(uintptr_t app, uintptr_t tmpl, const char *req, size_t reqlen, const char *body,
			size_t bodylen, int allow_stream)
{
	m0_thread *t = m0_thread_here();
	if (t)
		m0_wsgi_call_on(t, app, tmpl, req, reqlen, body, bodylen, allow_stream);
	return t;
}

int m0_wsgi_call_on(m0_thread *t, uintptr_t app, uintptr_t tmpl, const char *req, size_t reqlen,
		    const char *body, size_t bodylen, int allow_stream)
{
	t->rc = wsgi_call(t, app, tmpl, req, reqlen, body, bodylen, allow_stream);
	return t->rc;
}

static int wsgi_call(m0_thread *t, uintptr_t app, uintptr_t tmpl, const char *req, size_t reqlen,
		     const char *body, size_t bodylen, int allow_stream)
{
	m0_attach(t->ts);
	reset_request(t);
	int rc = M0_WSGI_ERROR;
	PyObject *env = build_environ(&m0_interps[t->interp], (PyObject *)tmpl, req, reqlen, body, bodylen);
	if (!env)
		goto fail;
	t->result = py.PyObject_CallFunctionObjArgs((PyObject *)app, env, t->start_response, NULL);
	py.Py_DecRef(env);
	if (!t->result)
		goto fail;
	PyObject *tp = py.PyObject_Type(t->result);
	int sized = tp == py.PyList_Type || tp == py.PyTuple_Type;
	py.Py_DecRef(tp);
	t->iter = py.PyObject_GetIter(t->result);
	if (!t->iter)
		goto fail;
	if (!t->status_set) {
		/* A generator application calls start_response on its first step. */
		PyObject *item = py.PyIter_Next(t->iter);
		if (item) {
			int r = t->status_set ? put_bytes(t, item, "a body item") : 0;
			py.Py_DecRef(item);
			if (r < 0)
				goto fail;
		} else if (py.PyErr_Occurred()) {
			goto fail;
		}
		if (!t->status_set) {
			py.PyErr_SetString(EXC(PyExc_RuntimeError),
					   item ? "wsgi: the application returned a body without calling start_response"
						: "wsgi: the application returned without calling start_response");
			goto fail;
		}
		if (!item)
			sized = 1; /* already exhausted */
	}
	if (!sized && !t->content_length && allow_stream) {
		/* PEP 3333: the head goes out with the first non-empty item, so a
		 * body that fails before it still gets a clean 500. */
		while (t->body.len == 0) {
			PyObject *item = py.PyIter_Next(t->iter);
			if (!item) {
				if (py.PyErr_Occurred())
					goto fail;
				sized = 1; /* exhausted: send what there is, sized */
				break;
			}
			int r = put_bytes(t, item, "a body item");
			py.Py_DecRef(item);
			if (r < 0)
				goto fail;
		}
		if (!sized) {
			t->head_sent = 1;
			t->ts = py.PyEval_SaveThread();
			return M0_WSGI_STREAM;
		}
	}
	if (drain(t) < 0)
		goto fail;
	close_result(t);
	rc = M0_WSGI_DONE;
	t->ts = py.PyEval_SaveThread();
	return rc;
fail:
	capture_error(t);
	close_result(t);
	t->ts = py.PyEval_SaveThread();
	return M0_WSGI_ERROR;
}

int m0_wsgi_next(m0_thread *t)
{
	m0_attach(t->ts);
	int rc = M0_WSGI_ERROR;
	t->body.len = 0;
	if (!t->iter) {
		rc = M0_WSGI_DONE;
		goto out;
	}
	PyObject *item = py.PyIter_Next(t->iter);
	if (item) {
		int r = put_bytes(t, item, "a body item");
		py.Py_DecRef(item);
		if (r == 0) {
			rc = M0_WSGI_STREAM;
			goto out;
		}
	} else if (!py.PyErr_Occurred()) {
		close_result(t);
		rc = M0_WSGI_DONE;
		goto out;
	}
	capture_error(t);
	close_result(t);
out:
	t->ts = py.PyEval_SaveThread();
	return rc;
}

void m0_wsgi_close(m0_thread *t)
{
	m0_attach(t->ts);
	/* An interrupt that has not fired would fire in close(). */
	clear_interrupt(t);
	t->err.len = 0;
	close_result(t);
	t->ts = py.PyEval_SaveThread();
}

void m0_wsgi_clear_interrupt(m0_thread *self, m0_thread *target)
{
	m0_attach(self->ts);
	clear_interrupt(target);
	self->ts = py.PyEval_SaveThread();
}

int m0_wsgi_interrupt(m0_thread *self, m0_thread *target)
{
	m0_attach(self->ts);
	ilock(target);
	int n = py.PyThreadState_SetAsyncExc(target->ident, EXC(PyExc_GeneratorExit));
	target->interrupted = n > 0;
	iunlock(target);
	self->ts = py.PyEval_SaveThread();
	return n;
}

int m0_wsgi_timeout(m0_thread *self, m0_thread *target)
{
	m0_attach(self->ts);
	PyObject *exc = py.PyMapping_GetItemString(m0_interps[self->interp].dict, "RequestTimeout");
	if (!exc)
		py.PyErr_Clear();
	ilock(target);
	int n = exc ? py.PyThreadState_SetAsyncExc(target->ident, exc) : 0;
	target->interrupted = target->interrupted || n > 0;
	iunlock(target);
	if (exc)
		py.Py_DecRef(exc);
	self->ts = py.PyEval_SaveThread();
	return n;
}

/* m0_signal_handler returns the address of the handler installed for sig. */
uintptr_t m0_signal_handler(int sig)
{
	struct sigaction sa;
	sigaction(sig, NULL, &sa);
	return (uintptr_t)sa.sa_sigaction;
}
