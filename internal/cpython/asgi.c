/* The ASGI executor: one asyncio loop on a Python thread of its own.
 *
 * Go and the loop talk through two queues, each with an eventfd (a pipe on
 * macOS, its two ends apart where an eventfd is one). Go posts
 * events (a request, a body chunk, a disconnect) to the inbound queue and
 * wakes the loop once per batch; the loop drains every pending event in one
 * callback. The loop posts what the application sends (a response head, a
 * body chunk, a WebSocket frame) to the outbound queue and wakes Go once per
 * batch of Go's events, or once per loop turn (to_go); Go's sweeper wakes
 * itself when a step holding the loop keeps that wake-up from coming. The
 * loop thread never calls into Go on the hot path, so it never needs Go's
 * scheduler.
 *
 * The scope, receive and send are built and handled here in C: receive and
 * send are builtin functions bound to the request's handle, and they return
 * futures (a finished one when nothing has to wait), so a request whose
 * coroutine never waits finishes in the loop iteration it started in (with
 * eager tasks, 3.12+). */
#include "m0py_int.h"
#include "_cgo_export.h"

#include <errno.h>
#include <stdarg.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <fcntl.h>
#ifdef __linux__
#include <sys/eventfd.h>
#endif

/* ---- the queues ------------------------------------------------------------ */

typedef struct {
	m0_ring ring;  /* the queue's fast path (m0py.h, "The rings") */
	m0_amsg *v;    /* what the ring had no room for, in order after it */
	size_t n, cap;
	int signaled; /* the inline front end's outbound queue: the reader has been woken and has not taken it yet */
	int fd;       /* the reader's end; -1 once the executor has ended */
	int wfd;      /* the waker's end: fd itself for an eventfd */
	pthread_mutex_t mu;
} msgq;

/* wake_pair makes a queue's wake-up descriptors, non-blocking and
 * close-on-exec: fds[0] to read, fds[1] to write (one eventfd, both the
 * same, on Linux; a pipe elsewhere). 0, or -1 with none made. */
static int wake_pair(int fds[2])
{
#ifdef __linux__
	fds[0] = fds[1] = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	return fds[0] < 0 ? -1 : 0;
#else
	if (pipe(fds) < 0) {
		fds[0] = fds[1] = -1;
		return -1;
	}
	for (int i = 0; i < 2; i++) {
		if (fcntl(fds[i], F_SETFL, O_NONBLOCK) < 0 || fcntl(fds[i], F_SETFD, FD_CLOEXEC) < 0) {
			close(fds[0]);
			close(fds[1]);
			fds[0] = fds[1] = -1;
			return -1;
		}
	}
	return 0;
#endif
}

static void close_pair(int fd, int wfd)
{
	if (fd >= 0)
		close(fd);
	if (wfd >= 0 && wfd != fd)
		close(wfd);
}


/* wake writes to a queue's waker's end. A pipe that is full (EAGAIN) has
 * its reader's wake-up pending already. */
static void wake(int fd)
{
	uint64_t one = 1;
	while (write(fd, &one, sizeof one) < 0 && errno == EINTR)
		;
}

/* ring_init gives a queue's ring its buffer. 0, or -1 out of memory. */
static int ring_init(m0_ring *r, size_t cap)
{
	r->buf = malloc(cap);
	r->cap = cap;
	return r->buf ? 0 : -1;
}

static uint64_t rec_size(size_t len)
{
	return (M0_R_HDR + (uint64_t)len + 7) & ~(uint64_t)7;
}

/* ring_put appends m to ring r, copying its data; 0 when it has not the
 * room (or m's data is over a quarter of it). The ring's one writer. */
static int ring_put(m0_ring *r, const m0_amsg *m)
{
	if (m->len > r->cap / 4)
		return 0;
	uint64_t need = rec_size(m->len);
	uint64_t h = r->head, t = __atomic_load_n(&r->tail, __ATOMIC_ACQUIRE);
	uint64_t pos = h & (r->cap - 1), end = r->cap - pos, skip = end < need ? end : 0;
	if (h + skip + need - t > r->cap)
		return 0;
	if (skip) {
		if (end >= M0_R_HDR)
			((m0_rhdr *)(r->buf + pos))->kind = M0_R_SKIP;
		h += skip;
		pos = 0;
	}
	m0_rhdr *hd = (m0_rhdr *)(r->buf + pos);
	*hd = (m0_rhdr){.len = (uint32_t)m->len, .kind = m->kind, .slot = m->slot, .gen = m->gen, .flags = m->flags};
	if (m->len)
		memcpy(r->buf + pos + M0_R_HDR, m->data, m->len);
	__atomic_store_n(&r->head, h + need, __ATOMIC_SEQ_CST); /* before the writer's exchange of signaled */
	return 1;
}

/* ring_take appends what ring r holds to *v (n messages of cap), each
 * message's data copied to memory of its own, and frees the ring's room.
 * The ring's one reader. -1 when out of memory (what was taken stays in
 * *v, and the rest in the ring). */
static int ring_take(m0_ring *r, m0_amsg **v, size_t *n, size_t *cap)
{
	uint64_t t = r->tail, h = __atomic_load_n(&r->head, __ATOMIC_SEQ_CST); /* after the reader's reset of signaled */
	int rc = 0;
	while (t < h) {
		uint64_t pos = t & (r->cap - 1), end = r->cap - pos;
		m0_rhdr *hd = (m0_rhdr *)(r->buf + pos);
		if (end < M0_R_HDR || hd->kind == M0_R_SKIP) {
			t += end;
			continue;
		}
		if (*n == *cap) {
			size_t c = *cap ? *cap * 2 : 16;
			m0_amsg *w = realloc(*v, c * sizeof *w);
			if (!w) {
				rc = -1;
				break;
			}
			*v = w;
			*cap = c;
		}
		m0_amsg m = {.kind = hd->kind, .slot = hd->slot, .gen = hd->gen, .flags = hd->flags};
		if (hd->len) {
			m.data = malloc(hd->len);
			if (!m.data) {
				rc = -1;
				break;
			}
			memcpy(m.data, r->buf + pos + M0_R_HDR, hd->len);
			m.len = hd->len;
		}
		(*v)[(*n)++] = m;
		t += rec_size(hd->len);
	}
	__atomic_store_n(&r->tail, t, __ATOMIC_RELEASE);
	return rc;
}

/* enqueue appends a message (taking its data). It returns 1 when the
 * message is the first since the reader last took the queue, and the
 * reader must be woken; 0 when it needs no waking; -1 when out of memory.
 * A quiet message claims no wake-up (0): it waits for the next message
 * that does, or for a take that other messages woke. behind: the message
 * is one the ring had no room for, and sets the ring's overflow. */
static int enqueue(msgq *q, m0_amsg m, int quiet, int behind)
{
	pthread_mutex_lock(&q->mu);
	if (q->fd < 0) { /* the executor has ended */
		pthread_mutex_unlock(&q->mu);
		free(m.data);
		return -1;
	}
	if (q->n == q->cap) {
		size_t cap = q->cap ? q->cap * 2 : 64;
		m0_amsg *v = realloc(q->v, cap * sizeof *v);
		if (!v) {
			pthread_mutex_unlock(&q->mu);
			free(m.data);
			return -1;
		}
		q->v = v;
		q->cap = cap;
	}
	q->v[q->n++] = m;
	if (behind)
		__atomic_store_n(&q->ring.overflow, 1, __ATOMIC_SEQ_CST);
	int first = 0;
	if (!quiet) {
		first = !q->signaled;
		q->signaled = 1;
	}
	pthread_mutex_unlock(&q->mu);
	return first;
}


/* take hands over every queued message; the caller frees them. The
 * reader has reset the eventfd's count (read it) before. */
static size_t take(msgq *q, m0_amsg **out)
{
	pthread_mutex_lock(&q->mu);
	size_t cnt = q->n;
	*out = q->v;
	q->v = NULL;
	q->n = q->cap = 0;
	q->signaled = 0;
	__atomic_store_n(&q->ring.overflow, 0, __ATOMIC_SEQ_CST);
	pthread_mutex_unlock(&q->mu);
	return cnt;
}

void m0_asgi_free(m0_amsg *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i].data);
	free(v);
}

/* ---- each interpreter's objects ------------------------------------------- */

#define K(X)                                                                        \
	X(type) X(asgi) X(http_version) X(method) X(scheme) X(path) X(raw_path)     \
	X(query_string) X(root_path) X(headers) X(client) X(server) X(state)        \
	X(extensions) X(subprotocols) X(body) X(more_body) X(status) X(text)        \
	X(bytes) X(code) X(reason) X(subprotocol) X(trailers) X(set_result)          \
	X(set_exception) X(cancelled) X(done) X(add_done_callback) X(exception)     \
	X(result) X(cancel) X(version) X(spec_version) X(eager_start)

/* The objects every scope and message is made of, and the _m0 functions
 * the loop calls: one set for each interpreter an executor runs in, made
 * in it by the first executor's setup there (intern) and kept for the
 * process's life. An interpreter with its own GIL touches its own set only:
 * an object of another's would have its reference count raced. Read on the
 * loop's thread, under its interpreter's GIL. */
typedef struct {
	int made;                     /* every object below is made */
	PyObject *module, *format_exc; /* that interpreter's _m0 and _m0._format_exc (borrowed: they live with it) */
	PyObject *a_receive_later;    /* _m0._receive_later(waiter, receive) */
	PyObject *a_asgi;             /* the scope's "asgi" dict */
	PyObject *a_asgi_ws;          /* a WebSocket scope's */
	PyObject *a_extensions;       /* an HTTP scope's "extensions" dict */
	PyObject *a_extensions_ws;    /* a WebSocket scope's */
	struct {
#define X(n) PyObject *n;
		K(X)
#undef X
	} k; /* interned keys */
	/* Interned values. */
	PyObject *v_http, *v_websocket, *v_ws, *v_11, *v_10, *v_request, *v_disconnect, *v_connect,
		*v_wsreceive, *v_wsdisconnect;
	PyObject *methods[8]; /* GET HEAD POST PUT DELETE OPTIONS PATCH */
} astate;

static astate astates[M0_MAX_INTERPS];

/* ---- executors ---------------------------------------------------------------- */

typedef struct aslot aslot;

/* An executor: one application on one loop, with the queues between it and
 * Go. Its Python objects are used only on its loop's thread; its queues by
 * Go's threads and that one. */
typedef struct {
	int id;
	astate *st;               /* its interpreter's objects, set before its loop runs */
	msgq in, out;              /* Go -> loop, loop -> Go */
	PyObject *loop, *app, *state;
	PyObject *create_future;   /* loop.create_future */
	PyObject *create_task;     /* loop.create_task, or asyncio.Task with eager_start */
	PyObject *task_kw;         /* {"loop": loop, "eager_start": True}, or NULL */
	PyObject *done;            /* a finished future: what send returns when nothing waits */
	PyObject *event;           /* the loop's _asgi_event(kind, flags), for the rare events */
	aslot *slots;
	size_t nslots;
	PyObject *call_soon;       /* loop.call_soon */
	PyObject *flush;           /* _asgi_flush bound to the id: wakes Go for what the turn sent */
	int draining_in; /* inside asgi_drain: Go is woken once, at its end */
	int drain;       /* the server drains: a request that starts now hears it too */
	int owe_wake;    /* a message went to Go since it was last woken (atomic: Go's sweeper reads it) */
	int owe_inline;  /* the inline front end has answers to take since it last took them (the loop's thread) */
	unsigned wakes;  /* owed wake-ups given (atomic, for the sweeper) */
	int flush_due;   /* flush is scheduled with call_soon */
	/* The inline front end's (M0_INVERTED): Go's network on the loop's
	 * thread, told of what the loop queues by a call, not an eventfd. */
	int inline_fe;
	PyObject *inline_io;  /* _m0._asgi_io bound to the id: the watch callback */
	PyObject *inline_end; /* the same for the end of a turn (M0_I_BATCH) */
	int in_go;            /* inside go_asgi_inline (inline_call) */
	int start_alone;      /* in the eager step of m0_asgi_start_now's last request: its answer may go at once */
	PyObject *resume;     /* asgi_resume bound to the id: the rest of a batch, a turn later (lazy tasks) */
	m0_amsg *later;       /* the rest of a batch that started M0_LAZY_STARTS requests, in order */
	size_t nlater, caplater;
	int resume_due;       /* resume is scheduled */
	int stopped;          /* M0_A_STOP was handled: what waits is never started */
	int nlive;            /* requests whose task has not ended (live slots; the loop's thread) */
	int start_inl;        /* inside m0_asgi_start_now: the request starting is the inline front end's */
	/* The inline front end's requests' answers, taken by a call on the
	 * loop's thread (m0_asgi_take_now); every other request's go through
	 * out to Go's collector, as without it. No descriptor: fd is 0 while
	 * the executor runs, -1 once it has ended. */
	msgq iq;
} aexec;

