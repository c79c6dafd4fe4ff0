/*
 * _prof_zone.c - Python zones: the Zone type (context manager and
 * decorator), the ZoneWrapper it makes of a decorated function, and the
 * per-thread stack of open `with` zones.
 *
 * Everything a Python zone costs is here, so the design is about the
 * context-manager protocol:
 *
 *   prof.zone(name)   returns the Zone object for name. Zone objects are
 *                     cached per name string (one dict lookup), and each
 *                     holds the name interned once with prof_intern(), so a
 *                     `with prof.zone("x"):` converts nothing per use
 *                     (_prof_names.c).
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
 * B's end would then set it back to 1 forever. So every end checks the
 * thread's depth first (one load, in prof.h's inline fast path) and, when
 * the zone is not the innermost, the runtime (src/zone.c) records it but
 * keeps the inner zones' depth, remembering the freed slot in a per-thread
 * bit mask; when the inner zones end, the depth falls through the freed
 * slots. The records themselves are always exact (start, end,
 * name, parent); only later zones' placement in the tree depends on this.
 *
 * The stack and everything that touches it stay in this file: tls_stack
 * is static here, so Zone.__enter__ and __exit__ read it with one TLS load
 * and no other file can change it behind their back.
 *
 * Thread-local storage: one pointer (this module is dlopen'd).
 */
#include "_prof.h"

#include <stdlib.h>
#include <string.h>

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
pthread_key_t stack_key;            /* frees a thread's stack at its exit */

void stack_free(void *p)
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
/* Zone: context manager and decorator                                       */

static PyObject *special_wrapper;  /* prof._wrap_special, set by __init__ */
PyObject *update_wrapper;          /* functools.update_wrapper */

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

PyTypeObject Zone_Type = {
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

PyTypeObject ZoneWrapper_Type = {
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

PyObject *py_set_special_wrapper(PyObject *Py_UNUSED(m), PyObject *fn)
{
    Py_XSETREF(special_wrapper, fn == Py_None ? NULL : Py_NewRef(fn));
    Py_RETURN_NONE;
}

/* For tests: this thread's open Python zones and the runtime's depth. */
PyObject *py_debug_state(PyObject *Py_UNUSED(m), PyObject *Py_UNUSED(ignored))
{
    zone_stack *s = tls_stack;
    uint32_t depth, dead;
    int repair;

    prof_thread_nesting_(&depth, &dead, &repair);
    return Py_BuildValue("{s:n,s:l,s:K,s:l}", "open", (Py_ssize_t)(s ? s->n : 0), "depth",
                         prof_thread_self_ != NULL ? (long)depth : -1L, "dead",
                         (unsigned long long)dead, "dead_pending", (long)repair);
}
