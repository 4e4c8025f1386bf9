/* What the C files of the embedded interpreter share: the table of Python
 * functions resolved at load time, the buffers, and the error capture. Not
 * part of the cgo interface (m0py.h is). */
#ifndef M0PY_INT_H
#define M0PY_INT_H

#include "m0py.h"

#include <time.h>

#define METH_VARARGS 0x0001
#define METH_KEYWORDS 0x0002
#define METH_NOARGS 0x0004
#define METH_O 0x0008
#define Py_file_input 257
#define Py_eval_input 258

#define M0_PY_FUNCS(X)                                                                 \
	X(void, Py_InitializeEx, (int))                                                    \
	X(int, Py_IsInitialized, (void))                                                   \
	X(void, Py_SetProgramName, (const wchar_t *))                                      \
	X(wchar_t *, Py_DecodeLocale, (const char *, size_t *))                            \
	X(PyThreadState *, PyEval_SaveThread, (void))                                      \
	X(void, PyEval_RestoreThread, (PyThreadState *))                                   \
	X(PyThreadState *, PyThreadState_New, (PyInterpreterState *))                      \
	X(void, PyThreadState_Clear, (PyThreadState *))                                    \
	X(void, PyThreadState_Delete, (PyThreadState *))                                   \
	X(PyInterpreterState *, PyInterpreterState_Get, (void))                            \
	X(void, Py_IncRef, (PyObject *))                                                   \
	X(void, Py_DecRef, (PyObject *))                                                   \
	X(PyObject *, PyObject_Type, (PyObject *))                                         \
	X(PyObject *, PyObject_GetAttrString, (PyObject *, const char *))                  \
	X(int, PyObject_HasAttrString, (PyObject *, const char *))                         \
	X(PyObject *, PyObject_Str, (PyObject *))                                          \
	X(PyObject *, PyObject_Call, (PyObject *, PyObject *, PyObject *))                 \
	X(PyObject *, PyObject_CallFunctionObjArgs, (PyObject *, ...))                     \
	X(PyObject *, PyObject_GetIter, (PyObject *))                                      \
	X(int, PyThreadState_SetAsyncExc, (unsigned long, PyObject *))                     \
	X(unsigned long, PyThread_get_thread_ident, (void))                                \
	X(PyObject *, PyIter_Next, (PyObject *))                                           \
	X(int, PyObject_IsTrue, (PyObject *))                                              \
	X(PyObject *, PyErr_Occurred, (void))                                              \
	X(void, PyErr_Fetch, (PyObject **, PyObject **, PyObject **))                      \
	X(void, PyErr_NormalizeException, (PyObject **, PyObject **, PyObject **))         \
	X(void, PyErr_Restore, (PyObject *, PyObject *, PyObject *))                       \
	X(void, PyErr_SetString, (PyObject *, const char *))                               \
	X(PyObject *, PyErr_Format, (PyObject *, const char *, ...))                       \
	X(void, PyErr_Clear, (void))                                                       \
	X(int, PyException_SetTraceback, (PyObject *, PyObject *))                         \
	X(PyObject *, PyTuple_New, (Py_ssize_t))                                           \
	X(int, PyTuple_SetItem, (PyObject *, Py_ssize_t, PyObject *))                      \
	X(PyObject *, PyList_New, (Py_ssize_t))                                            \
	X(int, PyList_SetItem, (PyObject *, Py_ssize_t, PyObject *))                       \
	X(int, PyList_Append, (PyObject *, PyObject *))                                    \
	X(PyObject *, PyLong_FromLong, (long))                                             \
	X(PyObject *, PyLong_FromUnsignedLongLong, (unsigned long long))                   \
	X(long, PyLong_AsLong, (PyObject *))                                               \
	X(unsigned long long, PyLong_AsUnsignedLongLong, (PyObject *))                     \
	X(PyObject *, PyUnicode_DecodeUTF8, (const char *, Py_ssize_t, const char *))      \
	X(PyObject *, PyObject_CallMethodObjArgs, (PyObject *, PyObject *, ...))           \
	X(PyObject *, PyObject_GetItem, (PyObject *, PyObject *))                          \
	X(PyObject *, PyMapping_GetItemString, (PyObject *, const char *))                 \
	X(int, PyObject_IsInstance, (PyObject *, PyObject *))                              \
	X(PyObject *, PyObject_GetAttr, (PyObject *, PyObject *))                          \
	X(int, PyErr_ExceptionMatches, (PyObject *))                                       \
	X(void, PyErr_SetObject, (PyObject *, PyObject *))                                 \
	X(PyObject *, PyDict_GetItem, (PyObject *, PyObject *))                            \
	X(int, PyDict_SetItemString, (PyObject *, const char *, PyObject *))               \
	X(PyObject *, PyBytes_FromString, (const char *))                                  \
	X(PyObject *, PyUnicode_AsUTF8String, (PyObject *))                                \
	X(PyObject *, PyDict_New, (void))                                                  \
	X(PyObject *, PyDict_Copy, (PyObject *))                                           \
	X(int, PyDict_SetItem, (PyObject *, PyObject *, PyObject *))                       \
	X(PyObject *, PyDict_GetItemString, (PyObject *, const char *))                    \
	X(PyObject *, PyUnicode_DecodeLatin1, (const char *, Py_ssize_t, const char *))    \
	X(PyObject *, PyUnicode_FromString, (const char *))                                \
	X(PyObject *, PyUnicode_InternFromString, (const char *))                          \
	X(PyObject *, PyUnicode_AsLatin1String, (PyObject *))                              \
	X(const char *, PyUnicode_AsUTF8AndSize, (PyObject *, Py_ssize_t *))               \
	X(PyObject *, PyBytes_FromStringAndSize, (const char *, Py_ssize_t))               \
	X(int, PyBytes_AsStringAndSize, (PyObject *, char **, Py_ssize_t *))               \
	X(PyObject *, PyBool_FromLong, (long))                                             \
	X(Py_ssize_t, PySequence_Size, (PyObject *))                                       \
	X(PyObject *, PySequence_GetItem, (PyObject *, Py_ssize_t))                        \
	X(PyObject *, PyCFunction_NewEx, (PyMethodDef *, PyObject *, PyObject *))          \
	X(PyObject *, PyModule_NewObject, (PyObject *))                                    \
	X(int, PyModule_AddFunctions, (PyObject *, PyMethodDef *))                         \
	X(PyObject *, PyModule_GetDict, (PyObject *))                                      \
	X(PyObject *, PyImport_GetModuleDict, (void))                                      \
	X(PyObject *, PyImport_ImportModule, (const char *))                               \
	X(PyObject *, PyCapsule_New, (void *, const char *, void (*)(PyObject *)))         \
	X(void *, PyCapsule_GetPointer, (PyObject *, const char *))                        \
	X(PyObject *, Py_CompileString, (const char *, const char *, int))                 \
	X(PyObject *, PyEval_EvalCode, (PyObject *, PyObject *, PyObject *))               \
	X(int, PyArg_ParseTuple, (PyObject *, const char *, ...))                            \
	X(int, PyArg_ParseTupleAndKeywords, (PyObject *, PyObject *, const char *, char **, ...))

