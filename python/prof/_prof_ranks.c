/*
 * _prof_ranks.c - the pieces prof/distributed.py builds its live
 * cross-rank summary from: _ranks_start, _ranks_pack, _ranks_format,
 * _ranks_emit and _ranks_abandon, thin wrappers of the runtime's
 * prof_ranks_* calls (src/ranks.c).
 *
 * The gather itself is Python's (torch.distributed, on the training thread
 * at a step): libprof never links a communicator. So the C side only packs
 * this rank's last window into a fixed-size block, and formats or emits
 * the table from every rank's blocks laid end to end.
 */
#include "_prof.h"

#include <string.h>

/* _ranks_start() -> (rc, every_steps, timeout_seconds): rc 0 or -errno. */
PyObject *py_ranks_start(PyObject *Py_UNUSED(m), PyObject *Py_UNUSED(ignored))
{
    uint64_t every = 0, timeout = 0;
    int rc = prof_ranks_start(&every, &timeout);

    return Py_BuildValue("(iKd)", rc, (unsigned long long)every, (double)timeout / 1e9);
}

/* _ranks_pack(rank) -> bytes: this rank's last window, PROF_RANKS_BLOCK_SIZE
 * bytes, after a flush that closes the window due at this step. */
PyObject *py_ranks_pack(PyObject *Py_UNUSED(m), PyObject *arg)
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
PyObject *py_ranks_format(PyObject *Py_UNUSED(m), PyObject *args, PyObject *kwargs)
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
PyObject *py_ranks_emit(PyObject *Py_UNUSED(m), PyObject *obj)
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

PyObject *py_ranks_abandon(PyObject *Py_UNUSED(m), PyObject *arg)
{
    const char *why = PyUnicode_AsUTF8(arg);

    if (why == NULL)
        return NULL;
    prof_ranks_abandon(why);
    Py_RETURN_NONE;
}
