/*
 * _prof.c - the Python binding of prof, on the shared runtime (libprof).
 *
 * Everything a Python zone costs is here, so the design is about the
 * context-manager protocol:
 *
 *   prof.zone(name)   returns the Zone object for name. Zone objects are
 *                     cached per name string (one dict lookup), and each
 *                     holds the name interned once with prof_intern(), so a
 *                     `with prof.zone("x"):` converts nothing per use.
 *   Zone.__enter__    begins a zone with the header's inline fast path and
 *                     pushes it on a per-thread stack of open Python zones.
 *   Zone.__exit__     pops it (normally the top entry) and ends it.
 *   Zone(func)        decorator: a C wrapper whose call begins a zone, calls
 *                     func and ends the zone; the prof_zone lives on the C
 *                     stack, so recursion and threads need nothing else.
 *
 * One Zone object serves every use of its name: nested (recursion), on
 * several threads, and from generators or coroutines that suspend inside a
 * `with` block. That is why the open zones live on a per-thread stack keyed
 * by the interned name rather than in the object.
 *
 * Nesting repair. The runtime keeps one nesting depth per thread and a zone
 * end restores it to the depth of the zone that ends, which assumes zones
 * end in LIFO order. C blocks guarantee that; Python does not: two asyncio
 * tasks (or two generators) on one thread can open A, then B, then close A
 * before B. Ending A naively would set the depth to 0 while B is open, and
 * B's end would then set it back to 1 forever. So every end here checks the
 * thread's depth first (one load) and, when the zone is not the innermost,
 * records it but keeps the inner zones' depth, remembering the freed slot in
 * a per-thread bit mask; when the inner zones end, the depth falls through
 * the freed slots. The records themselves are always exact (start, end,
 * name, parent); only later zones' placement in the tree depends on this.
 *
 * Threads and the GIL: the module is only entered with the GIL held, which
 * serialises the name cache and the per-thread stacks' owners. The runtime never needs the GIL: its collector thread
 * calls back into this module only for summaries routed to Python logging,
 * and that callback copies the text under a plain mutex.
 *
 * Thread-local storage: one pointer (this module is dlopen'd).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "prof.h"

#if defined(__GNUC__)
#  define LIKELY(x) __builtin_expect(!!(x), 1)
#  define UNLIKELY(x) __builtin_expect(!!(x), 0)
#else
#  define LIKELY(x) (x)
#  define UNLIKELY(x) (x)
#endif

/* Longest accepted name, in UTF-8 bytes. Names are table rows and trace
 * labels; a longer one is almost surely data passed by mistake. */
#define NAME_MAX_BYTES 1024
/* Zone objects kept in the name cache; past this, names are still interned
 * (they live as long as the process in any case) but each call to
 * prof.zone() with a new name builds a fresh object. */
#define NAME_CACHE_MAX 100000
/* Summaries waiting for Python's logging when nobody calls prof.step(). */
#define LOG_PENDING_MAX 64

/* ------------------------------------------------------------------------ */
/* Per-thread stack of open `with` zones                                    */

typedef struct {
    const char *key;     /* the interned name: identifies the Zone */
    prof_zone z;
} open_zone;

typedef struct {
    size_t n, cap;
    open_zone *v;
} zone_stack;

/* initial-exec: one %fs-relative load instead of a __tls_get_addr call per
 * access. A dlopen'd module may use a few bytes of static TLS (glibc keeps
 * a surplus for exactly this); a pointer is all we take. */
#define TLS_IE __attribute__((tls_model("initial-exec")))
static __thread zone_stack *tls_stack TLS_IE;
/* The runtime's per-thread pointer, read by the inline fast path: the same
 * treatment (libprof declares it as one pointer for this reason). */
extern __thread struct prof_thread_ *prof_thread_self_ TLS_IE;
static pthread_key_t stack_key;     /* frees a thread's stack at its exit */

static void stack_free(void *p)
{
    zone_stack *s = p;

    if (s == NULL)
        return;
    free(s->v);
    free(s);
}

static zone_stack *stack_get(void)
{
    zone_stack *s = tls_stack;

    if (LIKELY(s != NULL))
        return s;
    s = calloc(1, sizeof(*s));
    if (s == NULL)
        return NULL;
    s->cap = 16;
    s->v = malloc(s->cap * sizeof(*s->v));
    if (s->v == NULL) {
        free(s);
        return NULL;
    }
    tls_stack = s;
    pthread_setspecific(stack_key, s);
    return s;
}