#define M0_PY_DATA(X)          \
	X(_Py_NoneStruct)          \
	X(PyList_Type)             \
	X(PyTuple_Type)            \
	X(PyExc_TypeError)         \
	X(PyExc_ValueError)        \
	X(PyExc_RuntimeError)      \
	X(PyExc_AssertionError)     \
	X(PyExc_OSError)           \
	X(PyExc_GeneratorExit)     \
	X(PyDict_Type)             \
	X(PyBytes_Type)            \
	X(PyUnicode_Type)

/* Functions only some of the supported versions export: NULL where the
 * loaded library has none. PyMutex is 3.13's (a byte; a thread that
 * blocks on one detaches from the interpreter meanwhile, so that a
 * stop-the-world, which PyThreadState_SetAsyncExc makes on a free-threaded
 * build, does not wait on it). */
#define M0_PY_OPTIONAL(X)                               \
	X(void, PyMutex_Lock, (m0_pymutex_t *))               \
	X(void, PyMutex_Unlock, (m0_pymutex_t *))             \
	X(m0_pystatus, Py_NewInterpreterFromConfig, (PyThreadState **, const m0_interp_config *)) \
	X(void, PyThreadState_DeleteCurrent, (void))

/* CPython 3.12's PyStatus and PyInterpreterConfig (the same in 3.13 and
 * 3.14), for Py_NewInterpreterFromConfig. */
