/* The C side of the embedded interpreter.
 *
 * libpython is loaded with dlopen at run time and every function is resolved
 * with dlsym, so no Python header is needed to build and one binary serves
 * every CPython 3.10+. Only stable-ABI functions are used, never macros that
 * read object layouts.
 *
 * Each entry point below says which thread may call it, whether the GIL is
 * held on entry and on return, and what becomes of the references it takes
 * or hands back. "Any thread, GIL not held" is the rule where none is given
 * otherwise: the function takes the GIL through the thread state it is
 * given (t), on t's own OS thread (t is the calling thread's, from
 * m0_thread_here), and releases it before it returns, on every path.
 * Objects cross into Go only as integer handles (uintptr_t); a handle Go
 * holds is a strong reference that Go lets go of with m0_decref.
 *
 * On a free-threaded build (Py_GIL_DISABLED, 3.13t and newer) "the GIL is
 * held" reads "the thread state is attached": the same calls attach and
 * detach it, and nothing else changes for a caller. What changes inside:
 *   - No GIL orders two threads, so no lookup hands back a borrowed
 *     reference from a container another thread could change: _m0's
 *     namespace is read with PyMapping_GetItemString (a new reference) on
 *     every path after start-up, never PyDict_GetItemString. The environ
 *     template is read only by PyDict_Copy, which locks it.
 *   - What one thread sets for another (an interrupt, m0_wsgi_interrupt and
 *     m0_wsgi_timeout, and its taking back) is ordered by the target
 *     thread's own lock (a PyMutex, which detaches while it waits), where
 *     the GIL ordered it before.
 *   - Everything else the C side keeps is either the calling thread's own
 *     (m0_thread, found through a thread-local) or written once, before
 *     any second thread runs Python (the function table, _m0, the environ
 *     keys, the template).
 *   - The ASGI executor is not started on such a build (m0serve refuses an
 *     ASGI application there), so asgi.c's entry points keep the GIL
 *     build's rules.
 * _m0 is made with PyModule_NewObject, not imported through an extension
 * loader, so it never re-enables the GIL. */
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
typedef struct { uint8_t bits; } m0_pymutex_t; /* CPython 3.13's PyMutex */

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
	int interp;          /* the interpreter ts belongs to: 0 the main one, k the k-th made by m0_interp_new */
	unsigned long ident; /* the thread's id as Python knows it (threading.get_ident) */
	int interrupted;     /* an exception was set to be raised in it; under the GIL, or imu */
	m0_pymutex_t imu;    /* orders interrupted and the exception it stands for, free-threaded */
	int rc;              /* the outcome of the last m0_wsgi_call */
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
};

/* ---- loading and starting ---------------------------------------------------- */

/* m0_load dlopens the libpython at path and resolves the function table;
 * free_threaded says the library is a free-threaded build (its python3
 * reports Py_GIL_DISABLED). Once, before anything else, on the thread that
 * will start Python; no GIL exists yet. 0, or -1 with the reason in
 * errbuf. */
int m0_load(const char *path, int free_threaded, char *errbuf, size_t errlen);

/* m0_initialize starts the interpreter (Py_InitializeEx(0), no Python signal
 * handlers), makes the _m0 module and runs the bootstrap in it. Once, after
 * m0_load, on the OS thread that stays the interpreter's main thread. The
 * GIL is not held on entry; on return it is released (the main thread's
 * state is saved in that thread's m0_thread). 0, or -1 with the traceback
 * in errbuf. */
int m0_initialize(const char *program, const char *bootstrap, char *errbuf, size_t errlen);

/* m0_save_signals records the process's handlers of the signals Go owns;
 * m0_restore_signals puts them back (after Python, or an application being
 * imported, installed its own). Any thread; no GIL needed. */
void m0_save_signals(void);
void m0_restore_signals(void);

/* m0_signal_handler is the address of the handler installed for sig, for
 * tests. Any thread; no GIL needed. */
uintptr_t m0_signal_handler(int sig);

/* m0_count_gil_waits turns on (1) or off (0) the timing of every wait for
 * the GIL the C side makes (m0_attach); m0_gil_wait_totals reads the
 * nanoseconds waited and the waits counted since the start. Any thread; no
 * GIL needed; neither allocates. */