static int stack_grow(zone_stack **sp)
{
    zone_stack *s = stack_get();
    open_zone *v;

    if (s == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    if (s->n == s->cap) {
        v = realloc(s->v, 2 * s->cap * sizeof(*v));
        if (v == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        s->v = v;
        s->cap *= 2;
    }
    *sp = s;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Ending zones. Out-of-order ends on this thread (a generator or task that
 * suspended inside a block) are repaired by the runtime itself
 * (src/zone.c), and ends on another thread refused and counted there. */

static inline void zone_end(prof_zone *z)
{
    prof_zone_end_inline_(z);
}

/* ------------------------------------------------------------------------ */
/* Names                                                                     */

typedef struct {
    PyObject_HEAD
    const char *name;    /* interned by the runtime: lives forever */
    PyObject *pyname;    /* the str it came from */
} ZoneObject;

static PyTypeObject Zone_Type;
static PyObject *zone_cache;       /* str -> Zone; entries are never removed */

/* Direct-mapped cache in front of zone_cache, keyed by the str's address. */
#define RECENT_SIZE 64
static struct recent {
    PyObject *str;       /* strong reference */
    ZoneObject *zone;
} recent[RECENT_SIZE];
static PyObject *special_wrapper;  /* prof._wrap_special, set by __init__ */
static PyObject *update_wrapper;   /* functools.update_wrapper */

/* Validate a name and return its interned UTF-8 copy, or NULL with an
 * exception set. */
static const char *intern_name(PyObject *name, const char *what)
{
    const char *utf8;
    const char *interned;
    Py_ssize_t len;

    if (!PyUnicode_Check(name)) {
        PyErr_Format(PyExc_TypeError, "prof: %s name must be a str, not %.100s", what,
                     Py_TYPE(name)->tp_name);
        return NULL;
    }
    utf8 = PyUnicode_AsUTF8AndSize(name, &len);
    if (utf8 == NULL) {
#if PY_VERSION_HEX >= 0x030B0000
        /* Lone surrogates: say who refused them (UnicodeEncodeError is a
         * ValueError, so both kinds of handler catch it). */
        if (PyErr_ExceptionMatches(PyExc_UnicodeEncodeError)) {
            PyObject *type, *value, *tb, *r;
            PyErr_Fetch(&type, &value, &tb);
            PyErr_NormalizeException(&type, &value, &tb);
            r = PyObject_CallMethod(value, "add_note", "s",
                                    "prof: names must be encodable as UTF-8");
            Py_XDECREF(r);
            PyErr_Clear();
            PyErr_Restore(type, value, tb);
        }
#endif
        return NULL;
    }
    if ((size_t)len != strlen(utf8)) {
        PyErr_Format(PyExc_ValueError, "prof: %s name contains a NUL character", what);
        return NULL;
    }
    if (len > NAME_MAX_BYTES) {
        PyErr_Format(PyExc_ValueError,
                     "prof: %s name is %zd bytes long in UTF-8; the limit is %d", what, len,
                     NAME_MAX_BYTES);
        return NULL;
    }
    interned = prof_intern(utf8);
    if (interned == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    return interned;
}

/* The Zone for name: a borrowed reference from the cache, or a new one
 * (*owned set) when the cache is full. */
static ZoneObject *zone_for(PyObject *name, int *owned)
{
    ZoneObject *z;
    PyObject *key;
    const char *interned;

    *owned = 0;
    if (LIKELY(PyUnicode_CheckExact(name))) {
        /* A name at a call site is usually one constant str object: try it
         * by address before hashing into the dict. */
        struct recent *r = &recent[((uintptr_t)name >> 4) % RECENT_SIZE];
        if (LIKELY(r->str == name))
            return r->zone;
        z = (ZoneObject *)PyDict_GetItemWithError(zone_cache, name);
        if (LIKELY(z != NULL)) {
            /* The entry owns a reference to the str, so its address cannot
             * be reused by another object while it is here. */
            Py_INCREF(name);
            Py_XSETREF(r->str, name);
            r->zone = z;     /* borrowed: cached zones live in zone_cache forever */
            return z;
        }
        if (PyErr_Occurred())
            return NULL;
    }
    interned = intern_name(name, "zone");
    if (interned == NULL)
        return NULL;
    /* A str subclass is cached under an exact copy, so its own __hash__ /
     * __eq__ never run on the fast path. */
    key = PyUnicode_CheckExact(name) ? Py_NewRef(name) : PyUnicode_FromObject(name);
    if (key == NULL)
        return NULL;
    z = PyObject_New(ZoneObject, &Zone_Type);
    if (z == NULL) {
        Py_DECREF(key);
        return NULL;
    }
    z->name = interned;
    z->pyname = key;
    if (PyDict_GET_SIZE(zone_cache) < NAME_CACHE_MAX) {
        if (PyDict_SetItem(zone_cache, key, (PyObject *)z) < 0) {
            Py_DECREF(z);
            return NULL;
        }
        Py_DECREF(z);    /* the cache holds it */
        return z;
    }
    *owned = 1;
    return z;
}

/* A name for counters and marks: the same cache. */
static const char *name_for(PyObject *name)
{
    int owned;
    ZoneObject *z = zone_for(name, &owned);
    const char *s;

    if (z == NULL)
        return NULL;
    s = z->name;
    if (owned)
        Py_DECREF(z);
    return s;
}

/* ------------------------------------------------------------------------ */
/* Zone: context manager and decorator                                       */

static PyObject *Zone_enter(ZoneObject *self, PyObject *Py_UNUSED(ignored))
{
    zone_stack *s = tls_stack;
    open_zone *e;

    if (UNLIKELY(s == NULL || s->n == s->cap) && stack_grow(&s) < 0)
        return NULL;
    e = &s->v[s->n++];
    e->key = self->name;
    e->z = prof_zone_begin_inline_(self->name);
    return Py_NewRef((PyObject *)self);
}

static PyObject *Zone_exit_slow(ZoneObject *self, zone_stack *s)
{
    size_t i;
    prof_zone z;

    /* Not the innermost open zone of this thread: a generator or task that
     * suspended inside this block resumed after inner blocks opened. */
    for (i = s != NULL ? s->n : 0; i-- > 0;) {
        if (s->v[i].key == self->name) {
            z = s->v[i].z;
            memmove(&s->v[i], &s->v[i + 1], (s->n - i - 1) * sizeof(*s->v));
            s->n--;
            zone_end(&z);
            Py_RETURN_NONE;
        }
    }
    PyErr_Format(PyExc_RuntimeError,
                 "prof.zone(%R).__exit__() without a matching __enter__() on this thread "
                 "(a zone must end on the thread that began it)",
                 self->pyname);
    return NULL;
}

static PyObject *Zone_exit(ZoneObject *self, PyObject *const *Py_UNUSED(args),
                           Py_ssize_t Py_UNUSED(nargs))
{
    zone_stack *s = tls_stack;
    prof_zone z;

    if (LIKELY(s != NULL && s->n != 0 && s->v[s->n - 1].key == self->name)) {
        s->n--;
        z = s->v[s->n].z;
        zone_end(&z);
        Py_RETURN_NONE;    /* never swallows the exception */
    }
    return Zone_exit_slow(self, s);
}

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *func;
    ZoneObject *zone;
    PyObject *dict;
    PyObject *weakrefs;
} ZoneWrapperObject;

static PyTypeObject ZoneWrapper_Type;

static PyObject *ZoneWrapper_vectorcall(ZoneWrapperObject *self, PyObject *const *args,
                                        size_t nargsf, PyObject *kwnames)
{
    prof_zone z = prof_zone_begin_inline_(self->zone->name);
    PyObject *r;

    r = PyObject_Vectorcall(self->func, args, nargsf, kwnames);
    zone_end(&z);
    return r;
}

static PyObject *Zone_call(ZoneObject *self, PyObject *args, PyObject *kwargs)
{
    PyObject *func, *r;
    ZoneWrapperObject *w;

    if (kwargs != NULL && PyDict_GET_SIZE(kwargs) != 0) {
        PyErr_SetString(PyExc_TypeError, "prof.zone(name)(func) takes no keyword arguments");
        return NULL;
    }
    if (!PyArg_UnpackTuple(args, "prof.zone(name)", 1, 1, &func))
        return NULL;
    if (!PyCallable_Check(func)) {
        PyErr_Format(PyExc_TypeError,
                     "prof.zone(%R) decorates callables, not %.100s; use `with` for blocks",
                     self->pyname, Py_TYPE(func)->tp_name);
        return NULL;
    }
    /* Generator and coroutine functions return at once; wrapping the call
     * would time nothing. prof/__init__.py wraps those in Python so the
     * zone spans the iteration or the await. */
    if (PyFunction_Check(func) && special_wrapper != NULL) {
        PyCodeObject *code = (PyCodeObject *)PyFunction_GET_CODE(func);
        if (code->co_flags & (CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR |
                              CO_ITERABLE_COROUTINE))
            return PyObject_CallFunctionObjArgs(special_wrapper, (PyObject *)self, func, NULL);
    }
    w = PyObject_GC_New(ZoneWrapperObject, &ZoneWrapper_Type);
    if (w == NULL)
        return NULL;
    w->vectorcall = (vectorcallfunc)ZoneWrapper_vectorcall;
    w->func = Py_NewRef(func);
    w->zone = (ZoneObject *)Py_NewRef((PyObject *)self);
    w->dict = NULL;
    w->weakrefs = NULL;
    PyObject_GC_Track(w);
    /* __name__, __qualname__, __doc__, __module__, __wrapped__, __dict__. */
    r = PyObject_CallFunctionObjArgs(update_wrapper, (PyObject *)w, func, NULL);
    if (r == NULL) {
        Py_DECREF(w);
        return NULL;
    }
    Py_DECREF(r);
    return (PyObject *)w;
}

static PyObject *Zone_repr(ZoneObject *self)
{
    return PyUnicode_FromFormat("prof.zone(%R)", self->pyname);
}

static void Zone_dealloc(ZoneObject *self)
{
    Py_XDECREF(self->pyname);
    PyObject_Free(self);
}

static PyObject *Zone_get_name(ZoneObject *self, void *Py_UNUSED(closure))
{
    return Py_NewRef(self->pyname);
}

static PyMethodDef Zone_methods[] = {
    {"__enter__", (PyCFunction)Zone_enter, METH_NOARGS, "Begin the zone."},
    {"__exit__", (PyCFunction)(void (*)(void))Zone_exit, METH_FASTCALL,
     "End the zone; exceptions propagate."},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef Zone_getset[] = {
    {"name", (getter)Zone_get_name, NULL, "The stage name.", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyTypeObject Zone_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "prof.Zone",
    .tp_basicsize = sizeof(ZoneObject),
    .tp_dealloc = (destructor)Zone_dealloc,
    .tp_repr = (reprfunc)Zone_repr,
    .tp_call = (ternaryfunc)Zone_call,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A named stage: `with prof.zone(name):` or `@prof.zone(name)`.\n\n"
              "One object per name, shared by every use; made by prof.zone().",
    .tp_methods = Zone_methods,
    .tp_getset = Zone_getset,
};

static int ZoneWrapper_traverse(ZoneWrapperObject *self, visitproc visit, void *arg)
{
    Py_VISIT(self->func);
    Py_VISIT(self->zone);
    Py_VISIT(self->dict);
    return 0;
}

static int ZoneWrapper_clear(ZoneWrapperObject *self)
{
    Py_CLEAR(self->func);
    Py_CLEAR(self->zone);
    Py_CLEAR(self->dict);
    return 0;
}

static void ZoneWrapper_dealloc(ZoneWrapperObject *self)
{
    PyObject_GC_UnTrack(self);
    if (self->weakrefs != NULL)
        PyObject_ClearWeakRefs((PyObject *)self);
    ZoneWrapper_clear(self);
    PyObject_GC_Del(self);
}

/* Methods: bind like a function does. */
static PyObject *ZoneWrapper_get(PyObject *self, PyObject *obj, PyObject *Py_UNUSED(type))
{
    if (obj == NULL || obj == Py_None)
        return Py_NewRef(self);
    return PyMethod_New(self, obj);
}

static PyObject *ZoneWrapper_repr(ZoneWrapperObject *self)
{
    return PyUnicode_FromFormat("<prof.zone(%R) wrapping %R>", self->zone->pyname, self->func);
}

static PyObject *ZoneWrapper_get_zone(ZoneWrapperObject *self, void *Py_UNUSED(closure))
{
    return Py_NewRef((PyObject *)self->zone);
}

static PyGetSetDef ZoneWrapper_getset[] = {
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, NULL, NULL},
    {"zone", (getter)ZoneWrapper_get_zone, NULL, "The Zone this wrapper opens.", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyTypeObject ZoneWrapper_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "prof.ZoneWrapper",
    .tp_basicsize = sizeof(ZoneWrapperObject),
    .tp_dealloc = (destructor)ZoneWrapper_dealloc,
    .tp_vectorcall_offset = offsetof(ZoneWrapperObject, vectorcall),
    .tp_repr = (reprfunc)ZoneWrapper_repr,
    .tp_call = PyVectorcall_Call,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL |
                Py_TPFLAGS_METHOD_DESCRIPTOR,
    .tp_doc = "A function wrapped by @prof.zone(name): each call is one zone.",
    .tp_traverse = (traverseproc)ZoneWrapper_traverse,
    .tp_clear = (inquiry)ZoneWrapper_clear,
    .tp_weaklistoffset = offsetof(ZoneWrapperObject, weakrefs),
    .tp_getset = ZoneWrapper_getset,
    .tp_descr_get = ZoneWrapper_get,
    .tp_dictoffset = offsetof(ZoneWrapperObject, dict),
};

/* ------------------------------------------------------------------------ */
/* The no-op context manager: disabled ProfilingContext, and the benchmark's
 * baseline for the protocol's own cost.                                     */

typedef struct {
    PyObject_HEAD
} NullCtxObject;

static PyTypeObject NullCtx_Type;
static PyObject *null_ctx;    /* the shared instance */

static PyObject *NullCtx_new(PyTypeObject *type, PyObject *Py_UNUSED(args),
                             PyObject *Py_UNUSED(kwargs))
{
    return type->tp_alloc(type, 0);
}

static PyObject *NullCtx_enter(PyObject *self, PyObject *Py_UNUSED(ignored))
{
    return Py_NewRef(self);
}

static PyObject *NullCtx_exit(PyObject *Py_UNUSED(self), PyObject *const *Py_UNUSED(args),
                              Py_ssize_t Py_UNUSED(nargs))
{
    Py_RETURN_NONE;
}

/* As a decorator: hand the function back untouched. */
static PyObject *NullCtx_call(PyObject *Py_UNUSED(self), PyObject *args, PyObject *kwargs)
{
    PyObject *func;

    if (kwargs != NULL && PyDict_GET_SIZE(kwargs) != 0) {
        PyErr_SetString(PyExc_TypeError, "takes no keyword arguments");
        return NULL;
    }
    if (!PyArg_UnpackTuple(args, "prof null zone", 1, 1, &func))
        return NULL;
    return Py_NewRef(func);
}

static PyMethodDef NullCtx_methods[] = {
    {"__enter__", (PyCFunction)NullCtx_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)(void (*)(void))NullCtx_exit, METH_FASTCALL, NULL},
    {NULL, NULL, 0, NULL}};

static PyTypeObject NullCtx_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "prof._prof._nullctx",
    .tp_basicsize = sizeof(NullCtxObject),
    .tp_call = NullCtx_call,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A context manager (and decorator) that does nothing, in C.",
    .tp_methods = NullCtx_methods,
    .tp_new = NullCtx_new,
};

/* ------------------------------------------------------------------------ */
/* CUDA zones                                                                */

typedef struct {
    PyObject_HEAD
    const char *name;
    PyObject *pyname;
    void *stream;
    prof_cuda_zone z;
    pthread_t thread;
    int active;
} CudaZoneObject;

static PyTypeObject CudaZone_Type;

static int stream_handle(PyObject *stream, void **out)
{
    PyObject *h = NULL;
    void *p;

    if (stream == NULL || stream == Py_None) {
        *out = NULL;
        return 0;
    }
    if (PyLong_Check(stream)) {
        h = Py_NewRef(stream);
    } else {
        /* torch.cuda.Stream / torch.cuda.ExternalStream */
        h = PyObject_GetAttrString(stream, "cuda_stream");
        if (h == NULL || !PyLong_Check(h)) {
            Py_XDECREF(h);
            PyErr_Clear();
            PyErr_Format(PyExc_TypeError,
                         "prof.cuda_zone: stream must be a torch.cuda.Stream, an int handle "
                         "or None, not %.100s",
                         Py_TYPE(stream)->tp_name);
            return -1;
        }
    }
    p = PyLong_AsVoidPtr(h);
    Py_DECREF(h);
    if (p == NULL && PyErr_Occurred())
        return -1;
    *out = p;
    return 0;
}

static PyObject *CudaZone_enter(CudaZoneObject *self, PyObject *Py_UNUSED(ignored))
{
    if (self->active) {
        PyErr_Format(PyExc_RuntimeError,
                     "prof.cuda_zone(%R) is already open; make one per `with` block",
                     self->pyname);
        return NULL;
    }
    self->z = prof_cuda_zone_begin(self->name, self->stream);
    self->thread = pthread_self();
    self->active = 1;
    return Py_NewRef((PyObject *)self);
}

static PyObject *CudaZone_exit(CudaZoneObject *self, PyObject *const *Py_UNUSED(args),
                               Py_ssize_t Py_UNUSED(nargs))
{
    int same_thread;

    if (!self->active) {
        PyErr_Format(PyExc_RuntimeError,
                     "prof.cuda_zone(%R).__exit__() without __enter__()", self->pyname);
        return NULL;
    }
    self->active = 0;
    same_thread = pthread_equal(self->thread, pthread_self());
    /* On another thread the runtime refuses the end, counts it and gives
     * back what the begin took (its CUDA events, and its level on the
     * beginning thread); nothing of this thread is touched. */
    prof_cuda_zone_end(&self->z);
    if (!same_thread) {
        PyErr_Format(PyExc_RuntimeError,
                     "prof.cuda_zone(%R).__exit__() on another thread than its __enter__() "
                     "(a zone must end on the thread that began it); not recorded",
                     self->pyname);
        return NULL;
    }
    Py_RETURN_NONE;
}

static void CudaZone_dealloc(CudaZoneObject *self)
{
    Py_XDECREF(self->pyname);
    PyObject_Free(self);
}

static PyObject *CudaZone_repr(CudaZoneObject *self)
{
    return PyUnicode_FromFormat("prof.cuda_zone(%R, stream=%p)", self->pyname, self->stream);
}

static PyMethodDef CudaZone_methods[] = {
    {"__enter__", (PyCFunction)CudaZone_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)(void (*)(void))CudaZone_exit, METH_FASTCALL, NULL},
    {NULL, NULL, 0, NULL}};

static PyTypeObject CudaZone_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "prof.CudaZone",
    .tp_basicsize = sizeof(CudaZoneObject),
    .tp_dealloc = (destructor)CudaZone_dealloc,
    .tp_repr = (reprfunc)CudaZone_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "GPU time of the work enqueued on a CUDA stream; made by prof.cuda_zone().",
    .tp_methods = CudaZone_methods,
};

/* ------------------------------------------------------------------------ */
/* Summaries routed to Python's logging                                      */

/* The collector thread formats a periodic or final summary and calls
 * log_handler, which must not take the GIL (the collector never waits on
 * Python). It copies the text into this queue under log_mu and raises
 * log_pending; the next prof.step(), flush(), summary(), stats() or
 * shutdown() on a Python thread drains the queue into the sink. */
typedef struct log_item {
    struct log_item *next;
    int kind;
    size_t len;
    char text[];
} log_item;

static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
static log_item *log_head, *log_tail;
static int log_count;
static uint64_t log_lost;
static int log_pending;          /* 1 when the queue may be non-empty */
static PyObject *log_sink;       /* callable(text, kind) or NULL */

static void log_handler(void *user, const char *text, int kind)
{
    size_t len = strlen(text);
    log_item *it = malloc(sizeof(*it) + len + 1), *old = NULL;

    (void)user;
    pthread_mutex_lock(&log_mu);
    if (it == NULL) {
        log_lost++;
    } else {
        it->next = NULL;
        it->kind = kind;
        it->len = len;
        memcpy(it->text, text, len + 1);
        if (log_tail != NULL)
            log_tail->next = it;
        else
            log_head = it;
        log_tail = it;
        if (++log_count > LOG_PENDING_MAX) {
            old = log_head;
            log_head = old->next;
            log_count--;
            log_lost++;
        }
    }
    pthread_mutex_unlock(&log_mu);
    free(old);
    /* Release: a reader that sees the flag finds the item under the lock. */
    __atomic_store_n(&log_pending, 1, __ATOMIC_RELEASE);
}

static void log_atfork_child(void)
{
    /* The parent's collector may have held the lock at fork; the child owns
     * no pending summaries of its own yet. */
    pthread_mutex_init(&log_mu, NULL);
    log_head = log_tail = NULL;
    log_count = 0;
    log_lost = 0;
    log_pending = 0;
}

/* Emit every queued summary to the sink. GIL held. Errors raised by the
 * sink are reported as unraisable: a logging failure never breaks a step. */
static void log_drain(void)
{
    log_item *it, *next;
    uint64_t lost;
    PyObject *r;

    if (!__atomic_load_n(&log_pending, __ATOMIC_ACQUIRE))
        return;
    pthread_mutex_lock(&log_mu);
    it = log_head;
    log_head = log_tail = NULL;
    log_count = 0;
    lost = log_lost;
    log_lost = 0;
    __atomic_store_n(&log_pending, 0, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&log_mu);

    if (lost != 0 && log_sink != NULL) {
        PyObject *msg = PyUnicode_FromFormat(
            "prof: %llu summaries were not logged (more than %d waited for a "
            "prof.step() or prof.flush() call)",
            (unsigned long long)lost, LOG_PENDING_MAX);
        if (msg != NULL) {
            r = PyObject_CallFunction(log_sink, "Os", msg, "lost");
            Py_DECREF(msg);
            if (r == NULL)
                PyErr_WriteUnraisable(log_sink);
            Py_XDECREF(r);
        } else {
            PyErr_Clear();
        }
    }
    for (; it != NULL; it = next) {
        next = it->next;
        if (log_sink != NULL) {
            PyObject *text = PyUnicode_DecodeUTF8(it->text, (Py_ssize_t)it->len, "replace");
            if (text != NULL) {
                r = PyObject_CallFunction(log_sink, "Os", text,
                                          it->kind == PROF_SUMMARY_FINAL ? "final" : "periodic");
                Py_DECREF(text);
                if (r == NULL)
                    PyErr_WriteUnraisable(log_sink);
                Py_XDECREF(r);
            } else {
                PyErr_WriteUnraisable(NULL);
            }
        }
        free(it);
    }
}

static PyObject *py_set_log_sink(PyObject *Py_UNUSED(m), PyObject *sink)
{
    if (sink != Py_None && !PyCallable_Check(sink)) {
        PyErr_SetString(PyExc_TypeError, "prof._set_log_sink: expected a callable or None");
        return NULL;
    }
    if (sink == Py_None) {
        prof_set_summary_handler(NULL, NULL);
        log_drain();    /* what was already formatted still goes to the old sink */
        Py_CLEAR(log_sink);
    } else {
        Py_XSETREF(log_sink, Py_NewRef(sink));
        prof_set_summary_handler(log_handler, NULL);
    }
    Py_RETURN_NONE;
}

static PyObject *py_drain_log(PyObject *Py_UNUSED(m), PyObject *Py_UNUSED(ignored))
{
    log_drain();
    Py_RETURN_NONE;
}

/* ------------------------------------------------------------------------ */
/* Module functions                                                          */

static PyObject *py_zone(PyObject *Py_UNUSED(m), PyObject *name)
{
    int owned;
    ZoneObject *z = zone_for(name, &owned);

    if (z == NULL)
        return NULL;
    return owned ? (PyObject *)z : Py_NewRef((PyObject *)z);
}

static PyObject *py_null_track(PyObject *Py_UNUSED(m), PyObject *name)
{
    if (UNLIKELY(!PyUnicode_Check(name))) {
        PyErr_Format(PyExc_TypeError, "prof: zone name must be a str, not %.100s",
                     Py_TYPE(name)->tp_name);
        return NULL;
    }
    return Py_NewRef(null_ctx);
}

static PyObject *py_cuda_zone(PyObject *Py_UNUSED(m), PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"name", "stream", NULL};
    PyObject *name, *stream = Py_None;
    CudaZoneObject *cz;
    const char *interned;
    void *handle;

    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|O:cuda_zone", kwlist, &name, &stream))
        return NULL;
    interned = name_for(name);
    if (interned == NULL)
        return NULL;
    if (stream_handle(stream, &handle) < 0)
        return NULL;
    cz = PyObject_New(CudaZoneObject, &CudaZone_Type);
    if (cz == NULL)
        return NULL;
    cz->name = interned;
    cz->pyname = PyUnicode_FromString(interned);
    if (cz->pyname == NULL) {
        Py_DECREF(cz);
        return NULL;
    }
    cz->stream = handle;
    memset(&cz->z, 0, sizeof(cz->z));
    cz->active = 0;
    return (PyObject *)cz;
}