typedef struct {
	int type; /* 0 ok, 1 error, 2 exit */
	const char *func;
	const char *err_msg;
	int exitcode;
} m0_pystatus;

typedef struct {
	int use_main_obmalloc;
	int allow_fork;
	int allow_exec;
	int allow_threads;
	int allow_daemon_threads;
	int check_multi_interp_extensions;
	int gil; /* 2: PyInterpreterConfig_OWN_GIL */
} m0_interp_config;

struct m0_pytable {
#define X(ret, name, args) ret(*name) args;
	M0_PY_FUNCS(X)
	M0_PY_OPTIONAL(X)
#undef X
#define X(name) void *name;
	M0_PY_DATA(X)
#undef X
};
extern struct m0_pytable py;

/* m0_attach takes the GIL for ts, as PyEval_RestoreThread does (every
 * attach of the C side goes through it), timing the wait while
 * m0_count_gil_waits has turned the count on. */
extern int m0_gil_counting;
extern uint64_t m0_gil_wait_ns, m0_gil_waits;
static inline void m0_attach(PyThreadState *ts)
{
	if (!__atomic_load_n(&m0_gil_counting, __ATOMIC_RELAXED)) {
		py.PyEval_RestoreThread(ts);
		return;
	}
	struct timespec a, b;
	clock_gettime(CLOCK_MONOTONIC, &a);
	py.PyEval_RestoreThread(ts);
	clock_gettime(CLOCK_MONOTONIC, &b);
	uint64_t ns = (uint64_t)(b.tv_sec - a.tv_sec) * 1000000000u + (uint64_t)b.tv_nsec - (uint64_t)a.tv_nsec;
	__atomic_add_fetch(&m0_gil_wait_ns, ns, __ATOMIC_RELAXED);
	__atomic_add_fetch(&m0_gil_waits, 1, __ATOMIC_RELAXED);
}

/* m0_free_threaded is set by m0_load when the library is a free-threaded
 * build (Py_GIL_DISABLED): no GIL orders the C side's threads, and what
 * two of them share takes a lock of its own. */
extern int m0_free_threaded;

#define Py_None ((PyObject *)py._Py_NoneStruct)
#define EXC(name) (*(PyObject **)py.name)


/* What the C side keeps of each interpreter: its own objects, made in it
 * and used only by its threads. Slot 0 is the main interpreter's. */
typedef struct {
	PyInterpreterState *interp;
	PyObject *module;      /* _m0 */
	PyObject *dict;        /* its namespace, where the bootstrap runs */
	PyObject *format_exc;  /* _m0._format_exc(type, value, tb) -> str */
	PyObject *bytesio;     /* io.BytesIO */
	PyObject *empty_bytes; /* b"" */
	PyObject *key_input;   /* "wsgi.input" */
	PyObject **keys;       /* interned environ keys, by id - 1 */
	int nkeys;
} m0_interp;
extern m0_interp m0_interps[M0_MAX_INTERPS];

int buf_reserve(m0_buf *b, size_t extra);
int buf_put(m0_buf *b, const void *p, size_t n);
int buf_put_u32(m0_buf *b, uint32_t v);
void buf_set(m0_buf *b, const char *s);
void capture_error(m0_thread *t);
int is_tchar(unsigned char c);
void set_not_bytes(PyObject *o, const char *what);

/* ASGI: the _m0 functions of the executor, added to the module at start. */
extern PyMethodDef m0_asgi_methods[];

#endif