/* Executors by id; an id is never reused, and an executor is never freed
 * (a handler that stopped keeps its few bytes). */
#define M0_MAX_EXEC 256
static aexec *execs[M0_MAX_EXEC];
static int nexecs;
static pthread_mutex_t execs_mu = PTHREAD_MUTEX_INITIALIZER;

static aexec *exec_of(int id)
{
	return id >= 0 && id < M0_MAX_EXEC ? execs[id] : NULL;
}

/* exec_here is executor id if its loop runs in the calling thread's
 * interpreter, else NULL: every interpreter's _m0 has the executor's
 * functions, which take an id, and an executor's objects are its own
 * interpreter's. The GIL is held. */
static aexec *exec_here(int id)
{
	aexec *ex = exec_of(id);
	return ex && ex->st && m0_interps[ex->st - astates].interp == py.PyInterpreterState_Get() ? ex : NULL;
}

/* The rings' size: a message whose data is over a quarter of it (64 KiB) goes behind. */
#define M0_RING_CAP (256 * 1024)

int m0_asgi_init(int *id, int *in_fd, int *kick_fd, int *out_fd, int *out_wfd)
{
	pthread_mutex_lock(&execs_mu);
	if (nexecs == M0_MAX_EXEC) {
		pthread_mutex_unlock(&execs_mu);
		return -1;
	}
	aexec *ex = calloc(1, sizeof *ex);
	int in[2] = {-1, -1}, out[2] = {-1, -1}, kick = -1;
	if (!ex || ring_init(&ex->in.ring, M0_RING_CAP) < 0 || ring_init(&ex->out.ring, M0_RING_CAP) < 0 ||
	    wake_pair(in) < 0 || wake_pair(out) < 0 || (kick = fcntl(in[1], F_DUPFD_CLOEXEC, 0)) < 0) {
		close_pair(in[0], in[1]);
		close_pair(out[0], out[1]);
		if (ex) {
			free(ex->in.ring.buf);
			free(ex->out.ring.buf);
			free(ex);
		}
		pthread_mutex_unlock(&execs_mu);
		return -1;
	}
	ex->in.fd = in[0];
	ex->in.wfd = in[1];
	ex->out.fd = out[0];
	ex->out.wfd = out[1];
	pthread_mutex_init(&ex->in.mu, NULL);
	pthread_mutex_init(&ex->out.mu, NULL);
	pthread_mutex_init(&ex->iq.mu, NULL);
	ex->id = nexecs;
	execs[nexecs++] = ex;
	pthread_mutex_unlock(&execs_mu);
	*id = ex->id;
	*in_fd = ex->in.fd;
	*kick_fd = kick;
	*out_fd = ex->out.fd;
	*out_wfd = ex->out.wfd;
	return 0;
}

m0_ring *m0_asgi_ring(int id, int out)
{
	aexec *ex = exec_of(id);
	if (!ex)
		return NULL;
	return out ? &ex->out.ring : &ex->in.ring;
}

int m0_asgi_post(int id, int kind, uint32_t slot, uint32_t gen, int flags, const char *data, size_t len)
{
	aexec *ex = exec_of(id);
	if (!ex)
		return -1;
	m0_amsg m = {.kind = kind, .slot = slot, .gen = gen, .flags = flags};
	if (len) {
		m.data = malloc(len);
		if (!m.data)
			return -1;
		memcpy(m.data, data, len);
		m.len = len;
	}
	return enqueue(&ex->in, m, 1, 1) < 0 ? -1 : 0;
}

int m0_asgi_owed(int id, unsigned *wakes)
{
	aexec *ex = exec_of(id);
	if (!ex)
		return 0;
	*wakes = __atomic_load_n(&ex->wakes, __ATOMIC_RELAXED);
	return __atomic_load_n(&ex->owe_wake, __ATOMIC_RELAXED);
}

void m0_asgi_close(int id)
{
	aexec *ex = exec_of(id);
	if (!ex)
		return;
	pthread_mutex_lock(&ex->in.mu);
	int fd = ex->in.fd, wfd = ex->in.wfd;
	m0_amsg *v = ex->in.v;
	size_t n = ex->in.n;
	ex->in.fd = ex->in.wfd = -1;
	ex->in.v = NULL;
	ex->in.n = ex->in.cap = 0;
	pthread_mutex_unlock(&ex->in.mu);
	close_pair(fd, wfd); /* Go's duplicate (kick_fd) keeps the eventfd for its late wake-ups */
	m0_asgi_free(v, n);
	/* The outbound eventfd (both ends of a pipe) is Go's to close (its
	 * collector polls it): from here on no thread of this file writes to
	 * it. */
	pthread_mutex_lock(&ex->out.mu);
	ex->out.fd = ex->out.wfd = -1;
	pthread_mutex_unlock(&ex->out.mu);
	/* The inline front end's answers left now have no one to take them:
	 * its requests ended with the loop. */
	pthread_mutex_lock(&ex->iq.mu);
	v = ex->iq.v, n = ex->iq.n;
	ex->iq.fd = ex->iq.wfd = -1;
	ex->iq.v = NULL;
	ex->iq.n = ex->iq.cap = 0;
	pthread_mutex_unlock(&ex->iq.mu);
	m0_asgi_free(v, n);
}

size_t m0_asgi_take(int id, m0_amsg **out)
{
	aexec *ex = exec_of(id);
	if (!ex) {
		*out = NULL;
		return 0;
	}
	return take(&ex->out, out);
}

/* owe records that Go is owed a wake-up, which the loop gives at the end
 * of the batch or the turn (pay); Go's sweeper (m0_asgi_owed) gives it
 * instead when a step that holds the loop keeps the loop from getting
 * there. The loop's thread. */
static void owe(aexec *ex)
{
	__atomic_store_n(&ex->owe_wake, 1, __ATOMIC_RELAXED);
}

static void inline_call(aexec *ex, int op, int fd);

/* owe_in records that the inline front end has answers to take, which
 * pay has it take. The loop's thread. */
static void owe_in(aexec *ex) { ex->owe_inline = 1; }

/* owe_to owes the answer's reader: the inline front end for one of its
 * requests (inl), else Go's collector. The loop's thread. */
static void owe_to(aexec *ex, int inl)
{
	if (inl)
		owe_in(ex);
	else
		owe(ex);
}

/* pay gives the wake-up owed to Go's collector, and has the inline front
 * end take what it is owed, if either is. The loop's thread. */
static void pay(aexec *ex)
{
	if (ex->owe_wake) {
		__atomic_store_n(&ex->owe_wake, 0, __ATOMIC_RELAXED);
		__atomic_fetch_add(&ex->wakes, 1, __ATOMIC_RELAXED);
		wake(ex->out.wfd);
	}
	if (ex->owe_inline)
		inline_call(ex, M0_I_ANSWERS, -1); /* which takes it: owe_inline is cleared by the take */
}

/* defer_wake has Go woken once the loop has run the callbacks of this
 * turn (flush, by call_soon) rather than now: outside asgi_drain (tasks
 * that start a turn later, as on 3.11, or resume after an await), the
 * first message of a turn would wake Go while the loop still has the
 * other tasks' answers to send, and on one CPU Go's thread then preempts
 * the loop's once a message. It reports whether the wake-up is deferred;
 * it is not when an exception is being handled or the loop refuses the
 * callback (stopping), and the caller wakes Go at once. The loop's thread,
 * with the GIL. */
static int defer_wake(aexec *ex, int inl)
{
	if (ex->flush_due) {
		owe_to(ex, inl);
		return 1;
	}
	if (!ex->call_soon || !ex->flush || py.PyErr_Occurred())
		return 0;
	PyObject *r = py.PyObject_CallFunctionObjArgs(ex->call_soon, ex->flush, NULL);
	if (!r) {
		py.PyErr_Clear();
		return 0;
	}
	py.Py_DecRef(r);
	ex->flush_due = 1;
	owe_to(ex, inl);
	return 1;
}

/* to_go appends a message for Go and wakes Go's collector when it is the
 * first since the collector last took the queue (the inline front end: has
 * Go take it, on this thread): inside asgi_drain at the end of the batch;
 * elsewhere, when other requests are in flight, at the end of the loop's
 * turn (defer_wake), so that one wake-up carries all of it and the
 * answers go out together; a request alone in flight at once, as no other
 * answer can join it (1.055-1.077x at one connection, measured).
 * A response's start wakes no one: Go acts on it only with the message
 * after it (the first body part, a pathsend, the task's end), which an
 * application sends next, in the same step of its task as a rule; a
 * separate wake-up would cost two thread switches more per request. */
static int to_go_q(aexec *ex, m0_amsg m, int inl)
{
	int quiet = m.kind == M0_C_START, first;
	if (inl) { /* Go takes the queue on this thread, by a call (m0_asgi_take_now) */
		first = enqueue(&ex->iq, m, quiet, 0);
	} else {
		m0_ring *r = &ex->out.ring;
		if (!__atomic_load_n(&r->overflow, __ATOMIC_SEQ_CST) && ring_put(r, &m)) {
			free(m.data);
			first = 0;
		} else {
			__atomic_fetch_add(&r->spills, 1, __ATOMIC_RELAXED);
			first = enqueue(&ex->out, m, 1, 1);
		}
		if (first == 0 && !quiet)
			first = !__atomic_exchange_n(&r->signaled, 1, __ATOMIC_SEQ_CST);
	}
	if (first > 0) {
		if (ex->draining_in)
			owe_to(ex, inl);
		else if (ex->nlive > 1 && defer_wake(ex, inl))
			; /* at the end of the turn, with the other requests' answers */
		else if (inl)
			inline_call(ex, M0_I_ANSWERS, -1); /* Go writes it now, on this thread */
		else
			wake(ex->out.wfd);
	}
	return first < 0 ? -1 : 0;
}

/* to_go is to_go_q for a message of no inline request: to Go's
 * collector. */
static int to_go(aexec *ex, m0_amsg m) { return to_go_q(ex, m, 0); }

/* notify posts a message to Go that no request owns. */
static int notify(aexec *ex, int kind, int flags, const char *p, size_t len)
{
	m0_amsg m = {.kind = kind, .slot = UINT32_MAX, .flags = flags};
	if (len) {
		m.data = malloc(len);
		if (!m.data)
			return -1;
		memcpy(m.data, p, len);
		m.len = len;
	}
	return to_go(ex, m);
}

static const char *method_names[] = {"GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH"};

/* ---- requests ---------------------------------------------------------------- */

/* The futures the receive() calls of a request wait on, all woken when a
 * message comes: each then takes the next message there is, if any. */
typedef struct {
	PyObject **v;
	size_t n, cap;
} waitlist;

/* A request's inbound messages not yet received: body chunks or WebSocket
 * frames. */
typedef struct {
	m0_amsg *v;
	size_t head, n, cap;
} inbox;

struct aslot {
	aexec *ex;
	uint32_t idx; /* its index in ex->slots */
	uint32_t gen;
	int live;
	int inl; /* the inline front end's (m0_asgi_start_now): its answers go to iq */
	int ws;
	int started;      /* http: the head was sent; ws: accepted */
	int complete;     /* http: the body ended; ws: closed */
	int disconnected; /* the client left */
	int draining;     /* the server drains: receive() says the client left */
	int body_more;    /* more request body is to come from Go */
	int want_sent;    /* Go was asked for more and has not answered */
	int connected;    /* ws: websocket.connect was received */
	int denying;      /* ws: the application answers with an HTTP response */
	int dcode;        /* ws: the close code the client sent */
	PyObject *dreason; /* ws: and its reason */
	int head;         /* the request is a HEAD */
	size_t inflight;  /* bytes sent since Go last caught up */
	int idle_sent;    /* http: Go was told the application waits for the client */
	waitlist recv;    /* the futures receive() calls wait on */
	PyObject *send_fut;
	PyObject *task; /* asyncio holds tasks weakly: the slot keeps its own */
	inbox in;
};

