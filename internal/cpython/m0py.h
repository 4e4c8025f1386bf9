/* The C side of the embedded interpreter.
 *
 * libpython is loaded with dlopen at run time and every function is resolved
 * with dlsym, so no Python header is needed to build and one binary serves
 * every CPython 3.10+. Only stable-ABI functions are used, never macros that
 * read object layouts. */
#ifndef M0PY_H
#define M0PY_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <wchar.h>

typedef struct _object PyObject;
typedef struct _ts PyThreadState;
typedef struct _is PyInterpreterState;
typedef ssize_t Py_ssize_t;
typedef PyObject *(*PyCFunction)(PyObject *, PyObject *);

typedef struct {
	const char *ml_name;
	PyCFunction ml_meth;
	int ml_flags;
	const char *ml_doc;
} PyMethodDef;

/* A growable byte buffer owned by C. */
typedef struct {
	char *p;
	size_t len;
	size_t cap;
} m0_buf;

/* One Python thread: its thread state and the state of the WSGI request it
 * is serving. A thread serves one request at a time, so start_response and
 * write are created once per thread and bound to it. */
typedef struct {
	PyThreadState *ts;
	PyObject *start_response;
	PyObject *write;

	/* The request in progress. */
	int status_set;    /* start_response has been called */
	int head_sent;     /* Go has sent (or is sending) the head */
	int status;        /* the status code */
	int content_length; /* the application named a Content-Length */
	m0_buf head;       /* headers: [u32 nlen][name][u32 vlen][value]... */
	m0_buf body;       /* the buffered body, or the chunk being streamed */
	m0_buf err;        /* the traceback text of the last failure */
	PyObject *result;  /* the application's return value, for close() */
	PyObject *iter;    /* its iterator, while streaming */
} m0_thread;

/* Results of m0_wsgi_call / m0_wsgi_next. */
enum {
	M0_WSGI_ERROR = -1,   /* err holds the traceback; close() has been called */
	M0_WSGI_DONE = 0,     /* the whole body is in body; close() has been called */
	M0_WSGI_STREAM = 1,   /* head ready, body holds what came first; call next */
	M0_WSGI_NOTHREAD = -2, /* no thread state could be made for this thread */
};

/* Loading and starting. */
int m0_load(const char *path, char *errbuf, size_t errlen);
int m0_initialize(const char *program, const char *bootstrap, char *errbuf, size_t errlen);
void m0_save_signals(void);
void m0_restore_signals(void);
uintptr_t m0_signal_handler(int sig);

/* The scheduling class of Python threads: set once, applied to each new one. */
void m0_set_qos(int nice, int batch);
int m0_apply_qos(void);

/* The calling OS thread's Python thread, created on first use. */
m0_thread *m0_thread_here(void);
/* The calling OS thread's Python thread, or NULL if it has none yet. */
m0_thread *m0_thread_peek(void);

/* Generic calls, for start-up, tests and the doctor: not the hot path. */
int m0_exec(m0_thread *t, const char *code);
int m0_eval_str(m0_thread *t, const char *expr);
int m0_call_helper(m0_thread *t, const char *name, const char *arg, uintptr_t *out);
int m0_str(m0_thread *t, uintptr_t obj);
int m0_getattr(m0_thread *t, uintptr_t obj, const char *name, uintptr_t *out);
void m0_decref(m0_thread *t, uintptr_t obj);

/* WSGI. */
int m0_wsgi_set_keys(m0_thread *t, const char *packed, size_t len, int n);
uintptr_t m0_wsgi_template(m0_thread *t, int multithread, int multiprocess);
int m0_wsgi_call(m0_thread **t, uintptr_t app, uintptr_t tmpl, const char *req, size_t reqlen,
		 const char *body, size_t bodylen, int allow_stream);
int m0_wsgi_next(m0_thread *t);
void m0_wsgi_close(m0_thread *t);

#endif