static PyObject *py_step(PyObject *Py_UNUSED(m), PyObject *Py_UNUSED(ignored))
{
    uint64_t n = prof_step();

    if (UNLIKELY(__atomic_load_n(&log_pending, __ATOMIC_RELAXED)))
        log_drain();
    return PyLong_FromUnsignedLongLong(n);
}

static PyObject *py_counter(PyObject *Py_UNUSED(m), PyObject *const *args, Py_ssize_t nargs)
{
    const char *name;
    double v;

    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError, "prof.counter(name, value) takes 2 arguments (%zd given)",
                     nargs);
        return NULL;
    }
    name = name_for(args[0]);
    if (name == NULL)
        return NULL;
    v = PyFloat_AsDouble(args[1]);
    if (v == -1.0 && PyErr_Occurred())
        return NULL;
    prof_counter(name, v);
    Py_RETURN_NONE;
}

static PyObject *py_mark(PyObject *Py_UNUSED(m), PyObject *arg)
{
    const char *name = name_for(arg);

    if (name == NULL)
        return NULL;
    prof_mark(name);
    Py_RETURN_NONE;
}

static PyObject *py_flush(PyObject *Py_UNUSED(m), PyObject *Py_UNUSED(ignored))
{
    int rc;

    Py_BEGIN_ALLOW_THREADS
    rc = prof_flush();
    Py_END_ALLOW_THREADS
    log_drain();
    return PyBool_FromLong(rc == 0);
}