/* emit2 posts a message of the request s to Go, copying alen bytes of a
 * and blen of b as its data. */
static int emit2(aslot *s, int kind, int flags, const char *a, size_t alen, const char *b, size_t blen)
{
	m0_amsg m = {.kind = kind, .slot = s->idx, .gen = s->gen, .flags = flags};
	if (alen + blen) {
		m.data = malloc(alen + blen);
		if (!m.data)
			return -1;
		if (alen)
			memcpy(m.data, a, alen);
		if (blen)
			memcpy(m.data + alen, b, blen);
		m.len = alen + blen;
	}
	return to_go_q(s->ex, m, s->inl);
}

static int emit(aslot *s, int kind, int flags, const char *p, size_t len)
{
	return emit2(s, kind, flags, p, len, NULL, 0);
}

/* Sends wait once this much of a body is queued for a client that has not
 * taken it. */
#define HIGH_WATER (256u << 10)

/* A slot index fits in SLOT_BITS bits: a request's handle holds its
 * generation, its executor's id and its slot in one integer. */
#define SLOT_BITS 24

static aslot *slot_at(aexec *ex, uint32_t i)
{
	if (i >= (1u << SLOT_BITS))
		return NULL;
	if (i >= ex->nslots) {
		size_t n = ex->nslots ? ex->nslots : 64;
		while (n <= i)
			n *= 2;
		aslot *s = realloc(ex->slots, n * sizeof *s);
		if (!s)
			return NULL;
		memset(s + ex->nslots, 0, (n - ex->nslots) * sizeof *s);
		for (size_t j = ex->nslots; j < n; j++) {
			s[j].ex = ex;
			s[j].idx = (uint32_t)j;
		}
		ex->slots = s;
		ex->nslots = n;
	}
	return &ex->slots[i];
}

static PyObject *handle(aslot *s)
{
	return py.PyLong_FromUnsignedLongLong(((unsigned long long)s->gen << 32) |
					      ((unsigned long long)s->ex->id << SLOT_BITS) | s->idx);
}

/* by_handle returns the live request a handle names, or NULL; *exp (when
 * not NULL) is set to its executor, which outlives the request. */
static aslot *by_handle_in(PyObject *h, aexec **exp)
{
	unsigned long long v = py.PyLong_AsUnsignedLongLong(h);
	if (v == (unsigned long long)-1 && py.PyErr_Occurred()) {
		py.PyErr_Clear();
		return NULL;
	}
	uint32_t gen = (uint32_t)(v >> 32), lo = (uint32_t)v;
	uint32_t i = lo & ((1u << SLOT_BITS) - 1);
	aexec *ex = exec_of((int)(lo >> SLOT_BITS));
	if (exp)
		*exp = ex;
	if (ex && i < ex->nslots && ex->slots[i].live && ex->slots[i].gen == gen)
		return &ex->slots[i];
	return NULL;
}

static aslot *by_handle(PyObject *h) { return by_handle_in(h, NULL); }

/* lookup returns the live request a bound function's handle names, or NULL
 * with RuntimeError set. */
static aslot *lookup(PyObject *self)
{
	aslot *s = by_handle(self);
	if (!s)
		py.PyErr_SetString(EXC(PyExc_RuntimeError), "asgi: receive or send used after the request ended");
	return s;
}

static void inbox_push(inbox *b, m0_amsg m)
{
	if (b->head + b->n == b->cap) {
		if (b->head) {
			memmove(b->v, b->v + b->head, b->n * sizeof *b->v);
			b->head = 0;
		} else {
			size_t cap = b->cap ? b->cap * 2 : 4;
			m0_amsg *v = realloc(b->v, cap * sizeof *v);
			if (!v) {
				free(m.data);
				return;
			}
			b->v = v;
			b->cap = cap;
		}
	}
	b->v[b->head + b->n++] = m;
}

static m0_amsg inbox_pop(inbox *b)
{
	m0_amsg m = b->v[b->head++];
	if (--b->n == 0)
		b->head = 0;
	return m;
}

static void slot_clear(aslot *s)
{
	while (s->in.n) {
		m0_amsg m = inbox_pop(&s->in);
		free(m.data);
	}
	free(s->in.v);
	for (size_t i = 0; i < s->recv.n; i++)
		py.Py_DecRef(s->recv.v[i]);
	free(s->recv.v);
	if (s->send_fut)
		py.Py_DecRef(s->send_fut);
	if (s->dreason)
		py.Py_DecRef(s->dreason);
	PyObject *task = s->task;
	aexec *ex = s->ex;
	uint32_t idx = s->idx, gen = s->gen;
	if (s->live)
		ex->nlive--;
	memset(s, 0, sizeof *s);
	s->ex = ex;
	s->idx = idx;
	s->gen = gen;
	if (task)
		py.Py_DecRef(task); /* last: it may run a finalizer */
}

/* ---- futures --------------------------------------------------------------------- */

static PyObject *new_future(aexec *ex)
{
	return py.PyObject_CallFunctionObjArgs(ex->create_future, NULL);
}

/* ready returns a finished future of s's loop holding msg (stolen). */
static PyObject *ready_in(aexec *ex, PyObject *msg)
{
	astate *S = ex->st;
	if (!msg)
		return NULL;
	PyObject *f = new_future(ex);
	PyObject *r = f ? py.PyObject_CallMethodObjArgs(f, S->k.set_result, msg, NULL) : NULL;
	py.Py_DecRef(msg);
	if (!r) {
		if (f)
			py.Py_DecRef(f);
		return NULL;
	}
	py.Py_DecRef(r);
	return f;
}

static PyObject *ready(aslot *s, PyObject *msg) { return ready_in(s->ex, msg); }

/* oserror returns a new OSError for a client that left. */
static PyObject *oserror(void)
{
	PyObject *s = py.PyUnicode_FromString("asgi: the client disconnected");
	PyObject *e = s ? py.PyObject_CallFunctionObjArgs(EXC(PyExc_OSError), s, NULL) : NULL;
	if (s)
		py.Py_DecRef(s);
	return e;
}

/* settle resolves *fut (if any and not cancelled) with msg, or with an
 * OSError when msg is NULL; it steals msg and lets go of the future. It
 * returns 1 if a waiter took msg. */
static int settle(astate *S, PyObject **fut, PyObject *msg)
{
	PyObject *f = *fut;
	if (!f) {
		if (msg)
			py.Py_DecRef(msg);
		return 0;
	}
	*fut = NULL;
	int took = 0;
	PyObject *d = py.PyObject_CallMethodObjArgs(f, S->k.done, NULL);
	int finished = d ? py.PyObject_IsTrue(d) : 1;
	if (d)
		py.Py_DecRef(d);
	if (!finished) {
		PyObject *r;
		if (msg) {
			r = py.PyObject_CallMethodObjArgs(f, S->k.set_result, msg, NULL);
		} else {
			PyObject *exc = oserror();
			r = exc ? py.PyObject_CallMethodObjArgs(f, S->k.set_exception, exc, NULL) : NULL;
			if (exc)
				py.Py_DecRef(exc);
		}
		if (r) {
			py.Py_DecRef(r);
			took = 1;
		}
	}
	py.PyErr_Clear();
	if (msg)
		py.Py_DecRef(msg);
	py.Py_DecRef(f);
	return took;
}

/* ---- messages to the application ---------------------------------------------------- */

static PyObject *dict_of(astate *S, PyObject *type)
{
	PyObject *d = py.PyDict_New();
	if (d && py.PyDict_SetItem(d, S->k.type, type) < 0) {
		py.Py_DecRef(d);
		return NULL;
	}
	return d;
}

static int set_steal(PyObject *d, PyObject *key, PyObject *v)
{
	int rc = v ? py.PyDict_SetItem(d, key, v) : -1;
	if (v)
		py.Py_DecRef(v);
	return rc;
}

static PyObject *body_msg(astate *S, const char *p, size_t n, int more)
{
	PyObject *d = dict_of(S, S->v_request);
	if (!d || set_steal(d, S->k.body, py.PyBytes_FromStringAndSize(p, (Py_ssize_t)n)) < 0 ||
	    set_steal(d, S->k.more_body, py.PyBool_FromLong(more)) < 0) {
		if (d)
			py.Py_DecRef(d);
		return NULL;
	}
	return d;
}

static PyObject *ws_msg(astate *S, m0_amsg *m)
{
	PyObject *d = dict_of(S, S->v_wsreceive);
	if (!d)
		return NULL;
	int rc = (m->flags & M0_A_TEXT)
			 ? set_steal(d, S->k.text, py.PyUnicode_DecodeUTF8(m->data, (Py_ssize_t)m->len, "replace"))
			 : set_steal(d, S->k.bytes, py.PyBytes_FromStringAndSize(m->data, (Py_ssize_t)m->len));
	if (rc < 0) {
		py.Py_DecRef(d);
		return NULL;
	}
	return d;
}

/* disconnect_of returns a new http.disconnect, or a websocket.disconnect
 * with code (1006 when 0) and reason (borrowed; "" when NULL). */
static PyObject *disconnect_of(astate *S, int ws, int code, PyObject *reason)
{
	if (!ws)
		return dict_of(S, S->v_disconnect);
	PyObject *d = dict_of(S, S->v_wsdisconnect);
	if (!d)
		return NULL;
	if (reason)
		py.Py_IncRef(reason);
	else
		reason = py.PyUnicode_FromString("");
	int rc = set_steal(d, S->k.reason, reason);
	if (rc == 0)
		rc = set_steal(d, S->k.code, py.PyLong_FromLong(code ? code : 1006));
	if (rc < 0) {
		py.Py_DecRef(d);
		return NULL;
	}
	return d;
}

static PyObject *disconnect_msg(aslot *s) { return disconnect_of(s->ex->st, s->ws, s->dcode, s->dreason); }

/* next_msg returns the message receive() yields now, or NULL (no error set)
 * when it has to wait. */
static PyObject *next_msg(aslot *s, int *err)
{
	astate *S = s->ex->st;
	*err = 0;
	PyObject *m = NULL;
	if (s->ws && !s->connected) {
		s->connected = 1;
		m = dict_of(S, S->v_connect);
	} else if (s->in.n) {
		m0_amsg a = inbox_pop(&s->in);
		if (s->ws) {
			m = ws_msg(S, &a);
			emit(s, M0_C_WANT, 0, NULL, 0); /* one more frame may come */
		} else {
			m = body_msg(S, a.data, a.len, (a.flags & M0_A_MORE) != 0);
		}
		free(a.data);
	} else if (s->disconnected || (s->draining && !s->body_more) || (!s->ws && s->complete)) {
		/* The drain waits for a body still to come: the request is in
		 * flight, and finishes. */
		m = disconnect_msg(s);
	} else {
		if (!s->ws && s->body_more && !s->want_sent) {
			s->want_sent = 1;
			emit(s, M0_C_WANT, 0, NULL, 0);
		} else if (!s->ws && !s->body_more && !s->idle_sent) {
			/* The body is in and the application waits on the client: only
			 * its leaving can come now, which Go then watches for. */
			s->idle_sent = 1;
			emit(s, M0_C_IDLE, 0, NULL, 0);
		}
		return NULL;
	}
	if (!m)
		*err = 1;
	return m;
}

/* add_waiter returns a new reference to a future a receive() waits on,
 * woken with the others when a message comes (the slot holds one more). */