void m0_count_gil_waits(int on);
void m0_gil_wait_totals(uint64_t *ns, uint64_t *n);

/* m0_set_qos sets the scheduling class each Python thread takes when it is
 * made; m0_apply_qos gives it to the calling thread (0, or -1 and errno).
 * Any thread; no GIL needed. */
void m0_set_qos(int nice, int batch);
int m0_apply_qos(void);

/* m0_thread_here returns the calling OS thread's Python thread, creating
 * its thread state on the first call; NULL if none can be made. The caller
 * keeps the OS thread for as long as it uses the result (Go: locked to its
 * goroutine). GIL not held on entry or return. m0_thread_peek returns the
 * calling thread's in interpreter k (0 is the main one) without creating
 * it, or NULL. */
m0_thread *m0_thread_here(void);
m0_thread *m0_thread_peek(int k);

/* ---- subinterpreters (CPython 3.13+, GIL builds) ------------------------------
 *
 * An interpreter made here has its own GIL and its own objects; no object
 * crosses from one interpreter to another (each has its own _m0, bootstrap,
 * environ keys and application). An OS thread may hold a thread state in
 * several interpreters (m0_thread_in), one attached at a time. CPython
 * 3.12 and newer bind PyGILState's slot to the thread state a thread
 * attached last, so PyGILState_Ensure (which sqlite3's callbacks call)
 * finds the interpreter the thread is running. */

#define M0_MAX_INTERPS 64

/* m0_interp_new makes a subinterpreter with its own GIL and
 * check_multi_interp_extensions on (an extension module without support
 * for subinterpreters fails its import), makes _m0 in it and runs the
 * bootstrap there, on the calling thread: its m0_thread in the new
 * interpreter is m0_thread_in(index).
 * The index (1 or more), or -1 with the reason in errbuf (a library older
 * than 3.12, or a free-threaded one, has no such interpreter). GIL not
 * held on entry or return. */
int m0_interp_new(const char *bootstrap, char *errbuf, size_t errlen);

/* m0_thread_in is m0_thread_here for interpreter k (0 is the main one):
 * the calling OS thread's thread state in k, made on first use and kept
 * for the life of the thread. GIL not held. */
m0_thread *m0_thread_in(int k);

/* ---- generic calls: start-up, tests and the doctor, never the hot path -------- */

/* m0_exec runs code in __main__. 0, or -1 with the traceback in t->err. */
int m0_exec(m0_thread *t, const char *code);

/* m0_eval_str evaluates expr in __main__ and puts str() of the result in
 * t->body. 0, or -1 with the traceback in t->err. */
int m0_eval_str(m0_thread *t, const char *expr);

/* m0_call_helper calls _m0.NAME(arg) and hands back in *out a new
 * reference to its result, which Go owns. 0, or -1 with the traceback. */
int m0_call_helper(m0_thread *t, const char *name, const char *arg, uintptr_t *out);

/* m0_str puts str(obj) in t->body; obj is borrowed. 0 or -1. */
int m0_str(m0_thread *t, uintptr_t obj);

/* m0_getattr hands back in *out a new reference to getattr(obj, name); obj
 * is borrowed. 0 or -1. */
int m0_getattr(m0_thread *t, uintptr_t obj, const char *name, uintptr_t *out);

/* m0_decref lets go of a reference Go holds (obj is stolen). */
void m0_decref(m0_thread *t, uintptr_t obj);

/* ---- WSGI ------------------------------------------------------------------------ */

/* m0_wsgi_set_keys interns the environ keys Go names by number: packed
 * holds n NUL-terminated names, key 1 first. Once, on the main thread. */
int m0_wsgi_set_keys(m0_thread *t, const char *packed, size_t len, int n);

/* m0_wsgi_template returns a new reference (which Go owns for the life of
 * the handler) to the dict every environ is copied from; 0 on failure. */
uintptr_t m0_wsgi_template(m0_thread *t, int multithread, int multiprocess);

/* m0_wsgi_call is a WSGI request's one crossing: it builds the environ from
 * the packed request and body (copied: Go's memory is read during the call
 * only), calls app with it and the thread's start_response, and gathers
 * the status, the headers and the body (or, when allow_stream and the body
 * is unsized, its first part) into the thread's buffers, which stay valid
 * until the thread's next call. Any thread: it returns the calling thread's
 * Python thread, made on first use, with the outcome (one of M0_WSGI_*) in
 * its rc; NULL when no thread state could be made. app and tmpl are
 * borrowed (Go holds them). GIL not held on entry or return. */