static PyObject *py_reset(PyObject *Py_UNUSED(m), PyObject *Py_UNUSED(ignored))
{
    Py_BEGIN_ALLOW_THREADS
    prof_reset();
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

static PyObject *py_enable(PyObject *Py_UNUSED(m), PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"on", NULL};
    int on = 1;

    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|p:enable", kwlist, &on))
        return NULL;
    prof_enable(on);
    return PyBool_FromLong(prof_enabled());
}

static PyObject *py_enabled(PyObject *Py_UNUSED(m), PyObject *Py_UNUSED(ignored))
{
    return PyBool_FromLong(prof_enabled());
}

static PyObject *py_shutdown(PyObject *Py_UNUSED(m), PyObject *Py_UNUSED(ignored))
{
    Py_BEGIN_ALLOW_THREADS
    prof_shutdown();
    Py_END_ALLOW_THREADS
    log_drain();
    Py_RETURN_NONE;
}

static PyObject *py_thread_name(PyObject *Py_UNUSED(m), PyObject *arg)
{
    const char *s;
    Py_ssize_t len;
    int rc;

    if (!PyUnicode_Check(arg)) {
        PyErr_Format(PyExc_TypeError, "prof: thread name must be a str, not %.100s",
                     Py_TYPE(arg)->tp_name);
        return NULL;
    }
    s = PyUnicode_AsUTF8AndSize(arg, &len);
    if (s == NULL)
        return NULL;
    if ((size_t)len != strlen(s)) {
        PyErr_SetString(PyExc_ValueError, "prof: thread name contains a NUL character");
        return NULL;
    }
    rc = prof_thread_name(s);
    if (rc == -ENOMEM)
        return PyErr_NoMemory();
    Py_RETURN_NONE;
}