static PyObject *add_waiter(aslot *s)
{
	astate *S = s->ex->st;
	/* Drop the waiters whose receive() was cancelled (wait_for's timeouts);
	 * several receive() calls may wait at once, as under uvicorn. */
	size_t kept = 0;
	for (size_t i = 0; i < s->recv.n; i++) {
		PyObject *d = py.PyObject_CallMethodObjArgs(s->recv.v[i], S->k.done, NULL);
		int finished = d ? py.PyObject_IsTrue(d) : 1;
		if (d)
			py.Py_DecRef(d);
		py.PyErr_Clear();
		if (finished)
			py.Py_DecRef(s->recv.v[i]);
		else
			s->recv.v[kept++] = s->recv.v[i];
	}
	s->recv.n = kept;
	if (s->recv.n == s->recv.cap) {
		size_t cap = s->recv.cap ? s->recv.cap * 2 : 2;
		PyObject **v = realloc(s->recv.v, cap * sizeof *v);
		if (!v) {
			py.PyErr_SetString(EXC(PyExc_RuntimeError), "asgi: out of memory");
			return NULL;
		}
		s->recv.v = v;
		s->recv.cap = cap;
	}
	PyObject *f = new_future(s->ex);
	if (!f)
		return NULL;
	py.Py_IncRef(f);
	s->recv.v[s->recv.n++] = f; /* the slot's reference */
	return f;
}

/* A receive() of a request that has ended (a task the application left
 * behind, still waiting for its client, or one that receives after the
 * response) gets the disconnect, as under uvicorn, not an error. */

/* take is what a waiting receive() calls once woken: (message, None)
 * when there is one, else (None, waiter) to wait on again (another
 * receive() took the message). */
static PyObject *take_next(PyObject *self, int ws)
{
	int err = 0;
	PyObject *m, *f = NULL;
	aexec *ex;
	aslot *s = by_handle_in(self, &ex);
	if (s)
		m = next_msg(s, &err);
	else if (ex)
		m = disconnect_of(ex->st, ws, 0, NULL), err = !m;
	else {
		py.PyErr_SetString(EXC(PyExc_RuntimeError), "asgi: receive() of an executor that has stopped");
		return NULL;
	}
	if (!m && (err || !(f = add_waiter(s))))
		return NULL;
	PyObject *t = py.PyTuple_New(2);
	if (!t) {
		py.Py_DecRef(m ? m : f);
		return NULL;
	}
	py.Py_IncRef(Py_None);
	py.PyTuple_SetItem(t, m ? 1 : 0, Py_None);
	py.PyTuple_SetItem(t, m ? 0 : 1, m ? m : f); /* steals */
	return t;
}

static PyObject *take_http(PyObject *self, PyObject *unused) { return take_next(self, 0); }
static PyObject *take_ws(PyObject *self, PyObject *unused) { return take_next(self, 1); }
static PyMethodDef take_defs[2] = {
	{"_take", take_http, 0x0004 /* METH_NOARGS */, NULL},
	{"_take", take_ws, 0x0004 /* METH_NOARGS */, NULL},
};

static PyObject *receive_next(PyObject *self, int ws)
{
	aexec *ex;
	aslot *s = by_handle_in(self, &ex);
	if (!s) {
		if (!ex) {
			py.PyErr_SetString(EXC(PyExc_RuntimeError), "asgi: receive() of an executor that has stopped");
			return NULL;
		}
		return ready_in(ex, disconnect_of(ex->st, ws, 0, NULL));
	}
	int err;
	PyObject *m = next_msg(s, &err);
	if (m)
		return ready(s, m);
	if (err)
		return NULL;
	/* Nothing yet: wait for a wake-up, then take the message on resuming
	 * (_receive_later, which loops while other receive() calls take the
	 * messages first). A waiter cancelled in between (wait_for's timeout
	 * firing as the message came) leaves the message for the next call. */
	PyObject *f = add_waiter(s);
	if (!f)
		return NULL;
	astate *S = s->ex->st;
	PyObject *tk = py.PyCFunction_NewEx(&take_defs[ws], self, S->module);
	PyObject *coro = tk ? py.PyObject_CallFunctionObjArgs(S->a_receive_later, f, tk, NULL) : NULL;
	if (tk)
		py.Py_DecRef(tk);
	py.Py_DecRef(f);
	return coro;
}

static PyObject *receive_http(PyObject *self, PyObject *unused) { return receive_next(self, 0); }
static PyObject *receive_ws(PyObject *self, PyObject *unused) { return receive_next(self, 1); }

/* wake_waiters resolves every waiting receive(): each takes the next
 * message, or waits again. */
static void wake_waiters(aslot *s)
{
	astate *S = s->ex->st;
	size_t n = s->recv.n;
	s->recv.n = 0;
	for (size_t i = 0; i < n; i++) {
		py.Py_IncRef(Py_None);
		settle(S, &s->recv.v[i], Py_None);
	}
}

/* feed wakes the waiting receive() calls when a message is there: the
 * message stays in the inbox until a receive resumes and takes it; one that
 * finds none waits again, and a disconnect reaches every one. */
static void feed(aslot *s)
{
	if (!s->recv.n)
		return;
	if (!s->in.n && !s->disconnected && !(s->draining && !s->body_more) && !(!s->ws && s->complete) &&
	    !(s->ws && !s->connected))
		return; /* nothing for them yet */
	wake_waiters(s);
}

/* ---- messages from the application --------------------------------------------------- */

static PyObject *get(PyObject *msg, PyObject *key)
{
	PyObject *tp = py.PyObject_Type(msg);
	int exact = tp == (PyObject *)py.PyDict_Type;
	if (tp)
		py.Py_DecRef(tp);
	PyObject *v;
	if (exact) {
		v = py.PyDict_GetItem(msg, key); /* borrowed; NULL without error when absent */
		if (v)
			py.Py_IncRef(v);
		return v;
	}
	v = py.PyObject_GetItem(msg, key);
	if (!v)
		py.PyErr_Clear();
	return v;
}

static const char *type_of(astate *S, PyObject *msg, PyObject **owned)
{
	*owned = get(msg, S->k.type);
	const char *t = *owned ? py.PyUnicode_AsUTF8AndSize(*owned, NULL) : NULL;
	if (!t) {
		py.PyErr_Clear();
		py.PyErr_SetString(EXC(PyExc_TypeError), "asgi: a message must be a dict with a str 'type'");
	}
	return t;
}

/* pack_headers packs an iterable of (name, value) byte pairs as
 * [u32 nlen][name][u32 vlen][value]... into b. */
static int pack_headers(PyObject *headers, m0_buf *b)
{
	if (!headers)
		return 0;
	PyObject *it = py.PyObject_GetIter(headers);
	if (!it)
		return -1;
	PyObject *pair;
	int rc = 0;
	while (rc == 0 && (pair = py.PyIter_Next(it))) {
		PyObject *n = py.PySequence_Size(pair) == 2 ? py.PySequence_GetItem(pair, 0) : NULL;
		PyObject *v = n ? py.PySequence_GetItem(pair, 1) : NULL;
		char *np, *vp;
		Py_ssize_t nl, vl;
		rc = -1;
		if (!v || py.PyBytes_AsStringAndSize(n, &np, &nl) < 0 ||
		    py.PyBytes_AsStringAndSize(v, &vp, &vl) < 0) {
			py.PyErr_Clear();
			py.PyErr_Format(EXC(PyExc_TypeError),
					"asgi: each header must be a pair of bytes, got %R", pair);
		} else {
			int ok = nl > 0;
			for (Py_ssize_t i = 0; ok && i < nl; i++)
				ok = is_tchar((unsigned char)np[i]);
			for (Py_ssize_t i = 0; ok && i < vl; i++) {
				unsigned char c = (unsigned char)vp[i];
				ok = !((c < 0x20 && c != '\t') || c == 0x7f);
			}
			if (!ok)
				py.PyErr_Format(EXC(PyExc_RuntimeError), "asgi: invalid HTTP header %R", pair);
			else if (buf_put_u32(b, (uint32_t)nl) == 0 && buf_put(b, np, (size_t)nl) == 0 &&
				 buf_put_u32(b, (uint32_t)vl) == 0 && buf_put(b, vp, (size_t)vl) == 0)
				rc = 0;
		}
		if (n)
			py.Py_DecRef(n);
		if (v)
			py.Py_DecRef(v);
		py.Py_DecRef(pair);
	}
	py.Py_DecRef(it);
	return rc == 0 && !py.PyErr_Occurred() ? 0 : -1;
}

static int truthy(PyObject *msg, PyObject *key)
{
	PyObject *v = get(msg, key);
	int r = v ? py.PyObject_IsTrue(v) : 0;
	if (v)
		py.Py_DecRef(v);
	if (r < 0) {
		py.PyErr_Clear(); /* a value whose truth cannot be told counts as false */
		r = 0;
	}
	return r;
}

/* body_of returns the bytes of msg[key] (absent: empty) in *p, *n, and a
 * reference to keep while they are used. */
static int body_of(PyObject *msg, PyObject *key, char **p, Py_ssize_t *n, PyObject **keep)
{
	*keep = get(msg, key);
	if (!*keep || *keep == Py_None) {
		*p = "";
		*n = 0;
		return 0;
	}
	if (py.PyBytes_AsStringAndSize(*keep, p, n) < 0) {
		py.PyErr_Clear();
		py.PyErr_SetString(EXC(PyExc_TypeError), "asgi: a message's body must be bytes");
		return -1;
	}
	return 0;
}

static PyObject *done_future(aslot *s)
{
	py.Py_IncRef(s->ex->done);
	return s->ex->done;
}

/* send_waits returns the future a send past the high-water mark waits on,
 * until Go catches up (M0_A_RESUME) or the client leaves. */
static PyObject *send_waits(aslot *s)
{
	astate *S = s->ex->st;
	PyObject *f = new_future(s->ex);
	if (f) {
		py.Py_IncRef(Py_None);
		settle(S, &s->send_fut, Py_None); /* one whose waiter was cancelled */
		py.Py_IncRef(f);
		s->send_fut = f;
	}
	return f;
}

/* send_start hands Go a response head: http.response.start, or a
 * WebSocket's websocket.http.response.start (type names it for errors). */
static int send_start(aslot *s, PyObject *msg, const char *type)
{
	astate *S = s->ex->st;
	PyObject *st = get(msg, S->k.status);
	long status = st ? py.PyLong_AsLong(st) : -1;
	if (st)
		py.Py_DecRef(st);
	if (status < 200 || status > 599) {
		py.PyErr_Clear();
		py.PyErr_Format(EXC(PyExc_RuntimeError), "asgi: %s needs an int 'status' from 200 to 599", type);
		return -1;
	}
	m0_buf b = {0};
	PyObject *h = get(msg, S->k.headers);
	int rc = pack_headers(h, &b);
	if (h)
		py.Py_DecRef(h);
	if (rc < 0) {
		free(b.p);
		return -1;
	}
	m0_amsg m = {.kind = M0_C_START, .slot = s->idx, .gen = s->gen, .flags = (int)status, .data = b.p, .len = b.len};
	to_go_q(s->ex, m, s->inl);
	return 0;
}

/* send_body hands Go a body message's part (msg["body"], with
 * msg["more_body"]): an HTTP response's, or a WebSocket denial's. With
 * flow, a part that takes what is queued past the high-water mark makes
 * the send wait (*wait). 0, or -1 with an exception set. */
static int send_body(aslot *s, PyObject *msg, int flow, int *more, int *wait)
{
	astate *S = s->ex->st;
	char *p;
	Py_ssize_t n;
	PyObject *keep;
	if (body_of(msg, S->k.body, &p, &n, &keep) < 0) {
		if (keep)
			py.Py_DecRef(keep);
		return -1;
	}
	*more = truthy(msg, S->k.more_body);
	*wait = 0;
	if (flow && *more) {
		s->inflight += (size_t)n;
		*wait = s->inflight > HIGH_WATER;
	}
	emit(s, M0_C_BODY, (*more ? M0_A_MORE : 0) | (*wait ? M0_A_WAIT : 0), p, (size_t)n);
	if (keep)
		py.Py_DecRef(keep);
	return 0;
}