m0_thread *m0_wsgi_call(uintptr_t app, uintptr_t tmpl, const char *req, size_t reqlen, const char *body,
			size_t bodylen, int allow_stream);

/* m0_wsgi_call_on is m0_wsgi_call on a thread Go chose, t, the calling OS
 * thread's in app's interpreter (m0_thread_in); app and tmpl are that
 * interpreter's. The result is also in t->rc. */
int m0_wsgi_call_on(m0_thread *t, uintptr_t app, uintptr_t tmpl, const char *req, size_t reqlen,
		    const char *body, size_t bodylen, int allow_stream);

/* m0_wsgi_next produces the next part of a streamed body into t->body. On
 * the thread that called m0_wsgi_call (t), which still holds the stream.
 * M0_WSGI_STREAM while more follows, M0_WSGI_DONE at the end (close() has
 * been called), M0_WSGI_ERROR (close() called, the traceback in t->err). */
int m0_wsgi_next(m0_thread *t);

/* m0_wsgi_close calls close() on a stream the client left, on its thread
 * (t); an interrupt not yet raised is taken back first. close()'s failure,
 * if any, is in t->err. */
void m0_wsgi_close(m0_thread *t);

/* m0_wsgi_interrupt sets GeneratorExit to be raised in target's thread at
 * its next bytecode (PyThreadState_SetAsyncExc): the application producing
 * a streamed body learns that its client left. Called on self's thread
 * (the caller's own, from m0_thread_in), any other than target's, in
 * target's interpreter (PyThreadState_SetAsyncExc looks there only); the
 * GIL is taken through self and released on return. The number of threads
 * modified (1, or 0 when target has no thread state). */
int m0_wsgi_interrupt(m0_thread *self, m0_thread *target);

/* m0_wsgi_timeout is m0_wsgi_interrupt with _m0.RequestTimeout (a
 * BaseException, so that an application's `except Exception` does not
 * swallow it) in place of GeneratorExit: a request that has run past its
 * bound. Same thread, GIL and reference rules; the exception class is
 * borrowed from the module, which keeps it for the life of the process. */
int m0_wsgi_timeout(m0_thread *self, m0_thread *target);

/* m0_wsgi_clear_interrupt takes back an interrupt of target's that was
 * not raised yet (the body ended first). Called on self's thread, target's
 * or another of target's interpreter; the GIL is taken through self and
 * released on return. */
void m0_wsgi_clear_interrupt(m0_thread *self, m0_thread *target);

/* ASGI: messages between Go and the loop. */
typedef struct {
	int kind;
	uint32_t slot; /* the request, or UINT32_MAX for none */
	uint32_t gen;
	int flags;
	char *data; /* malloc'd, or NULL */
	size_t len;
} m0_amsg;

/* The rings. Each queue between Go and the loop has a ring of bytes in C
 * memory that one side writes and the other reads with atomic operations
 * alone (loads, stores, an exchange), so a message passes without either
 * side calling the other: Go writes the inbound ring (under a lock of its
 * own, for its many goroutines) and reads the outbound one (its
 * collector); the loop's thread, with the GIL (which keeps it the one
 * writer), reads the inbound ring and writes the outbound one. A cgo call
 * from Go wakes the runtime's monitor when the process was idle, which at
 * one connection is every request; the rings take those calls off the
 * request's path. The inline front end (M0_INVERTED) does not use the
 * outbound ring: Go takes that queue by a call on the loop's thread.
 *
 * A record is an m0_rhdr and len bytes of data, padded to 8 bytes; head
 * and tail count the bytes ever written and taken, so head - tail is what
 * is queued. A record does not wrap: where fewer bytes than it needs are
 * left before the ring's end, the writer skips them, with a record of kind
 * M0_R_SKIP where a header fits, and the reader skips them likewise. A
 * message that does not fit (its data over a quarter of the ring, or the
 * ring full) goes to the queue behind the ring, which has a lock
 * (m0_asgi_post on Go's side, to_go on the loop's), and sets overflow;
 * while overflow is set every message goes there, so the order holds. The
 * reader takes the ring, then, when overflow is set, the ring again and
 * the queue, which clears overflow under the queue's lock.
 *
 * signaled is the wake-up: a writer that changes it from 0 to 1 has the
 * reader woken (an eventfd); a quiet message (a response's start) claims
 * none. The reader sets it to 0 before it takes. Both pairs (the writer's
 * store of head then its exchange of signaled, the reader's store of
 * signaled then its load of head) are sequentially consistent, so one of
 * the two always sees the other's: a message is taken, or woken for. */
