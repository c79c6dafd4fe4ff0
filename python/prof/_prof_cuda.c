/*
 * _prof_cuda.c - prof.cuda_zone(name, stream): the CudaZone context
 * manager, GPU time of the work enqueued on a CUDA stream.
 *
 * Unlike Zone, a CudaZone is made per use (it holds the open zone and the
 * stream it times), so it carries its own state instead of a per-thread
 * stack: one `with` block at a time, ended on the thread that began it.
 * The runtime does the CUDA work (src/capture/cuda.c: pooled events, polled by the
 * collector); this file only turns a torch stream or an int handle into a
 * CUstream and keeps the Python-side checks.
 */
#include "_prof_common.h"

#include <string.h>

typedef struct {
    PyObject_HEAD
    const char *name;
    PyObject *pyname;
    void *stream;
    prof_cuda_zone z;
    pthread_t thread;
    int active;
} CudaZoneObject;

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

PyTypeObject CudaZone_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "prof.CudaZone",
    .tp_basicsize = sizeof(CudaZoneObject),
    .tp_dealloc = (destructor)CudaZone_dealloc,
    .tp_repr = (reprfunc)CudaZone_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "GPU time of the work enqueued on a CUDA stream; made by prof.cuda_zone().",
    .tp_methods = CudaZone_methods,
};

PyObject *py_cuda_zone(PyObject *Py_UNUSED(m), PyObject *args, PyObject *kwargs)
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