static PyObject *http_send(aslot *s, PyObject *msg, const char *type)
{
	astate *S = s->ex->st;
	if (s->disconnected)
		return done_future(s); /* as uvicorn: a send after the client left is dropped */
	if (!s->started) {
		if (strcmp(type, "http.response.start") != 0) {
			py.PyErr_Format(EXC(PyExc_RuntimeError),
					"Expected ASGI message 'http.response.start', but got '%s'.", type);
			return NULL;
		}
		if (send_start(s, msg, type) < 0)
			return NULL;
		s->started = 1;
		return done_future(s);
	}
	if (s->complete) {
		py.PyErr_Format(EXC(PyExc_RuntimeError),
				"Unexpected ASGI message '%s' sent, after response already completed.", type);
		return NULL;
	}
	if (strcmp(type, "http.response.body") == 0) {
		int more, wait;
		if (send_body(s, msg, 1, &more, &wait) < 0)
			return NULL;
		if (!more) {
			s->complete = 1;
			feed(s); /* a receive() waiting for the end now gets http.disconnect */
		}
		return wait ? send_waits(s) : done_future(s);
	}
	if (strcmp(type, "http.response.pathsend") == 0) {
		PyObject *path = get(msg, S->k.path);
		Py_ssize_t n = 0;
		const char *u = path ? py.PyUnicode_AsUTF8AndSize(path, &n) : NULL;
		if (!u) {
			py.PyErr_Clear();
			py.PyErr_SetString(EXC(PyExc_TypeError), "asgi: http.response.pathsend needs a str 'path'");
		} else {
			emit(s, M0_C_PATHSEND, 0, u, (size_t)n);
			s->complete = 1;
			feed(s);
		}
		if (path)
			py.Py_DecRef(path);
		return u ? done_future(s) : NULL;
	}
	py.PyErr_Format(EXC(PyExc_RuntimeError), "Expected ASGI message 'http.response.body', but got '%s'.",
			type);
	return NULL;
}

static PyObject *ws_close(aslot *s, PyObject *msg)
{
	astate *S = s->ex->st;
	PyObject *c = get(msg, S->k.code);
	long code = c ? py.PyLong_AsLong(c) : 1000;
	if (c)
		py.Py_DecRef(c);
	if (code < 0) {
		py.PyErr_Clear();
		code = 1000;
	}
	PyObject *r = get(msg, S->k.reason);
	Py_ssize_t n = 0;
	const char *u = r && r != Py_None ? py.PyUnicode_AsUTF8AndSize(r, &n) : "";
	if (!u) {
		py.PyErr_Clear();
		u = "";
		n = 0;
	}
	emit(s, M0_C_WS_CLOSE, (int)code, u, (size_t)n);
	if (r)
		py.Py_DecRef(r);
	s->complete = 1;
	return done_future(s);
}

/* ws_deny handles what the application sends once it answers the
 * handshake with an HTTP response (the WebSocket Denial Response
 * extension): the body, in parts; Go sends the whole response at its end. */
static PyObject *ws_deny(aslot *s, PyObject *msg, const char *type)
{
	if (strcmp(type, "websocket.http.response.body") != 0) {
		py.PyErr_Format(EXC(PyExc_RuntimeError),
				"Expected ASGI message 'websocket.http.response.body', but got '%s'.", type);
		return NULL;
	}
	int more, wait;
	if (send_body(s, msg, 0, &more, &wait) < 0)
		return NULL;
	if (!more) {
		s->complete = 1;
		s->denying = 0;
	}
	return done_future(s);
}

static PyObject *ws_send(aslot *s, PyObject *msg, const char *type)
{
	astate *S = s->ex->st;
	if (s->denying)
		return ws_deny(s, msg, type);
	if (!s->started && !s->complete) {
		if (strcmp(type, "websocket.http.response.start") == 0) {
			if (send_start(s, msg, type) < 0)
				return NULL;
			s->denying = 1;
			return done_future(s);
		}
		if (strcmp(type, "websocket.accept") == 0) {
			m0_buf b = {0};
			PyObject *sp = get(msg, S->k.subprotocol);
			Py_ssize_t n = 0;
			const char *u = sp && sp != Py_None ? py.PyUnicode_AsUTF8AndSize(sp, &n) : "";
			for (Py_ssize_t i = 0; u && i < n; i++)
				if (!is_tchar((unsigned char)u[i])) {
					py.PyErr_Format(EXC(PyExc_RuntimeError), "asgi: invalid subprotocol %R", sp);
					u = NULL;
				}
			PyObject *h = u ? get(msg, S->k.headers) : NULL;
			int rc = u ? 0 : -1;
			if (u && (buf_put_u32(&b, (uint32_t)n) < 0 || buf_put(&b, u, (size_t)n) < 0))
				rc = -1;
			if (rc == 0)
				rc = pack_headers(h, &b);
			if (sp)
				py.Py_DecRef(sp);
			if (h)
				py.Py_DecRef(h);
			if (rc < 0) {
				free(b.p);
				return NULL;
			}
			m0_amsg m = {.kind = M0_C_WS_ACCEPT, .slot = s->idx, .gen = s->gen, .data = b.p, .len = b.len};
			to_go_q(s->ex, m, s->inl);
			s->started = 1;
			return done_future(s);
		}
		if (strcmp(type, "websocket.close") == 0)
			return ws_close(s, msg); /* before the handshake: Go answers 403 */
		py.PyErr_Format(EXC(PyExc_RuntimeError),
				"Expected ASGI message 'websocket.accept', 'websocket.close' or "
				"'websocket.http.response.start', but got '%s'.",
				type);
		return NULL;
	}
	if (s->complete) {
		py.PyErr_Format(EXC(PyExc_RuntimeError),
				"Unexpected ASGI message '%s', after sending 'websocket.close' or a response.", type);
		return NULL;
	}
	if (s->disconnected) {
		PyObject *exc = oserror();
		if (exc) {
			py.PyErr_SetObject(EXC(PyExc_OSError), exc);
			py.Py_DecRef(exc);
		}
		return NULL;
	}
	if (strcmp(type, "websocket.send") == 0) {
		PyObject *t = get(msg, S->k.text);
		int flags = 0;
		const char *p;
		Py_ssize_t n;
		PyObject *keep = NULL;
		if (t && t != Py_None) {
			flags = M0_A_TEXT;
			keep = t;
			p = py.PyUnicode_AsUTF8AndSize(t, &n);
			if (!p) {
				py.Py_DecRef(t);
				return NULL;
			}
		} else {
			if (t)
				py.Py_DecRef(t);
			if (body_of(msg, S->k.bytes, (char **)&p, &n, &keep) < 0) {
				if (keep)
					py.Py_DecRef(keep);
				return NULL;
			}
		}
		/* Backpressure, as for a body: past the high-water mark the send
		 * waits until Go has written what came before. */
		s->inflight += (size_t)n;
		if (s->inflight > HIGH_WATER)
			flags |= M0_A_WAIT;
		emit(s, M0_C_WS_SEND, flags, p, (size_t)n);
		if (keep)
			py.Py_DecRef(keep);
		return (flags & M0_A_WAIT) ? send_waits(s) : done_future(s);
	}
	if (strcmp(type, "websocket.close") == 0)
		return ws_close(s, msg);
	py.PyErr_Format(EXC(PyExc_RuntimeError),
			"Expected ASGI message 'websocket.send' or 'websocket.close', but got '%s'.", type);
	return NULL;
}

static PyObject *asgi_send(PyObject *self, PyObject *msg)
{
	aslot *s = lookup(self);
	if (!s)
		return NULL;
	PyObject *owned;
	const char *type = type_of(s->ex->st, msg, &owned);
	PyObject *r = NULL;
	if (type)
		r = s->ws ? ws_send(s, msg, type) : http_send(s, msg, type);
	if (owned)
		py.Py_DecRef(owned);
	return r;
}

static PyMethodDef receive_defs[2] = {
	{"receive", receive_http, 0x0004 /* METH_NOARGS */, "receive() -> awaitable ASGI message"},
	{"receive", receive_ws, 0x0004 /* METH_NOARGS */, "receive() -> awaitable ASGI message"},
};
static PyMethodDef send_def = {"send", asgi_send, METH_O, "send(message) -> awaitable"};

/* ---- the scope ----------------------------------------------------------------- */

typedef struct {
	const char *p;
	size_t len, i;
	int bad;
} reader;

static uint32_t rd_u32(reader *r)
{
	uint32_t v = 0;
	if (r->i + 4 > r->len) {
		r->bad = 1;
		return 0;
	}
	memcpy(&v, r->p + r->i, 4);
	r->i += 4;
	return v;
}

static const char *rd_str(reader *r, size_t *n)
{
	*n = rd_u32(r);
	if (r->bad || r->i + *n > r->len) {
		r->bad = 1;
		*n = 0;
		return "";
	}
	const char *s = r->p + r->i;
	r->i += *n;
	return s;
}

static PyObject *method_str(astate *S, const char *p, size_t n)
{
	for (int i = 0; i < 7; i++)
		if (strlen(method_names[i]) == n && memcmp(method_names[i], p, n) == 0) {
			py.Py_IncRef(S->methods[i]);
			return S->methods[i];
		}
	return py.PyUnicode_DecodeLatin1(p, (Py_ssize_t)n, NULL);
}

static PyObject *addr(const char *host, size_t n, uint32_t port)
{
	PyObject *t = py.PyTuple_New(2);
	if (!t)
		return NULL;
	PyObject *h = py.PyUnicode_DecodeLatin1(host, (Py_ssize_t)n, NULL);
	PyObject *p = py.PyLong_FromLong((long)port);
	if (!h || !p) {
		if (h)
			py.Py_DecRef(h);
		if (p)
			py.Py_DecRef(p);
		py.Py_DecRef(t);
		return NULL;
	}
	py.PyTuple_SetItem(t, 0, h);
	py.PyTuple_SetItem(t, 1, p);
	return t;
}

/* subprotocols splits the values of Sec-WebSocket-Protocol into the list. */
static int add_subprotocols(PyObject *list, const char *v, size_t n)
{
	size_t i = 0;
	while (i < n) {
		while (i < n && (v[i] == ' ' || v[i] == '\t' || v[i] == ','))
			i++;
		size_t j = i;
		while (j < n && v[j] != ',')
			j++;
		size_t e = j;
		while (e > i && (v[e - 1] == ' ' || v[e - 1] == '\t'))
			e--;
		if (e > i) {
			PyObject *s = py.PyUnicode_DecodeLatin1(v + i, (Py_ssize_t)(e - i), NULL);
			int rc = s ? py.PyList_Append(list, s) : -1;
			if (s)
				py.Py_DecRef(s);
			if (rc < 0)
				return -1;
		}
		i = j;
	}
	return 0;
}

/* build_scope makes the scope from Go's packed request: [u32 flags][u32
 * client port][u32 server port][u32 header count], then length-prefixed
 * method, path (decoded), raw path, query, client host, server host, root
 * path, the headers as name/value pairs (names lowercased by Go), and the
 * first body chunk, which *body points into. */