typedef struct {
	uint32_t len;
	int32_t kind;
	uint32_t slot;
	uint32_t gen;
	int32_t flags;
	uint32_t pad;
} m0_rhdr;

enum { M0_R_SKIP = -1, M0_R_HDR = 24 };

typedef struct {
	uint64_t head;     /* bytes written: the writer's, read by the reader */
	char pad0[56];
	uint64_t tail;     /* bytes taken: the reader's, read by the writer */
	char pad1[56];
	uint32_t signaled; /* the reader is owed or given a wake-up */
	uint32_t overflow; /* messages wait in the queue behind the ring */
	uint64_t cap;      /* a power of two */
	char *buf;
	uint64_t spills;   /* messages the writer sent to the queue behind the ring (atomic; read by tests) */
} m0_ring;

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
	M0_A_CONN = 10,      /* inline: flags: a connection's descriptor for Go's front end on the loop */
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

/* For tests of the rings' two sides against each other: a ring of cap
 * bytes (a power of two), freed with m0_ring_free; the loop's writer
 * (m0_ring_put, 1 put, 0 no room) and reader (m0_ring_take, every message,
 * freed with m0_asgi_free; 0 and nothing taken out of memory). One writer
 * and one reader at a time; no GIL needed. */
m0_ring *m0_ring_new(size_t cap);
void m0_ring_free(m0_ring *r);
int m0_ring_put(m0_ring *r, int kind, uint32_t slot, uint32_t gen, int flags, const char *data, size_t len);
size_t m0_ring_take(m0_ring *r, m0_amsg **out);

/* m0_asgi_init makes an executor: its id and the eventfds of its two
 * queues (Go -> loop, loop -> Go): in_fd, which the loop reads; kick_fd,
 * Go's own descriptor for the inbound waker's end (a duplicate, which Go
 * writes to wake the loop and closes once done with the executor); out_fd,
 * which Go's collector reads and Go's sweeper writes to as out_wfd (the
 * same eventfd on Linux; a pipe's two ends on macOS, where there is no
 * eventfd). Go closes out_fd and out_wfd once the loop has ended
 * (m0_asgi_close); this file closes the inbound ones. Any thread; no GIL
 * needed. 0, or -1 (no eventfd, no memory, or 256 executors made
 * already). */
int m0_asgi_init(int *id, int *in_fd, int *kick_fd, int *out_fd, int *out_wfd);

/* m0_asgi_ring is executor id's inbound ring (out 0), which Go writes, or
 * its outbound ring (out 1), which Go reads; the executor's for life. Any
 * thread; no GIL needed. */
m0_ring *m0_asgi_ring(int id, int out);

/* m0_asgi_post appends a message that the inbound ring has no room for to
 * the queue behind it, copying data, and sets the ring's overflow. Go
 * calls it under the lock it writes the ring with; no GIL needed. The
 * wake-up is the caller's, as for the ring. 0, or -1 when out of memory or
 * the executor has ended. */
int m0_asgi_post(int id, int kind, uint32_t slot, uint32_t gen, int flags, const char *data, size_t len);

/* m0_asgi_owed reports whether the loop of executor id owes Go a wake-up
 * for messages it has queued (it gives it at the end of its batch or turn),
 * and sets *wakes to the count of owed wake-ups given so far: the same
 * count and a wake-up still owed a while later mean a step that holds the
 * loop has kept it from giving it. Any thread; no GIL needed. */
int m0_asgi_owed(int id, unsigned *wakes);

/* m0_asgi_close lets go of executor id once its loop has ended (after
 * m0_asgi_run returned): its inbound eventfd is closed and what is queued
 * there freed; a later m0_asgi_post fails (a later write to the inbound
 * ring is never read). No thread writes to the outbound
 * eventfd after it: Go closes that one, and takes what is left in its
 * queue. The id is not reused. Any thread; no GIL needed. */
