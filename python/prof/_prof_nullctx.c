/*
 * _prof_nullctx.c - the no-op context manager (and decorator): what a
 * disabled ProfilingContext's track() returns, one shared instance
 * (prof._prof._NULL). It is in C so that a disabled tracker costs only the
 * `with` protocol itself, which also makes it the Python benchmark's
 * baseline for that cost (bench/python_overhead.py).
 */
#include "_prof_common.h"

typedef struct {
    PyObject_HEAD
} NullCtxObject;

PyObject *null_ctx;           /* the shared instance */

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

PyTypeObject NullCtx_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "prof._prof._nullctx",
    .tp_basicsize = sizeof(NullCtxObject),
    .tp_call = NullCtx_call,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A context manager (and decorator) that does nothing, in C.",
    .tp_methods = NullCtx_methods,
    .tp_new = NullCtx_new,
};

PyObject *py_null_track(PyObject *Py_UNUSED(m), PyObject *name)
{
    if (UNLIKELY(!PyUnicode_Check(name))) {
        PyErr_Format(PyExc_TypeError, "prof: zone name must be a str, not %.100s",
                     Py_TYPE(name)->tp_name);
        return NULL;
    }
    return Py_NewRef(null_ctx);
}