static PyObject *build_scope(aexec *ex, int ws, const char *p, size_t len, const char **body, size_t *bodylen,
			     int *head)
{
	astate *S = ex->st;
	reader r = {.p = p, .len = len};
	uint32_t flags = rd_u32(&r), cport = rd_u32(&r), sport = rd_u32(&r), nh = rd_u32(&r);
	size_t ml, pl, rl, ql, chl, shl, rpl;
	const char *m = rd_str(&r, &ml), *path = rd_str(&r, &pl), *raw = rd_str(&r, &rl),
		   *q = rd_str(&r, &ql), *ch = rd_str(&r, &chl), *sh = rd_str(&r, &shl),
		   *rp = rd_str(&r, &rpl);
	if (r.bad) {
		py.PyErr_SetString(EXC(PyExc_RuntimeError), "asgi: malformed request buffer");
		return NULL;
	}
	*head = ml == 4 && memcmp(m, "HEAD", 4) == 0;
	PyObject *d = py.PyDict_New();
	if (!d)
		return NULL;
	PyObject *hl = py.PyList_New((Py_ssize_t)nh);
	PyObject *subs = ws ? py.PyList_New(0) : NULL;
	int rc = hl && (!ws || subs) ? 0 : -1;
	for (uint32_t i = 0; rc == 0 && i < nh; i++) {
		size_t nl, vl;
		const char *n = rd_str(&r, &nl), *v = rd_str(&r, &vl);
		if (r.bad) {
			py.PyErr_SetString(EXC(PyExc_RuntimeError), "asgi: malformed request buffer");
			rc = -1;
			break;
		}
		if (ws && nl == 22 && memcmp(n, "sec-websocket-protocol", 22) == 0 &&
		    add_subprotocols(subs, v, vl) < 0) {
			rc = -1;
			break;
		}
		PyObject *t = py.PyTuple_New(2);
		PyObject *nb = py.PyBytes_FromStringAndSize(n, (Py_ssize_t)nl);
		PyObject *vb = py.PyBytes_FromStringAndSize(v, (Py_ssize_t)vl);
		if (!t || !nb || !vb) {
			if (t)
				py.Py_DecRef(t);
			if (nb)
				py.Py_DecRef(nb);
			if (vb)
				py.Py_DecRef(vb);
			rc = -1;
			break;
		}
		py.PyTuple_SetItem(t, 0, nb);
		py.PyTuple_SetItem(t, 1, vb);
		py.PyList_SetItem(hl, (Py_ssize_t)i, t);
	}
	if (rc == 0) {
		*body = rd_str(&r, bodylen);
		if (r.bad) {
			py.PyErr_SetString(EXC(PyExc_RuntimeError), "asgi: malformed request buffer");
			rc = -1;
		}
	}
	if (rc == 0)
		rc = py.PyDict_SetItem(d, S->k.type, ws ? S->v_websocket : S->v_http);
	if (rc == 0)
		rc = py.PyDict_SetItem(d, S->k.asgi, ws ? S->a_asgi_ws : S->a_asgi);
	if (rc == 0)
		rc = py.PyDict_SetItem(d, S->k.http_version, (flags & M0_S_HTTP11) ? S->v_11 : S->v_10);
	if (rc == 0 && !ws)
		rc = set_steal(d, S->k.method, method_str(S, m, ml));
	if (rc == 0)
		rc = py.PyDict_SetItem(d, S->k.scheme, ws ? S->v_ws : S->v_http);
	if (rc == 0)
		rc = set_steal(d, S->k.path, py.PyUnicode_DecodeUTF8(path, (Py_ssize_t)pl, "replace"));
	if (rc == 0)
		rc = set_steal(d, S->k.raw_path, py.PyBytes_FromStringAndSize(raw, (Py_ssize_t)rl));
	if (rc == 0)
		rc = set_steal(d, S->k.query_string, py.PyBytes_FromStringAndSize(q, (Py_ssize_t)ql));
	if (rc == 0)
		rc = set_steal(d, S->k.root_path, py.PyUnicode_DecodeUTF8(rp, (Py_ssize_t)rpl, "replace"));
	if (rc == 0)
		rc = py.PyDict_SetItem(d, S->k.headers, hl);
	if (rc == 0)
		rc = chl ? set_steal(d, S->k.client, addr(ch, chl, cport)) : py.PyDict_SetItem(d, S->k.client, Py_None);
	if (rc == 0)
		rc = set_steal(d, S->k.server, addr(sh, shl, sport));
	if (rc == 0 && ws)
		rc = py.PyDict_SetItem(d, S->k.subprotocols, subs);
	if (rc == 0)
		rc = set_steal(d, S->k.state, py.PyDict_Copy(ex->state));
	if (rc == 0)
		rc = py.PyDict_SetItem(d, S->k.extensions, ws ? S->a_extensions_ws : S->a_extensions);
	if (hl)
		py.Py_DecRef(hl);
	if (subs)
		py.Py_DecRef(subs);
	if (rc < 0) {
		py.Py_DecRef(d);
		return NULL;
	}
	return d;
}

/* ---- the application's task ------------------------------------------------------- */

static void buf_puts(m0_buf *b, const char *s)
{
	buf_put(b, s, strlen(s));
}

/* fail_text formats the pending exception, or msg, for Go's log line. */
static void error_text(m0_buf *b, const char *msg)
{
	if (py.PyErr_Occurred()) {
		m0_thread scratch = {0}; /* capture_error uses its err alone */
		capture_error(&scratch);
		buf_put(b, scratch.err.p, scratch.err.len);
		free(scratch.err.p);
	} else {
		buf_put(b, msg, strlen(msg));
	}
}

/* finish ends a request whose task is over: Go hears whether the response
 * was whole, with the error if not, and the slot is freed. */
static void finish(aslot *s, m0_buf *err)
{
	int failed = err->len > 0;
	if (!failed && !s->ws && !s->started)
		buf_puts(err, "ASGI callable returned without starting response."), failed = 1;
	else if (!failed && !s->ws && !s->complete)
		buf_puts(err, "ASGI callable returned without completing response."), failed = 1;
	else if (!failed && s->ws && !s->started && !s->complete)
		buf_puts(err, "ASGI callable returned without sending handshake."), failed = 1;
	int flags = failed ? M0_DONE_FAILED : 0;
	if (s->disconnected || s->draining)
		flags |= M0_DONE_QUIET; /* the client left, or the server drains: not the application's fault */
	emit(s, M0_C_DONE, flags, err->p, err->len);
	wake_waiters(s); /* tasks left waiting in receive(): the disconnect */
	slot_clear(s);
	free(err->p);
}

/* task_over reads how the task ended and finishes the request. */
static void task_over(aslot *s, PyObject *task)
{
	astate *S = s->ex->st;
	m0_buf err = {0};
	PyObject *c = py.PyObject_CallMethodObjArgs(task, S->k.cancelled, NULL);
	int cancelled = c ? py.PyObject_IsTrue(c) : 0;
	if (c)
		py.Py_DecRef(c);
	py.PyErr_Clear();
	if (cancelled) {
		if (!s->complete && !s->disconnected)
			buf_puts(&err, "asyncio.CancelledError: the application's task was cancelled");
	} else {
		PyObject *exc = py.PyObject_CallMethodObjArgs(task, S->k.exception, NULL);
		if (exc && exc != Py_None) {
			PyObject *tp = py.PyObject_Type(exc);
			PyObject *tb = py.PyObject_GetAttrString(exc, "__traceback__");
			PyObject *txt = tp && tb ? py.PyObject_CallFunctionObjArgs(S->format_exc, tp, exc, tb, NULL)
						 : NULL;
			Py_ssize_t n = 0;
			const char *u = txt ? py.PyUnicode_AsUTF8AndSize(txt, &n) : NULL;
			if (u)
				buf_put(&err, u, (size_t)n);
			else
				buf_puts(&err, "an exception that cannot be formatted");
			py.PyErr_Clear();
			if (txt)
				py.Py_DecRef(txt);
			if (tb)
				py.Py_DecRef(tb);
			if (tp)
				py.Py_DecRef(tp);
		} else if (!exc) {
			error_text(&err, "asgi: the task's outcome cannot be read");
		}
		if (exc)
			py.Py_DecRef(exc);
	}
	finish(s, &err);
}

static PyObject *asgi_task_done(PyObject *self, PyObject *task)
{
	aslot *s = by_handle(self);
	if (s)
		task_over(s, task);
	py.Py_IncRef(Py_None);
	return Py_None;
}

static PyMethodDef task_done_def = {"_task_done", asgi_task_done, METH_O, NULL};

/* start runs a new request: its scope, its receive and send, and the
 * application's coroutine as a task. */
static void start(aexec *ex, m0_amsg *m)
{
	astate *S = ex->st;
	aslot *s = slot_at(ex, m->slot);
	if (!s) {
		m0_amsg d = {.kind = M0_C_DONE, .slot = m->slot, .gen = m->gen, .flags = M0_DONE_FAILED};
		to_go_q(ex, d, ex->start_inl);
		return;
	}
	if (s->live) /* Go reuses a slot only after its task is over */
		slot_clear(s);
	s->gen = m->gen;
	s->live = 1;
	ex->nlive++;
	s->inl = ex->start_inl;
	s->ws = m->kind == M0_A_WS;
	s->draining = ex->drain && !s->ws; /* it came in after the drain began */
	m0_buf err = {0};
	const char *body = NULL;
	size_t bodylen = 0;
	PyObject *h = NULL, *recv = NULL, *send = NULL, *coro = NULL, *task = NULL;
	PyObject *scope = build_scope(ex, s->ws, m->data, m->len, &body, &bodylen, &s->head);
	if (!scope)
		goto fail;
	if (!s->ws) {
		s->body_more = (m->flags & M0_A_MORE) != 0;
		if (bodylen || !s->body_more) {
			m0_amsg b = {.flags = m->flags & M0_A_MORE, .len = bodylen};
			if (bodylen) {
				b.data = malloc(bodylen);
				if (b.data)
					memcpy(b.data, body, bodylen);
				else
					b.len = 0;
			}
			inbox_push(&s->in, b);
		}
	}
	h = handle(s);
	recv = h ? py.PyCFunction_NewEx(&receive_defs[s->ws], h, S->module) : NULL;
	send = recv ? py.PyCFunction_NewEx(&send_def, h, S->module) : NULL;
	coro = send ? py.PyObject_CallFunctionObjArgs(ex->app, scope, recv, send, NULL) : NULL;
	if (!coro)
		goto fail;
	if (ex->task_kw) {
		PyObject *args = py.PyTuple_New(1);
		if (!args)
			goto fail;
		py.Py_IncRef(coro);
		py.PyTuple_SetItem(args, 0, coro);
		task = py.PyObject_Call(ex->create_task, args, ex->task_kw);
		py.Py_DecRef(args);
	} else {
		task = py.PyObject_CallFunctionObjArgs(ex->create_task, coro, NULL);
	}
	ex->start_alone = 0; /* its step is over: the rest is the caller's to take */
	if (!task)
		goto fail;
	/* An eager task that never waited is over already: finish it in this
	 * iteration rather than the next. */
	PyObject *d = py.PyObject_CallMethodObjArgs(task, S->k.done, NULL);
	int over = d ? py.PyObject_IsTrue(d) : -1;
	if (d)
		py.Py_DecRef(d);
	if (over < 0)
		goto fail;
	if (over) {
		task_over(s, task);
	} else {
		py.Py_IncRef(task);
		s->task = task;
		PyObject *cb = py.PyCFunction_NewEx(&task_done_def, h, S->module);
		PyObject *r = cb ? py.PyObject_CallMethodObjArgs(task, S->k.add_done_callback, cb, NULL) : NULL;
		if (cb)
			py.Py_DecRef(cb);
		if (!r)
			goto fail; /* cannot happen short of memory; the task runs unobserved */
		py.Py_DecRef(r);
	}
	goto out;
fail:
	error_text(&err, "asgi: the request could not start");
	finish(s, &err);
out:
	py.PyErr_Clear();
	if (task)
		py.Py_DecRef(task);
	if (coro)
		py.Py_DecRef(coro);
	if (send)
		py.Py_DecRef(send);
	if (recv)
		py.Py_DecRef(recv);
	if (h)
		py.Py_DecRef(h);
	if (scope)
		py.Py_DecRef(scope);
}

/* live_slot returns the request an event names, or NULL if it is over. */
static aslot *live_slot(aexec *ex, m0_amsg *m)
{
	if (m->slot < ex->nslots && ex->slots[m->slot].live && ex->slots[m->slot].gen == m->gen)
		return &ex->slots[m->slot];
	return NULL;
}

static void disconnect(aslot *s, int code, const char *reason, size_t n)
{
	astate *S = s->ex->st;
	if (s->disconnected)
		return;
	s->disconnected = 1;
	s->dcode = code;
	if (n) {
		s->dreason = py.PyUnicode_DecodeUTF8(reason, (Py_ssize_t)n, "replace");
		py.PyErr_Clear();
	}
	feed(s);
	py.Py_IncRef(Py_None);
	settle(S, &s->send_fut, Py_None); /* a waiting send returns; later ones are dropped */
}

static void rare_event(aexec *ex, int kind, int flags)
{
	PyObject *a = py.PyLong_FromLong(kind), *b = py.PyLong_FromLong(flags);
	PyObject *r = a && b ? py.PyObject_CallFunctionObjArgs(ex->event, a, b, NULL) : NULL;
	if (r)
		py.Py_DecRef(r);
	py.PyErr_Clear(); /* _asgi_event reports its own failures */
	if (a)
		py.Py_DecRef(a);
	if (b)
		py.Py_DecRef(b);
}

/* stash keeps v[from:n] for asgi_resume, in order after what it holds;
 * their data is the stash's now. 0, or -1 out of memory (nothing kept). */
