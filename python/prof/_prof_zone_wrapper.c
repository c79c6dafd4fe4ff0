/*
 * _prof_zone_wrapper.c - @prof.zone(name): Zone's call, which wraps a
 * function in a ZoneWrapper (functools.update_wrapper'd), whose call
 * begins a zone, calls the function and ends the zone; the prof_zone lives
 * on the C stack, so recursion and threads need nothing else. Generator
 * and coroutine functions go to prof/__init__.py's wrapper (the zone then
 * spans the iteration or the await). _prof_zone.c has the design.
 */
#include "_prof_zone_stack.h"

#include <string.h>

static PyObject *special_wrapper;  /* prof._wrap_special, set by __init__ */
static PyObject *update_wrapper;   /* functools.update_wrapper */

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *func;
    ZoneObject *zone;
    const char *name;     /* zone->name: one load fewer per call */
    PyObject *dict;
    PyObject *weakrefs;
} ZoneWrapperObject;

/* A decorated call whose context is not the last one here: on the
 * context's stack like a `with` block, placed by the slow path. */
static __attribute__((noinline)) PyObject *
ZoneWrapper_call_slow(ZoneWrapperObject *self, PyObject *const *args, size_t nargsf,
                      PyObject *kwnames)
{
    PyObject *r, *type, *value, *tb;

    if (zone_open_slow(self->zone) < 0)
        return NULL;
    r = PyObject_Vectorcall(self->func, args, nargsf, kwnames);
    if (r == NULL) {
        PyErr_Fetch(&type, &value, &tb);
        zone_close(self->zone);
        PyErr_Restore(type, value, tb);
        return NULL;
    }
    if (UNLIKELY(zone_close(self->zone) < 0))
        Py_CLEAR(r);
    return r;
}

/* Call func as PyObject_Vectorcall would, less its thread-state lookup
 * and its check of the result against the error state: the interpreter's
 * call of the wrapper checks the wrapper's result the same way. A Python
 * function's vectorcall is never NULL (CPython's own calls of it would
 * fail); any other callable's is read as the protocol lays it out
 * (PyVectorcall_Function is out of line before 3.12). */
static inline PyObject *call_func(PyObject *func, PyObject *const *args, size_t nargsf,
                                  PyObject *kwnames)
{
    PyTypeObject *type = Py_TYPE(func);
    vectorcallfunc call;

    if (LIKELY(type == &PyFunction_Type))
        return ((PyFunctionObject *)func)->vectorcall(func, args, nargsf, kwnames);
    if ((type->tp_flags & Py_TPFLAGS_HAVE_VECTORCALL) &&
        (call = *(vectorcallfunc *)((char *)func + type->tp_vectorcall_offset)) != NULL)
        return call(func, args, nargsf, kwnames);
    return PyObject_Vectorcall(func, args, nargsf, kwnames);
}

/* A decorated call in the context of the last Python zone here: the
 * thread's nesting is already its, and the call's zone ends before the
 * context can change, so it opens and closes like a C zone. Python zones
 * see it as one: inside it they nest in it, and a task made inside it
 * starts there (stack_lookup). Only what the end needs is kept across the
 * call: the zone, and the thread's mark, restored after it whole (one
 * 16-byte copy each way), so that the nesting the last Python zone left
 * is what it was before, and, when other contexts' zones ran inside the
 * call (an event loop run by it), this context's is the last one here
 * again. A cache entry such zones left cannot hit again: coming back
 * here moved the thread state's context version past it. */
static inline __attribute__((always_inline)) PyObject *
wrapper_call_here(ZoneWrapperObject *self, thread_py *tp, uint32_t lane, PyObject *const *args,
                  size_t nargsf, PyObject *kwnames)
{
    mark_copy mark;
    prof_zone z = prof_zone_begin_inline_(self->name);
    PyObject *r;

    memcpy(&mark, &tp->mark, sizeof mark);
    r = call_func(self->func, args, nargsf, kwnames);
    if (lane != 0)
        prof_zone_end_lane_(&z, lane);
    else
        prof_zone_end_inline_(&z);
    memcpy(&tp->mark, &mark, sizeof mark);
    return r;
}

/* The decorated call the fast path below does not take: a task's (its
 * zones go in a lane), or another context's than the last zone's here. */
static __attribute__((noinline)) PyObject *
ZoneWrapper_call_other(ZoneWrapperObject *self, PyObject *const *args, size_t nargsf,
                       PyObject *kwnames)
{
    thread_py *tp = tls_py;

    if (cache_hit(tp, tstate_now()))
        return wrapper_call_here(self, tp, tp->stack->lane, args, nargsf, kwnames);
    return ZoneWrapper_call_slow(self, args, nargsf, kwnames);
}

static PyObject *ZoneWrapper_vectorcall(ZoneWrapperObject *self, PyObject *const *args,
                                        size_t nargsf, PyObject *kwnames)
{
    thread_py *tp = tls_py;
    PyThreadState *ts;

    if (UNLIKELY((ts = tstate_now())->context != tp->ctx) ||
        UNLIKELY(ts->context_ver != tp->deco_ver) || UNLIKELY(ts->id != tp->ts_id))
        return ZoneWrapper_call_other(self, args, nargsf, kwnames);
    return wrapper_call_here(self, tp, 0, args, nargsf, kwnames);
}

/* Zone(func): the decorator (Zone_Type's call). */
PyObject *Zone_call(ZoneObject *self, PyObject *args, PyObject *kwargs)
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
    w->name = self->name;
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

/* Module set-up: the type, and functools.update_wrapper. */
int zone_wrapper_init(void)
{
    PyObject *functools;

    if (PyType_Ready(&ZoneWrapper_Type) < 0)
        return -1;
    functools = PyImport_ImportModule("functools");
    if (functools == NULL)
        return -1;
    Py_XSETREF(update_wrapper, PyObject_GetAttrString(functools, "update_wrapper"));
    Py_DECREF(functools);
    return update_wrapper == NULL ? -1 : 0;
}