static PyObject *str_or_none(const char *s)
{
    if (s == NULL)
        Py_RETURN_NONE;
    return PyUnicode_DecodeUTF8(s, (Py_ssize_t)strlen(s), "replace");
}

static int set_item(PyObject *d, const char *key, PyObject *v)
{
    int rc;

    if (v == NULL)
        return -1;
    rc = PyDict_SetItemString(d, key, v);
    Py_DECREF(v);
    return rc;
}

static PyObject *stage_dict(const void *item)
{
    const prof_stage_stats *st = item;
    PyObject *d = PyDict_New();

    if (d == NULL)
        return NULL;
    if (set_item(d, "count", PyLong_FromUnsignedLongLong(st->count)) < 0 ||
        set_item(d, "total_ms", PyFloat_FromDouble((double)st->total_ns / 1e6)) < 0 ||
        set_item(d, "self_ms", PyFloat_FromDouble((double)st->self_ns / 1e6)) < 0 ||
        set_item(d, "avg_ms", PyFloat_FromDouble(st->avg_ns / 1e6)) < 0 ||
        set_item(d, "min_ms", PyFloat_FromDouble((double)st->min_ns / 1e6)) < 0 ||
        set_item(d, "max_ms", PyFloat_FromDouble((double)st->max_ns / 1e6)) < 0 ||
        set_item(d, "p50_ms", PyFloat_FromDouble(st->p50_ns / 1e6)) < 0 ||
        set_item(d, "p95_ms", PyFloat_FromDouble(st->p95_ns / 1e6)) < 0 ||
        set_item(d, "p99_ms", PyFloat_FromDouble(st->p99_ns / 1e6)) < 0 ||
        set_item(d, "wall_share", PyFloat_FromDouble(st->wall_share)) < 0 ||
        set_item(d, "parent", str_or_none(st->parent)) < 0 ||
        set_item(d, "depth", PyLong_FromUnsignedLong(st->depth)) < 0 ||
        set_item(d, "gpu", PyBool_FromLong((st->flags & PROF_STAGE_GPU) != 0)) < 0) {
        Py_DECREF(d);
        return NULL;
    }
    return d;
}