static int stash(aexec *ex, m0_amsg *v, size_t from, size_t n)
{
	size_t k = n - from;
	if (!ex->resume_due) { /* first, so that nothing waits for a turn that will not come */
		PyObject *r = py.PyObject_CallFunctionObjArgs(ex->call_soon, ex->resume, NULL);
		if (!r) {
			py.PyErr_Clear(); /* the loop is closing, or out of memory */
			return -1;
		}
		py.Py_DecRef(r);
		ex->resume_due = 1;
	}
	if (ex->nlater + k > ex->caplater) {
		size_t c = ex->caplater ? ex->caplater : 64;
		while (c < ex->nlater + k)
			c *= 2;
		m0_amsg *l = realloc(ex->later, c * sizeof *l);
		if (!l)
			return -1;
		ex->later = l, ex->caplater = c;
	}
	memcpy(ex->later + ex->nlater, v + from, k * sizeof *v);
	ex->nlater += k;
	for (size_t i = from; i < n; i++)
		v[i].data = NULL;
	return 0;
}

/* take_later takes what the stash holds (*n messages), leaving it empty. */
static m0_amsg *take_later(aexec *ex, size_t *n)
{
	m0_amsg *v = ex->later;
	*n = ex->nlater;
	ex->later = NULL, ex->nlater = ex->caplater = 0;
	return v;
}

static void drain_msgs(aexec *ex, m0_amsg *v, size_t n, int bound);

/* drain_batch handles messages Go posted, in order, and frees them:
 * behind what waits from an earlier batch, if anything does (handled
 * first, unbounded, when it cannot wait: out of memory, or no turn to
 * come). The loop's thread, with the GIL. */
static void drain_batch(aexec *ex, m0_amsg *v, size_t n)
{
	int lazy = !ex->task_kw;
	if (ex->nlater) {
		if (stash(ex, v, 0, n) == 0) {
			m0_asgi_free(v, 0);
			return;
		}
		size_t k;
		m0_amsg *w = take_later(ex, &k);
		drain_msgs(ex, w, k, 0);
	}
	drain_msgs(ex, v, n, lazy);
}

/* drain_msgs handles v in order; bound: M0_LAZY_STARTS starts at most, the
 * rest stashed for asgi_resume. It frees v. */
static void drain_msgs(aexec *ex, m0_amsg *v, size_t n, int bound)
{
	astate *S = ex->st;
	size_t started = 0;
	for (size_t i = 0; i < n; i++) {
		m0_amsg *m = &v[i];
		aslot *s;
		switch (m->kind) {
		case M0_A_HTTP:
		case M0_A_WS:
			if (bound && started == M0_LAZY_STARTS && stash(ex, v, i, n) == 0) {
				n = i; /* ends the loop; the rest waits a turn */
				continue;
			}
			started++;
			start(ex, m);
			break;
		case M0_A_BODY:
		case M0_A_WSMSG:
			if ((s = live_slot(ex, m))) {
				s->want_sent = 0;
				s->body_more = (m->flags & M0_A_MORE) != 0;
				inbox_push(&s->in, *m);
				m->data = NULL; /* the inbox owns it */
				feed(s);
			}
			break;
		case M0_A_DISCONNECT:
			if ((s = live_slot(ex, m)))
				disconnect(s, m->flags, m->data, m->len);
			break;
		case M0_A_RESUME:
			if ((s = live_slot(ex, m))) {
				s->inflight = 0;
				py.Py_IncRef(Py_None);
				settle(S, &s->send_fut, Py_None);
			}
			break;
		case M0_A_CONN:
			if (ex->inline_fe)
				inline_call(ex, M0_I_ADOPT, m->flags);
			break;
		case M0_A_DRAIN:
			/* receive() says the client left, so a stream that listens for
			 * it ends; what requests send still goes out. */
			ex->drain = 1;
			for (size_t j = 0; j < ex->nslots; j++) {
				aslot *d = &ex->slots[j];
				if (!d->live)
					continue;
				if (d->ws) {
					disconnect(d, 1001, NULL, 0);
				} else {
					d->draining = 1;
					feed(d);
				}
			}
			break;
		default:
			if (m->kind == M0_A_STOP)
				ex->stopped = 1; /* Go posts nothing after it */
			rare_event(ex, m->kind, m->flags);
		}
	}
	m0_asgi_free(v, n);
}

/* asgi_drain is the loop's reader callback on Go's eventfd: it handles every
 * event Go posted to executor self (its id) since the last wake-up: the
 * inbound ring's, then, when some went behind it, the ring's again and the
 * queue's (m0py.h, "The rings"). Out of memory, what is left waits for
 * another wake-up, which it claims. */
static PyObject *asgi_drain(PyObject *self, PyObject *id)
{
	aexec *ex = exec_here((int)py.PyLong_AsLong(id));
	if (!ex) {
		py.PyErr_Clear();
		py.PyErr_SetString(EXC(PyExc_RuntimeError), "asgi: no such executor");
		return NULL;
	}
	char buf[64]; /* an eventfd's count, or a pipe's wake-ups */
	while (read(ex->in.fd, buf, sizeof buf) < 0 && errno == EINTR)
		;
	m0_ring *r = &ex->in.ring;
	__atomic_store_n(&r->signaled, 0, __ATOMIC_SEQ_CST);
	ex->draining_in = 1;
	m0_amsg *v = NULL;
	size_t n = 0, cap = 0;
	int rc = ring_take(r, &v, &n, &cap);
	drain_batch(ex, v, n);
	if (rc == 0 && __atomic_load_n(&r->overflow, __ATOMIC_SEQ_CST)) {
		v = NULL;
		n = cap = 0;
		rc = ring_take(r, &v, &n, &cap);
		drain_batch(ex, v, n);
		if (rc == 0) {
			n = take(&ex->in, &v);
			drain_batch(ex, v, n);
		}
	}
	if (rc < 0) {
		__atomic_store_n(&r->signaled, 1, __ATOMIC_SEQ_CST);
		wake(ex->in.wfd);
	}
	ex->draining_in = 0;
	pay(ex);
	py.PyErr_Clear();
	py.Py_IncRef(Py_None);
	return Py_None;
}

/* asgi_flush is the callback defer_wake schedules: it wakes Go for the
 * messages of the turn, unless asgi_drain's end has done it. self is the
 * executor's id. The loop's thread, with the GIL. */
static PyObject *asgi_flush(PyObject *self, PyObject *unused)
{
	aexec *ex = exec_of((int)py.PyLong_AsLong(self));
	if (ex) {
		ex->flush_due = 0;
		pay(ex);
	}
	py.PyErr_Clear();
	py.Py_IncRef(Py_None);
	return Py_None;
}

static PyMethodDef flush_def = {"_asgi_flush", asgi_flush, METH_NOARGS, NULL};

/* asgi_resume is the callback drain_batch schedules for the rest of a
 * batch (M0_LAZY_STARTS): it handles what waits as asgi_drain would, a turn
 * after the requests started before it. self is the executor's id. The
 * loop's thread, with the GIL. */
static PyObject *asgi_resume(PyObject *self, PyObject *unused)
{
	aexec *ex = exec_of((int)py.PyLong_AsLong(self));
	if (ex && !ex->stopped) {
		ex->resume_due = 0;
		size_t n;
		m0_amsg *v = take_later(ex, &n);
		ex->draining_in = 1;
		drain_msgs(ex, v, n, 1);
		ex->draining_in = 0;
		pay(ex);
	}
	py.PyErr_Clear();
	py.Py_IncRef(Py_None);
	return Py_None;
}

static PyMethodDef resume_def = {"_asgi_resume", asgi_resume, METH_NOARGS, NULL};

/* ---- the inline front end (M0_INVERTED) -------------------------------------- */

/* inline_call calls the inline front end (go_asgi_inline) for op on fd.
 * Go calls Python back (add_reader, call_soon) and clears what it raises,
 * so an exception being handled here is kept aside and restored. A call
 * that comes while Go is inside one (a message the application sends from
 * code Go's call ran) is not made again: the message is owed, and Go takes
 * what is owed before the outer call returns. The loop's thread, with the
 * GIL. */
static void inline_call(aexec *ex, int op, int fd)
{
	/* Inside a call into Go, Go is called again only to take the answer
	 * the eager step of a batch's last request sent while alone (the
	 * batch is done with its own state by then). */
	int nested = ex->in_go;
	if (nested && !(ex->start_alone && op == M0_I_ANSWERS)) {
		owe_in(ex);
		return;
	}
	PyObject *t, *v, *tb;
	py.PyErr_Fetch(&t, &v, &tb);
	int alone = ex->start_alone;
	ex->start_alone = 0; /* one level: what the nested call sends is owed */
	ex->in_go = 1;
	go_asgi_inline(ex->id, op, fd);
	while (ex->owe_inline) {
		ex->owe_inline = 0;
		go_asgi_inline(ex->id, M0_I_ANSWERS, -1);
	}
	ex->in_go = nested;
	ex->start_alone = alone;
	py.PyErr_Restore(t, v, tb);
}

void m0_asgi_inline(int id)
{
	aexec *ex = exec_of(id);
	if (ex)
		ex->inline_fe = 1;
}

void m0_asgi_start_now(int id, int kind, uint32_t slot, uint32_t gen, int flags, const char *data, size_t len,
			int last)
{
	aexec *ex = exec_of(id);
	if (!ex)
		return;
	m0_amsg m = {.kind = kind, .slot = slot, .gen = gen, .flags = flags, .data = (char *)data, .len = len};
	/* What it sends is owed, and taken by the caller; but the last of a
	 * batch, alone, has its answer written as it is sent, as a later
	 * step's would be (to_go_q). */
	ex->draining_in = !last;
	ex->start_alone = last;
	ex->start_inl = 1;
	start(ex, &m);
	ex->start_inl = 0;
	ex->start_alone = 0;
	ex->draining_in = 0;
}

size_t m0_asgi_take_now(int id, m0_amsg **out)
{
	aexec *ex = exec_of(id);
	if (!ex) {
		*out = NULL;
		return 0;
	}
	ex->owe_inline = 0;
	return take(&ex->iq, out);
}

/* _asgi_io(op, fd), bound to an executor's id: the loop's callback for a
 * watched descriptor and for the end of a turn. */
static PyObject *asgi_io(PyObject *self, PyObject *args)
{
	int op, fd;
	if (!py.PyArg_ParseTuple(args, "ii", &op, &fd))
		return NULL;
	aexec *ex = exec_of((int)py.PyLong_AsLong(self));
	if (ex)
		inline_call(ex, op, fd);
	py.Py_IncRef(Py_None);
	return Py_None;
}

static PyMethodDef io_def = {"_asgi_io", asgi_io, METH_VARARGS, NULL};

/* inline_fns makes ex's two callbacks, once. */
static int inline_fns(aexec *ex)
{
	astate *S = ex->st;
	if (ex->inline_io)
		return 0;
	PyObject *id = py.PyLong_FromLong(ex->id);
	PyObject *io = id ? py.PyCFunction_NewEx(&io_def, id, S->module) : NULL;
	if (id)
		py.Py_DecRef(id);
	if (!io)
		return -1;
	PyObject *op = py.PyLong_FromLong(M0_I_BATCH), *none = py.PyLong_FromLong(-1);
	PyObject *partial = NULL, *functools = py.PyImport_ImportModule("functools");
	if (functools && op && none) {
		PyObject *p = py.PyObject_GetAttrString(functools, "partial");
		if (p) {
			partial = py.PyObject_CallFunctionObjArgs(p, io, op, none, NULL);
			py.Py_DecRef(p);
		}
	}
	if (functools)
		py.Py_DecRef(functools);
	if (op)
		py.Py_DecRef(op);
	if (none)
		py.Py_DecRef(none);
	if (!partial) {
		py.Py_DecRef(io);
		return -1;
	}
	ex->inline_io = io;
	ex->inline_end = partial;
	return 0;
}

/* call_loop calls the loop's method name with args (NULL-ended). */
static int call_loop(aexec *ex, const char *name, ...)
{
	PyObject *m = py.PyObject_GetAttrString(ex->loop, name);
	if (!m) {
		py.PyErr_Clear();
		return -1;
	}
	PyObject *a[4] = {NULL, NULL, NULL, NULL};
	va_list ap;
	va_start(ap, name);
	for (int i = 0; i < 4 && (a[i] = va_arg(ap, PyObject *)); i++)
		;
	va_end(ap);
	PyObject *r = py.PyObject_CallFunctionObjArgs(m, a[0], a[1], a[2], a[3], NULL);
	py.Py_DecRef(m);
	if (!r) {
		py.PyErr_Clear();
		return -1;
	}
	py.Py_DecRef(r);
	return 0;
}

