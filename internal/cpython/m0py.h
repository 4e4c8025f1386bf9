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
	unsigned long ident; /* the thread's id as Python knows it (threading.get_ident) */
	int interrupted;     /* an exception was set to be raised in it; under the GIL */
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
int m0_wsgi_interrupt(m0_thread *self, m0_thread *target);

/* ASGI: messages between Go and the loop. */
typedef struct {
	int kind;
	uint32_t slot; /* the request, or UINT32_MAX for none */
	uint32_t gen;
	int flags;
	char *data; /* malloc'd, or NULL */
	size_t len;
} m0_amsg;

/* Go -> loop. */
enum {
	M0_A_HTTP = 1,       /* data: the packed scope and first body chunk; flags: M0_A_MORE */
	M0_A_WS = 2,         /* data: the packed scope */
	M0_A_BODY = 3,       /* data: a body chunk; flags: M0_A_MORE */
	M0_A_DISCONNECT = 4, /* flags: the WebSocket close code */
	M0_A_RESUME = 5,     /* the client took what was sent: a waiting send returns */
	M0_A_WSMSG = 6,      /* data: a frame; flags: M0_A_TEXT */
	M0_A_DRAIN = 7,      /* every request hears that the client is gone */
	M0_A_SHUTDOWN = 8,   /* run the lifespan shutdown */
	M0_A_STOP = 9,       /* stop the loop */
};

/* loop -> Go. */
enum {
	M0_C_START = 1,    /* flags: the status; data: packed headers (http, or a ws denial) */
	M0_C_BODY = 2,     /* data: a chunk; flags: M0_A_MORE, M0_A_WAIT (http, or a ws denial) */
	M0_C_WANT = 3,     /* http: send the next body chunk; ws: one more frame may come */
	M0_C_DONE = 4,     /* the task is over; flags: M0_DONE_*; data: why */
	M0_C_WS_ACCEPT = 5, /* data: [u32 len][subprotocol] + packed headers */
	M0_C_WS_SEND = 6,  /* data: a frame; flags: M0_A_TEXT */
	M0_C_WS_CLOSE = 7, /* flags: the code; data: the reason */
	M0_C_PATHSEND = 8, /* data: the file's path */
	M0_C_IDLE = 9,     /* http: the body is in and the application waits in receive() */
	M0_C_LOOP = 20,    /* data: the loop's name */
	M0_C_LIFESPAN = 21, /* flags: M0_L_*; data: the message */
};

enum { M0_A_MORE = 1, M0_A_TEXT = 2, M0_A_WAIT = 4 };
/* M0_C_DONE's flags: the response did not complete; and the client had
 * left or the server was draining, so it is not the application's fault. */
enum { M0_DONE_FAILED = 1, M0_DONE_QUIET = 2 };
enum { M0_S_HTTP11 = 1 };
enum {
	M0_L_STARTED = 0,
	M0_L_FAILED = 1,
	M0_L_UNSUPPORTED = 2,
	M0_L_STOPPED = 3,
	M0_L_STOP_FAILED = 4,
};

int m0_asgi_init(int *id, int *in_fd, int *out_fd);
int m0_asgi_post(int id, int kind, uint32_t slot, uint32_t gen, int flags, const char *data, size_t len);
size_t m0_asgi_take(int id, m0_amsg **out);
void m0_asgi_free(m0_amsg *v, size_t n);
int m0_asgi_run(m0_thread *t, int id, uintptr_t app, const char *opts);

#endif