/* The runtime's list calls (prof_stats_list, prof_counter_stats_list),
 * seen through one signature: fill out[0..cap), return how many there are. */
typedef int (*list_fn)(void *out, size_t cap);
typedef PyObject *(*row_fn)(const void *item);

static int list_stages(void *out, size_t cap)
{
    return prof_stats_list(out, cap);
}

static int list_counters(void *out, size_t cap)
{
    return prof_counter_stats_list(out, cap);
}

/* Flush, then {name: row(item)} for every item the list call gives, in its
 * order. Items begin with their name (const char *), as both structs do. */
static PyObject *list_dict(size_t size, list_fn list, row_fn row_of, const char *what)
{
    PyObject *out = NULL, *row, *key;
    char *v = NULL;
    size_t cap = 64;
    int n = 0, rc;

    Py_BEGIN_ALLOW_THREADS
    rc = prof_flush();
    Py_END_ALLOW_THREADS
    log_drain();
    if (rc == -ESRCH)
        return PyDict_New();
    for (;;) {
        char *nv = PyMem_Realloc(v, cap * size);
        if (nv == NULL) {
            PyErr_NoMemory();
            goto done;
        }
        v = nv;
        Py_BEGIN_ALLOW_THREADS
        n = list(v, cap);
        Py_END_ALLOW_THREADS
        if (n < 0) {
            if (n == -ESRCH) {
                out = PyDict_New();
                goto done;
            }
            PyErr_Format(PyExc_OSError, "%s: %s", what, strerror(-n));
            goto done;
        }
        if ((size_t)n <= cap)
            break;
        cap = (size_t)n + 16;
    }
    out = PyDict_New();
    if (out == NULL)
        goto done;
    for (int i = 0; i < n; i++) {
        const void *item = v + (size_t)i * size;
        key = str_or_none(*(const char *const *)item);
        row = key != NULL ? row_of(item) : NULL;
        if (row == NULL || PyDict_SetItem(out, key, row) < 0) {
            Py_XDECREF(key);
            Py_XDECREF(row);
            Py_CLEAR(out);
            goto done;
        }
        Py_DECREF(key);
        Py_DECREF(row);
    }
done:
    PyMem_Free(v);
    return out;
}

/* prof.stats() -> {name: {...}} in summary (tree) order; prof.stats(name)
 * -> one stage's dict, KeyError when no zone of that name ended. */
static PyObject *py_stats(PyObject *Py_UNUSED(m), PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"name", NULL};
    PyObject *name = Py_None;
    int rc;

    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|O:stats", kwlist, &name))
        return NULL;
    if (name != Py_None) {
        prof_stage_stats st;
        const char *s = name_for(name);
        if (s == NULL)
            return NULL;
        Py_BEGIN_ALLOW_THREADS
        rc = prof_stats(s, &st);
        Py_END_ALLOW_THREADS
        log_drain();
        if (rc == -ENOENT || rc == -ESRCH) {
            PyErr_SetObject(PyExc_KeyError, name);
            return NULL;
        }
        if (rc < 0)
            return PyErr_Format(PyExc_OSError, "prof_stats: %s", strerror(-rc));
        return stage_dict(&st);
    }

    return list_dict(sizeof(prof_stage_stats), list_stages, stage_dict, "prof_stats_list");
}

static PyObject *counter_dict(const void *item)
{
    const prof_counter_stats *c = item;
    PyObject *d = PyDict_New();

    if (d == NULL)
        return NULL;
    if (set_item(d, "count", PyLong_FromUnsignedLongLong(c->count)) < 0 ||
        set_item(d, "last", PyFloat_FromDouble(c->last)) < 0 ||
        set_item(d, "min", PyFloat_FromDouble(c->min)) < 0 ||
        set_item(d, "max", PyFloat_FromDouble(c->max)) < 0 ||
        set_item(d, "avg", PyFloat_FromDouble(c->avg)) < 0) {
        Py_DECREF(d);
        return NULL;
    }
    return d;
}

static PyObject *py_counters(PyObject *Py_UNUSED(m), PyObject *Py_UNUSED(ignored))
{
    return list_dict(sizeof(prof_counter_stats), list_counters, counter_dict,
                     "prof_counter_stats_list");
}

static PyObject *py_summary(PyObject *Py_UNUSED(m), PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"format", NULL};
    const char *fmt = "text";
    int format, n;
    size_t cap = 16384;
    char *buf = NULL;
    PyObject *out = NULL;

    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|z:summary", kwlist, &fmt))
        return NULL;
    if (fmt == NULL || strcmp(fmt, "default") == 0)
        format = PROF_FORMAT_DEFAULT;
    else if (strcmp(fmt, "text") == 0)
        format = PROF_FORMAT_TEXT;
    else if (strcmp(fmt, "json") == 0)
        format = PROF_FORMAT_JSON;
    else
        return PyErr_Format(PyExc_ValueError,
                            "prof.summary: format must be 'text', 'json' or None, not '%s'",
                            fmt);
    /* The table can grow between the sizing call and the real one (other
     * threads keep recording): retry with the size it asked for. */
    for (int tries = 0; tries < 8; tries++) {
        char *nb = PyMem_Realloc(buf, cap);
        if (nb == NULL) {
            PyErr_NoMemory();
            goto done;
        }
        buf = nb;
        Py_BEGIN_ALLOW_THREADS
        n = prof_summary_snprint(buf, cap, format);
        Py_END_ALLOW_THREADS
        if (n == -ESRCH) {
            log_drain();
            out = PyUnicode_FromString(
                format == PROF_FORMAT_JSON
                    ? "{}"
                    : "prof: nothing recorded (profiling is off: set PROF=1 or call "
                      "prof.enable())\n");
            goto done;
        }
        if (n < 0) {
            PyErr_Format(PyExc_OSError, "prof_summary_snprint: %s", strerror(-n));
            goto done;
        }
        if ((size_t)n < cap) {
            log_drain();
            out = PyUnicode_DecodeUTF8(buf, n, "replace");
            goto done;
        }
        cap = (size_t)n + (size_t)n / 4 + 1024;
    }
    PyErr_SetString(PyExc_RuntimeError, "prof.summary: the summary kept growing");
done:
    PyMem_Free(buf);
    return out;
}

static PyObject *py_runtime_version(PyObject *Py_UNUSED(m), PyObject *Py_UNUSED(ignored))
{
    return PyUnicode_FromString(prof_version());
}