int m0_asgi_watch(int id, int fd, int what)
{
	aexec *ex = exec_of(id);
	if (!ex || !ex->loop || inline_fns(ex) < 0) {
		py.PyErr_Clear();
		return -1;
	}
	PyObject *f = py.PyLong_FromLong(fd);
	PyObject *rd = py.PyLong_FromLong(M0_I_READ), *wr = py.PyLong_FromLong(M0_I_WRITE);
	int rc = -1;
	if (f && rd && wr) {
		/* remove_* of a descriptor not watched is a no-op. */
		rc = (what & M0_W_READ) ? call_loop(ex, "add_reader", f, ex->inline_io, rd, f, NULL)
					: call_loop(ex, "remove_reader", f, NULL);
		if (rc == 0)
			rc = (what & M0_W_WRITE) ? call_loop(ex, "add_writer", f, ex->inline_io, wr, f, NULL)
						 : call_loop(ex, "remove_writer", f, NULL);
	}
	if (f)
		py.Py_DecRef(f);
	if (rd)
		py.Py_DecRef(rd);
	if (wr)
		py.Py_DecRef(wr);
	py.PyErr_Clear();
	return rc;
}

int m0_asgi_later(int id)
{
	aexec *ex = exec_of(id);
	if (!ex || !ex->call_soon || inline_fns(ex) < 0) {
		py.PyErr_Clear();
		return -1;
	}
	PyObject *r = py.PyObject_CallFunctionObjArgs(ex->call_soon, ex->inline_end, NULL);
	if (!r) {
		py.PyErr_Clear();
		return -1;
	}
	py.Py_DecRef(r);
	return 0;
}

/* ---- set-up --------------------------------------------------------------------- */

/* intern makes the interned keys and values and the shared scope dicts of
 * the interpreter is, in S, once: they are the same for every executor
 * there. That interpreter's GIL is held. */
static int intern(astate *S, m0_interp *is)
{
	if (S->made)
		return 0;
	S->module = is->module, S->format_exc = is->format_exc;
#define X(n) S->k.n = py.PyUnicode_InternFromString(#n);
	K(X)
#undef X
	S->v_http = py.PyUnicode_InternFromString("http");
	S->v_websocket = py.PyUnicode_InternFromString("websocket");
	S->v_ws = py.PyUnicode_InternFromString("ws");
	S->v_11 = py.PyUnicode_InternFromString("1.1");
	S->v_10 = py.PyUnicode_InternFromString("1.0");
	S->v_request = py.PyUnicode_InternFromString("http.request");
	S->v_disconnect = py.PyUnicode_InternFromString("http.disconnect");
	S->v_connect = py.PyUnicode_InternFromString("websocket.connect");
	S->v_wsreceive = py.PyUnicode_InternFromString("websocket.receive");
	S->v_wsdisconnect = py.PyUnicode_InternFromString("websocket.disconnect");
	for (int i = 0; i < 7; i++)
		S->methods[i] = py.PyUnicode_InternFromString(method_names[i]);
	if (py.PyErr_Occurred())
		return -1;
	S->a_receive_later = py.PyDict_GetItemString(is->dict, "_receive_later");
	if (!S->a_receive_later) {
		py.PyErr_SetString(EXC(PyExc_RuntimeError), "bootstrap did not define _receive_later");
		return -1;
	}
	py.Py_IncRef(S->a_receive_later);
	/* The spec versions each scope implements: HTTP 2.3 (a send after the
	 * client left is dropped, as uvicorn drops it, where 2.4 raises);
	 * WebSocket 2.5 (headers on accept, the reason on close and on
	 * disconnect, and a send after a disconnect raises). */
	S->a_asgi = py.PyDict_New();
	S->a_asgi_ws = py.PyDict_New();
	S->a_extensions = py.PyDict_New();
	S->a_extensions_ws = py.PyDict_New();
	PyObject *ps = py.PyDict_New(), *deny = py.PyDict_New();
	int rc = S->a_asgi && S->a_asgi_ws && S->a_extensions && S->a_extensions_ws && ps && deny &&
			 set_steal(S->a_asgi, S->k.version, py.PyUnicode_FromString("3.0")) == 0 &&
			 set_steal(S->a_asgi, S->k.spec_version, py.PyUnicode_FromString("2.3")) == 0 &&
			 set_steal(S->a_asgi_ws, S->k.version, py.PyUnicode_FromString("3.0")) == 0 &&
			 set_steal(S->a_asgi_ws, S->k.spec_version, py.PyUnicode_FromString("2.5")) == 0 &&
			 py.PyDict_SetItemString(S->a_extensions, "http.response.pathsend", ps) == 0 &&
			 py.PyDict_SetItemString(S->a_extensions_ws, "websocket.http.response", deny) == 0
		     ? 0
		     : -1;
	if (ps)
		py.Py_DecRef(ps);
	if (deny)
		py.Py_DecRef(deny);
	S->made = rc == 0;
	return rc;
}

/* _m0.asgi_setup(id, loop, app, state, eager, event) readies executor id
 * to run app on loop; event(kind, flags) handles the rare events. */
static PyObject *asgi_setup(PyObject *self, PyObject *args)
{
	PyObject *loop, *app, *state, *event;
	int id, eager;
	if (!py.PyArg_ParseTuple(args, "iOOOpO", &id, &loop, &app, &state, &eager, &event))
		return NULL;
	aexec *ex = exec_here(id);
	if (!ex) {
		py.PyErr_SetString(EXC(PyExc_RuntimeError), "asgi: no such executor");
		return NULL;
	}
	astate *S = ex->st;
	if (intern(S, &m0_interps[S - astates]) < 0)
		return NULL;
	ex->loop = loop, ex->app = app, ex->state = state, ex->event = event;
	py.Py_IncRef(loop), py.Py_IncRef(app), py.Py_IncRef(state), py.Py_IncRef(event);
	ex->create_future = py.PyObject_GetAttrString(loop, "create_future");
	if (!ex->create_future)
		return NULL;
	ex->call_soon = py.PyObject_GetAttrString(loop, "call_soon");
	PyObject *idobj = ex->call_soon ? py.PyLong_FromLong(id) : NULL;
	ex->flush = idobj ? py.PyCFunction_NewEx(&flush_def, idobj, S->module) : NULL;
	ex->resume = ex->flush ? py.PyCFunction_NewEx(&resume_def, idobj, S->module) : NULL;
	if (idobj)
		py.Py_DecRef(idobj);
	if (!ex->resume)
		return NULL;
	if (eager) {
		PyObject *asyncio = py.PyImport_ImportModule("asyncio");
		ex->create_task = asyncio ? py.PyObject_GetAttrString(asyncio, "Task") : NULL;
		if (asyncio)
			py.Py_DecRef(asyncio);
		ex->task_kw = py.PyDict_New();
		if (!ex->create_task || !ex->task_kw || py.PyDict_SetItemString(ex->task_kw, "loop", loop) < 0 ||
		    set_steal(ex->task_kw, S->k.eager_start, py.PyBool_FromLong(1)) < 0)
			return NULL;
	} else {
		ex->create_task = py.PyObject_GetAttrString(loop, "create_task");
		if (!ex->create_task)
			return NULL;
	}
	ex->done = new_future(ex);
	PyObject *r = ex->done ? py.PyObject_CallMethodObjArgs(ex->done, S->k.set_result, Py_None, NULL) : NULL;
	if (!r)
		return NULL;
	py.Py_DecRef(r);
	py.Py_IncRef(Py_None);
	return Py_None;
}

/* _m0.asgi_notify(id, kind, flags, text): a message to Go from executor id
 * that no request owns. */
static PyObject *asgi_notify(PyObject *self, PyObject *args)
{
	int id, kind, flags;
	PyObject *s;
	Py_ssize_t n;
	if (!py.PyArg_ParseTuple(args, "iiiO", &id, &kind, &flags, &s))
		return NULL;
	aexec *ex = exec_here(id);
	const char *text = ex ? py.PyUnicode_AsUTF8AndSize(s, &n) : NULL;
	if (!text) {
		if (!py.PyErr_Occurred())
			py.PyErr_SetString(EXC(PyExc_RuntimeError), "asgi: no such executor");
		return NULL;
	}
	notify(ex, kind, flags, text, (size_t)n);
	py.Py_IncRef(Py_None);
	return Py_None;
}

/* _m0.asgi_teardown(id): executor id lets go of its loop's references once
 * the loop has stopped. */
static PyObject *asgi_teardown(PyObject *self, PyObject *id)
{
	aexec *ex = exec_here((int)py.PyLong_AsLong(id));
	if (!ex) {
		py.PyErr_Clear();
		py.Py_IncRef(Py_None);
		return Py_None;
	}
	for (size_t j = 0; j < ex->nslots; j++)
		if (ex->slots[j].live)
			slot_clear(&ex->slots[j]);
	size_t nlater;
	m0_amsg *later = take_later(ex, &nlater);
	m0_asgi_free(later, nlater); /* what a stopped loop never resumed */
	ex->resume_due = 0;
	PyObject **refs[] = {&ex->loop, &ex->app, &ex->state, &ex->event, &ex->create_future, &ex->create_task,
			     &ex->task_kw, &ex->done, &ex->call_soon, &ex->flush, &ex->resume, &ex->inline_io,
			     &ex->inline_end};
	for (size_t i = 0; i < sizeof refs / sizeof refs[0]; i++)
		if (*refs[i]) {
			py.Py_DecRef(*refs[i]);
			*refs[i] = NULL;
		}
	py.Py_IncRef(Py_None);
	return Py_None;
}

PyMethodDef m0_asgi_methods[] = {
	{"asgi_drain", asgi_drain, METH_O, "asgi_drain(id): handle Go's pending events for executor id."},
	{"asgi_setup", asgi_setup, METH_VARARGS, NULL},
	{"asgi_notify", asgi_notify, METH_VARARGS, NULL},
	{"asgi_teardown", asgi_teardown, METH_O, NULL},
	{NULL, NULL, 0, NULL},
};

int m0_asgi_run(m0_thread *t, int id, uintptr_t app, const char *opts)
{
	aexec *ex = exec_of(id);
	if (!ex)
		return -1;
	ex->st = &astates[t->interp];
	m0_attach(t->ts);
	int rc = 0;
	PyObject *fn = py.PyDict_GetItemString(m0_interps[t->interp].dict, "_asgi_run");
	PyObject *i = py.PyLong_FromLong(id);
	PyObject *fd = py.PyLong_FromLong(ex->in.fd);
	PyObject *o = py.PyUnicode_FromString(opts);
	PyObject *r = fn && i && fd && o ? py.PyObject_CallFunctionObjArgs(fn, i, (PyObject *)app, fd, o, NULL) : NULL;
	if (!r) {
		capture_error(t);
		rc = -1;
	} else {
		py.Py_DecRef(r);
	}
	if (i)
		py.Py_DecRef(i);
	if (fd)
		py.Py_DecRef(fd);
	if (o)
		py.Py_DecRef(o);
	t->ts = py.PyEval_SaveThread();
	return rc;
}

/* ---- the rings, for tests ------------------------------------------------------ */

m0_ring *m0_ring_new(size_t cap)
{
	m0_ring *r = calloc(1, sizeof *r);
	if (r && ring_init(r, cap) < 0) {
		free(r);
		r = NULL;
	}
	return r;
}

void m0_ring_free(m0_ring *r)
{
	if (r) {
		free(r->buf);
		free(r);
	}
}

int m0_ring_put(m0_ring *r, int kind, uint32_t slot, uint32_t gen, int flags, const char *data, size_t len)
{
	m0_amsg m = {.kind = kind, .slot = slot, .gen = gen, .flags = flags, .data = (char *)data, .len = len};
	return ring_put(r, &m);
}

size_t m0_ring_take(m0_ring *r, m0_amsg **out)
{
	m0_amsg *v = NULL;
	size_t n = 0, cap = 0;
	if (ring_take(r, &v, &n, &cap) < 0) {
		m0_asgi_free(v, n);
		*out = NULL;
		return 0;
	}
	*out = v;
	return n;
}