void m0_asgi_close(int id);

/* m0_asgi_take hands over every message executor id's loop has queued for
 * Go behind its outbound ring, and clears the ring's overflow; the caller
 * frees them with m0_asgi_free. One Go goroutine per executor (its
 * collector), after it took the ring; no GIL needed. */
size_t m0_asgi_take(int id, m0_amsg **out);
void m0_asgi_free(m0_amsg *v, size_t n);

/* m0_asgi_run runs executor id's loop with app (borrowed; Go holds it, an
 * object of t's interpreter) on the calling thread, t's, in t's
 * interpreter, until Go stops it (M0_A_STOP), then lets go of every
 * reference the loop held. The thread is the loop's for that long:
 * it holds the GIL while Python runs and releases it whenever the loop
 * waits. GIL not held on entry or return. 0, or -1 with the traceback in
 * t->err (the loop did not start, uvloop missing). */
int m0_asgi_run(m0_thread *t, int id, uintptr_t app, const char *opts);

/* M0_LAZY_STARTS is how many requests a turn of the loop starts where tasks
 * start lazily (before 3.12): a task's first step runs a turn after its
 * start, so every request started in a turn is alive at once, and past
 * a few dozen (a request makes some fifteen objects the cyclic collector
 * counts; it runs every 700) the collector runs inside the batch, finds
 * them all alive, and moves them to the older generations, whose
 * collections then grow with the connections (at 1,024 connections, a
 * tenth of the loop's thread on the hello world). The rest of the batch
 * waits a turn, in order, after the steps of those started: what Go posted
 * for asgi_resume, the inline front end's own for its next Batch. */
#define M0_LAZY_STARTS 64

/* The inline front end (M0_INVERTED): Go's network runs on the loop's
 * thread. The loop calls go_asgi_inline(id, op, fd) for a connection
 * posted with M0_A_CONN (M0_I_ADOPT), a watched descriptor readable or
 * writable, the end of a turn asked for with m0_asgi_later (M0_I_BATCH),
 * and whenever it has queued messages for Go (M0_I_ANSWERS), which Go takes
 * at once with m0_asgi_take_now. Every function below is called by Go from
 * inside go_asgi_inline: the loop's thread, with the GIL held. */
enum { M0_I_ADOPT = 1, M0_I_READ = 2, M0_I_WRITE = 3, M0_I_BATCH = 4, M0_I_ANSWERS = 5 };
enum { M0_W_READ = 1, M0_W_WRITE = 2 };

/* m0_asgi_inline makes executor id inline; before m0_asgi_run. Any
 * thread. */
void m0_asgi_inline(int id);

/* m0_asgi_start_now starts a request of executor id at once (kind
 * M0_A_HTTP), as asgi_drain would: data is borrowed for the call. What
 * the application sends meanwhile (its eager step, 3.12+) is queued, and
 * go_asgi_inline is not called for it: the caller takes it with
 * m0_asgi_take_now. Except when last (no request follows it in the
 * caller's batch) and the request is alone in flight: then what it sends
 * in that step goes to go_asgi_inline(M0_I_ANSWERS) at once, inside this
 * call, as a later step's would. The loop's thread, inside
 * go_asgi_inline, with the GIL. */
void m0_asgi_start_now(int id, int kind, uint32_t slot, uint32_t gen, int flags, const char *data, size_t len,
		       int last);

/* m0_asgi_take_now is m0_asgi_take on the loop's thread, for the inline
 * front end: what is queued, and the wake-up it was owed, settled. */
size_t m0_asgi_take_now(int id, m0_amsg **out);

/* m0_asgi_watch has executor id's loop watch fd (what: M0_W_READ,
 * M0_W_WRITE, or 0 for neither any more), calling go_asgi_inline. 0, or -1
 * (the loop refused; the error is cleared). */
int m0_asgi_watch(int id, int fd, int what);

/* m0_asgi_later has the loop call go_asgi_inline(id, M0_I_BATCH, -1) once
 * it has run the callbacks of this turn. 0, or -1 (the loop refused). */
int m0_asgi_later(int id);

#endif