/* The file the runtime was loaded from: the library C extensions link. */
static PyObject *py_library_path(PyObject *Py_UNUSED(m), PyObject *Py_UNUSED(ignored))
{
    Dl_info info;

    if (dladdr((void *)&prof_version, &info) == 0 || info.dli_fname == NULL)
        Py_RETURN_NONE;
    return PyUnicode_DecodeFSDefault(info.dli_fname);
}

static PyObject *py_set_special_wrapper(PyObject *Py_UNUSED(m), PyObject *fn)
{
    Py_XSETREF(special_wrapper, fn == Py_None ? NULL : Py_NewRef(fn));
    Py_RETURN_NONE;
}

/* For tests: this thread's open Python zones and the runtime's depth. */
static PyObject *py_debug_state(PyObject *Py_UNUSED(m), PyObject *Py_UNUSED(ignored))
{
    zone_stack *s = tls_stack;
    struct prof_thread_ *t = prof_thread_self_;

    return Py_BuildValue("{s:n,s:l,s:K,s:l}", "open", (Py_ssize_t)(s ? s->n : 0), "depth",
                         t != NULL ? (long)(t->depth & ~PROF_DEPTH_REPAIR_) : -1L, "dead",
                         (unsigned long long)(t != NULL ? t->dead : 0), "dead_pending",
                         (long)(t != NULL && (t->depth & PROF_DEPTH_REPAIR_)));
}

/* ------------------------------------------------------------------------ */
/* Windows and ranks: the last window's numbers (prof.window_stats) and the
 * pieces prof/distributed.py builds its cross-rank summary from. */

static int list_window(void *out, size_t cap)
{
    int n = prof_window_stats_list(out, cap, NULL);

    /* No window has closed yet: an empty dict, as stats() before any zone. */
    return n == -ENOENT ? 0 : n;
}

/* prof.window_stats() -> {name: {...}} of the last window a periodic
 * summary showed; prof.window_stats(name) -> one stage, KeyError when that
 * window does not list it. */
static PyObject *py_window_stats(PyObject *Py_UNUSED(m), PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"name", NULL};
    PyObject *name = Py_None, *all, *one;

    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|O:window_stats", kwlist, &name))
        return NULL;
    all = list_dict(sizeof(prof_stage_stats), list_window, stage_dict,
                    "prof_window_stats_list");
    if (all == NULL || name == Py_None)
        return all;
    one = PyDict_GetItemWithError(all, name);
    if (one == NULL) {
        if (!PyErr_Occurred())
            PyErr_SetObject(PyExc_KeyError, name);
        Py_DECREF(all);
        return NULL;
    }
    Py_INCREF(one);
    Py_DECREF(all);
    return one;
}

/* prof.window_step() -> the step the last window closed at, or None. */
static PyObject *py_window_step(PyObject *Py_UNUSED(m), PyObject *Py_UNUSED(ignored))
{
    uint64_t end = 0;
    int n;

    Py_BEGIN_ALLOW_THREADS
    prof_flush();
    n = prof_window_stats_list(NULL, 0, &end);
    Py_END_ALLOW_THREADS
    log_drain();
    if (n < 0)
        Py_RETURN_NONE;
    return PyLong_FromUnsignedLongLong(end);
}

static PyObject *py_step_count(PyObject *Py_UNUSED(m), PyObject *Py_UNUSED(ignored))
{
    return PyLong_FromUnsignedLongLong(prof_step_count());
}

/* _ranks_start() -> (rc, every_steps, timeout_seconds): rc 0 or -errno. */
static PyObject *py_ranks_start(PyObject *Py_UNUSED(m), PyObject *Py_UNUSED(ignored))
{
    uint64_t every = 0, timeout = 0;
    int rc = prof_ranks_start(&every, &timeout);

    return Py_BuildValue("(iKd)", rc, (unsigned long long)every, (double)timeout / 1e9);
}

/* _ranks_pack(rank) -> bytes: this rank's last window, PROF_RANKS_BLOCK_SIZE
 * bytes, after a flush that closes the window due at this step. */
static PyObject *py_ranks_pack(PyObject *Py_UNUSED(m), PyObject *arg)
{
    PyObject *out;
    long rank = PyLong_AsLong(arg);
    int rc;

    if (rank == -1 && PyErr_Occurred())
        return NULL;
    if ((out = PyBytes_FromStringAndSize(NULL, PROF_RANKS_BLOCK_SIZE)) == NULL)
        return NULL;
    Py_BEGIN_ALLOW_THREADS
    rc = prof_ranks_pack(PyBytes_AS_STRING(out), PROF_RANKS_BLOCK_SIZE, (int)rank);
    Py_END_ALLOW_THREADS
    log_drain();
    if (rc < 0) {
        Py_DECREF(out);
        return PyErr_Format(PyExc_OSError, "prof_ranks_pack: %s", strerror(-rc));
    }
    return out;
}

/* The blocks of every rank, laid end to end: a bytes-like object whose
 * length is a multiple of PROF_RANKS_BLOCK_SIZE. */
static int blocks_arg(PyObject *obj, Py_buffer *view, size_t *nranks)
{
    if (PyObject_GetBuffer(obj, view, PyBUF_SIMPLE) < 0)
        return -1;
    if (view->len == 0 || view->len % PROF_RANKS_BLOCK_SIZE != 0) {
        PyErr_Format(PyExc_ValueError, "prof: %zd bytes are not whole blocks of %d bytes",
                     view->len, PROF_RANKS_BLOCK_SIZE);
        PyBuffer_Release(view);
        return -1;
    }
    *nranks = (size_t)view->len / PROF_RANKS_BLOCK_SIZE;
    return 0;
}

/* _ranks_format(blocks, format='text') -> str: the cross-rank table. */
static PyObject *py_ranks_format(PyObject *Py_UNUSED(m), PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"blocks", "format", NULL};
    const char *fmt = "text";
    PyObject *obj, *out = NULL;
    Py_buffer view;
    size_t nranks;
    char *buf;
    int n, format;

    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|s:_ranks_format", kwlist, &obj, &fmt))
        return NULL;
    if (strcmp(fmt, "text") == 0)
        format = PROF_FORMAT_TEXT;
    else if (strcmp(fmt, "json") == 0)
        format = PROF_FORMAT_JSON;
    else
        return PyErr_Format(PyExc_ValueError, "format must be 'text' or 'json', not '%s'", fmt);
    if (blocks_arg(obj, &view, &nranks) < 0)
        return NULL;
    n = prof_ranks_format(view.buf, nranks, format, NULL, 0);
    if (n >= 0 && (buf = PyMem_Malloc((size_t)n + 1)) != NULL) {
        n = prof_ranks_format(view.buf, nranks, format, buf, (size_t)n + 1);
        if (n >= 0)
            out = PyUnicode_DecodeUTF8(buf, n, "replace");
        PyMem_Free(buf);
    } else if (n >= 0) {
        PyErr_NoMemory();
    }
    if (n < 0)
        PyErr_Format(PyExc_OSError, "prof_ranks_format: %s", strerror(-n));
    PyBuffer_Release(&view);
    return out;
}

/* _ranks_emit(blocks): print the table where the summaries go. */
static PyObject *py_ranks_emit(PyObject *Py_UNUSED(m), PyObject *obj)
{
    Py_buffer view;
    size_t nranks;
    int rc;

    if (blocks_arg(obj, &view, &nranks) < 0)
        return NULL;
    Py_BEGIN_ALLOW_THREADS
    rc = prof_ranks_emit(view.buf, nranks);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    log_drain();
    if (rc < 0)
        return PyErr_Format(PyExc_OSError, "prof_ranks_emit: %s", strerror(-rc));
    Py_RETURN_NONE;
}

static PyObject *py_ranks_abandon(PyObject *Py_UNUSED(m), PyObject *arg)
{
    const char *why = PyUnicode_AsUTF8(arg);

    if (why == NULL)
        return NULL;
    prof_ranks_abandon(why);
    Py_RETURN_NONE;
}

static PyMethodDef module_methods[] = {
    {"zone", py_zone, METH_O,
     "zone(name) -> Zone\n\nA named stage, usable as `with prof.zone(name):` and as a "
     "decorator `@prof.zone(name)`."},
    {"cuda_zone", (PyCFunction)(void (*)(void))py_cuda_zone, METH_VARARGS | METH_KEYWORDS,
     "cuda_zone(name, stream=None) -> context manager timing the GPU work enqueued on "
     "stream (a torch.cuda.Stream, an int CUstream handle, or None for the default "
     "stream)."},
    {"step", py_step, METH_NOARGS, "Mark an iteration boundary; returns the step count."},
    {"counter", (PyCFunction)(void (*)(void))py_counter, METH_FASTCALL,
     "counter(name, value): record a value on a counter track."},
    {"mark", py_mark, METH_O, "mark(name): an instant event."},
    {"flush", py_flush, METH_NOARGS,
     "Wait until every zone ended so far is counted. Returns False when recording "
     "never started."},
    {"reset", py_reset, METH_NOARGS, "Forget every statistic and counter."},
    {"enable", (PyCFunction)(void (*)(void))py_enable, METH_VARARGS | METH_KEYWORDS,
     "enable(on=True) -> bool: switch recording on or off (PROF=0 in the environment "
     "wins). Returns whether recording is on now."},
    {"enabled", py_enabled, METH_NOARGS, "Whether zones are being recorded."},
    {"shutdown", py_shutdown, METH_NOARGS,
     "Final summary, close the trace, stop the collector (also done at exit)."},
    {"thread_name", py_thread_name, METH_O, "thread_name(name): name this thread."},
    {"stats", (PyCFunction)(void (*)(void))py_stats, METH_VARARGS | METH_KEYWORDS,
     "stats(name=None) -> {stage: {count, total_ms, self_ms, avg_ms, min_ms, max_ms, "
     "p50_ms, p95_ms, p99_ms, wall_share, parent, depth, gpu}} in summary order, or "
     "one stage's dict."},
    {"counters", py_counters, METH_NOARGS,
     "counters() -> {name: {count, last, min, max, avg}}"},
    {"summary", (PyCFunction)(void (*)(void))py_summary, METH_VARARGS | METH_KEYWORDS,
     "summary(format='text') -> str: the whole-run table ('text') or one JSON object "
     "('json')."},
    {"runtime_version", py_runtime_version, METH_NOARGS, "The loaded runtime's version."},
    {"_library_path", py_library_path, METH_NOARGS, "Path of the loaded libprof."},
    {"_null_track", py_null_track, METH_O,
     "_null_track(name) -> the shared no-op context manager (disabled ProfilingContext)."},
    {"_set_log_sink", py_set_log_sink, METH_O, NULL},
    {"_drain_log", py_drain_log, METH_NOARGS, NULL},
    {"_set_special_wrapper", py_set_special_wrapper, METH_O, NULL},
    {"_debug_state", py_debug_state, METH_NOARGS, NULL},
    {"window_stats", (PyCFunction)(void (*)(void))py_window_stats, METH_VARARGS | METH_KEYWORDS,
     "window_stats(name=None) -> the last window a periodic summary showed "
     "(PROF_SUMMARY_EVERY), as stats() gives the whole run: {stage: {...}}, {} before the "
     "first window; or one stage's dict."},
    {"window_step", py_window_step, METH_NOARGS,
     "window_step() -> the step count at which the window of window_stats() closed, or "
     "None."},
    {"step_count", py_step_count, METH_NOARGS, "Steps counted so far, without stepping."},
    {"_ranks_start", py_ranks_start, METH_NOARGS, NULL},
    {"_ranks_pack", py_ranks_pack, METH_O, NULL},
    {"_ranks_format", (PyCFunction)(void (*)(void))py_ranks_format, METH_VARARGS | METH_KEYWORDS,
     NULL},
    {"_ranks_emit", py_ranks_emit, METH_O, NULL},
    {"_ranks_abandon", py_ranks_abandon, METH_O, NULL},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "prof._prof",
    .m_doc = "The C half of prof: zones, steps, counters and results on the shared runtime.",
    .m_size = -1,
    .m_methods = module_methods,
};

PyMODINIT_FUNC PyInit__prof(void);

PyMODINIT_FUNC PyInit__prof(void)
{
    PyObject *m, *functools;
    static int once;

    if (PyType_Ready(&Zone_Type) < 0 || PyType_Ready(&ZoneWrapper_Type) < 0 ||
        PyType_Ready(&NullCtx_Type) < 0 || PyType_Ready(&CudaZone_Type) < 0)
        return NULL;
    if (!once) {
        if (pthread_key_create(&stack_key, stack_free) != 0)
            return PyErr_NoMemory();
        pthread_atfork(NULL, NULL, log_atfork_child);
        once = 1;
    }
    functools = PyImport_ImportModule("functools");
    if (functools == NULL)
        return NULL;
    Py_XSETREF(update_wrapper, PyObject_GetAttrString(functools, "update_wrapper"));
    Py_DECREF(functools);
    if (update_wrapper == NULL)
        return NULL;
    if (zone_cache == NULL && (zone_cache = PyDict_New()) == NULL)
        return NULL;
    if (null_ctx == NULL && (null_ctx = PyObject_CallNoArgs((PyObject *)&NullCtx_Type)) == NULL)
        return NULL;

    m = PyModule_Create(&module_def);
    if (m == NULL)
        return NULL;
    if (PyModule_AddObjectRef(m, "Zone", (PyObject *)&Zone_Type) < 0 ||
        PyModule_AddObjectRef(m, "ZoneWrapper", (PyObject *)&ZoneWrapper_Type) < 0 ||
        PyModule_AddObjectRef(m, "CudaZone", (PyObject *)&CudaZone_Type) < 0 ||
        PyModule_AddObjectRef(m, "_nullctx", (PyObject *)&NullCtx_Type) < 0 ||
        PyModule_AddObjectRef(m, "_NULL", null_ctx) < 0 ||
        PyModule_AddStringConstant(m, "__version__", PROF_VERSION_STRING) < 0 ||
        PyModule_AddIntConstant(m, "NAME_MAX_BYTES", NAME_MAX_BYTES) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
