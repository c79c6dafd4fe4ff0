/*
 * _prof_ranks.c - the pieces prof/distributed.py builds its live
 * cross-rank summary from: thin wrappers of the runtime's prof_ranks_*
 * calls (src/output/ranks.c, ranks_table.c), which own the layout, the
 * combine and the table.
 *
 * The reduction itself is Python's (torch.distributed, on the training
 * thread at a step): libprof never links a communicator. A window's state
 * lives in a bytearray of PROF_RANKS_STATE_SIZE bytes (its buffer is
 * allocated by the Python allocator: aligned for the int64 words), and
 * each round's contribution in another, which torch reduces in place.
 */
#include "_prof_common.h"
#include <prof_ranks.h>

#include <string.h>

/* _ranks_start() -> (rc, every_steps, timeout_seconds): rc 0 or -errno. */
PyObject *py_ranks_start(PyObject *Py_UNUSED(m), PyObject *Py_UNUSED(ignored))
{
    uint64_t every = 0, timeout = 0;
    int rc = prof_ranks_start(&every, &timeout);

    return Py_BuildValue("(iKd)", rc, (unsigned long long)every, (double)timeout / 1e9);
}

static PyObject *os_error(const char *what, int rc)
{
    return PyErr_Format(PyExc_OSError, "%s: %s", what, strerror(-rc));
}

/* A writable buffer of at least size bytes, 8-byte aligned. */
static int buffer_arg(PyObject *obj, Py_buffer *view, size_t size, int writable)
{
    if (PyObject_GetBuffer(obj, view, writable ? PyBUF_WRITABLE : PyBUF_SIMPLE) < 0)
        return -1;
    if ((size_t)view->len < size || ((uintptr_t)view->buf % 8) != 0) {
        PyErr_Format(PyExc_ValueError, "prof: a buffer of %zd bytes is not a cross-rank state "
                     "or round (%zu bytes, 8-byte aligned)", view->len, size);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

/* _ranks_snapshot(rank) -> bytearray: this rank's last window, after a
 * flush that closes the window due at this step. */
PyObject *py_ranks_snapshot(PyObject *Py_UNUSED(m), PyObject *arg)
{
    PyObject *out;
    long rank = PyLong_AsLong(arg);
    int rc;

    if (rank == -1 && PyErr_Occurred())
        return NULL;
    if ((out = PyByteArray_FromStringAndSize(NULL, PROF_RANKS_STATE_SIZE)) == NULL)
        return NULL;
    if (((uintptr_t)PyByteArray_AS_STRING(out) % 8) != 0) {
        Py_DECREF(out);
        return PyErr_Format(PyExc_MemoryError, "prof: unaligned bytearray");
    }
    Py_BEGIN_ALLOW_THREADS
    rc = prof_ranks_snapshot(PyByteArray_AS_STRING(out), PROF_RANKS_STATE_SIZE, (int)rank);
    Py_END_ALLOW_THREADS
    log_drain();
    if (rc < 0) {
        Py_DECREF(out);
        return os_error("prof_ranks_snapshot", rc);
    }
    return out;
}

/* _ranks_contribute(state, round) -> (bytearray, (n_min, n_max, n_sum)):
 * this rank's contribution to round, and its parts in int64 words. */
PyObject *py_ranks_contribute(PyObject *Py_UNUSED(m), PyObject *args)
{
    PyObject *st, *out;
    Py_buffer view;
    size_t parts[3];
    int round, n;

    if (!PyArg_ParseTuple(args, "Oi:_ranks_contribute", &st, &round))
        return NULL;
    if (buffer_arg(st, &view, PROF_RANKS_STATE_SIZE, 1) < 0)
        return NULL;
    if ((out = PyByteArray_FromStringAndSize(NULL, PROF_RANKS_BUF_SIZE)) == NULL) {
        PyBuffer_Release(&view);
        return NULL;
    }
    n = prof_ranks_contribute(view.buf, round, PyByteArray_AS_STRING(out), PROF_RANKS_BUF_SIZE,
                              parts);
    PyBuffer_Release(&view);
    if (n < 0 || PyByteArray_Resize(out, n) < 0) {
        Py_DECREF(out);
        return n < 0 ? os_error("prof_ranks_contribute", n) : NULL;
    }
    return Py_BuildValue("(N(nnn))", out, (Py_ssize_t)parts[0], (Py_ssize_t)parts[1],
                         (Py_ssize_t)parts[2]);
}

/* _ranks_result(state, round, combined) -> None; OSError(EPROTO) when some
 * rank sent another layout (the state then formats as such). */
PyObject *py_ranks_result(PyObject *Py_UNUSED(m), PyObject *args)
{
    PyObject *st, *buf;
    Py_buffer sv, bv;
    int round, rc;

    if (!PyArg_ParseTuple(args, "OiO:_ranks_result", &st, &round, &buf))
        return NULL;
    if (buffer_arg(st, &sv, PROF_RANKS_STATE_SIZE, 1) < 0)
        return NULL;
    if (buffer_arg(buf, &bv, 8, 0) < 0) {
        PyBuffer_Release(&sv);
        return NULL;
    }
    rc = prof_ranks_result(sv.buf, round, bv.buf, (size_t)bv.len);
    PyBuffer_Release(&bv);
    PyBuffer_Release(&sv);
    if (rc < 0)
        return os_error("prof_ranks_result", rc);
    Py_RETURN_NONE;
}

/* _ranks_combine(inout, in) -> None: the element-wise op, for tests and
 * for transports without MIN/MAX/SUM. */
PyObject *py_ranks_combine(PyObject *Py_UNUSED(m), PyObject *args)
{
    PyObject *a, *b;
    Py_buffer av, bv;
    int rc;

    if (!PyArg_ParseTuple(args, "OO:_ranks_combine", &a, &b))
        return NULL;
    if (buffer_arg(a, &av, 8, 1) < 0)
        return NULL;
    if (buffer_arg(b, &bv, (size_t)av.len, 0) < 0) {
        PyBuffer_Release(&av);
        return NULL;
    }
    rc = prof_ranks_combine(av.buf, bv.buf, (size_t)av.len);
    PyBuffer_Release(&bv);
    PyBuffer_Release(&av);
    if (rc < 0)
        return os_error("prof_ranks_combine", rc);
    Py_RETURN_NONE;
}

/* _ranks_format(state, format='text') -> str: the cross-rank table. */
PyObject *py_ranks_format(PyObject *Py_UNUSED(m), PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"state", "format", NULL};
    const char *fmt = "text";
    PyObject *obj, *out = NULL;
    Py_buffer view;
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
    if (buffer_arg(obj, &view, PROF_RANKS_STATE_SIZE, 0) < 0)
        return NULL;
    n = prof_ranks_format(view.buf, format, NULL, 0);
    if (n >= 0 && (buf = PyMem_Malloc((size_t)n + 1)) != NULL) {
        n = prof_ranks_format(view.buf, format, buf, (size_t)n + 1);
        if (n >= 0)
            out = PyUnicode_DecodeUTF8(buf, n, "replace");
        PyMem_Free(buf);
    } else if (n >= 0) {
        PyErr_NoMemory();
    }
    if (n < 0)
        os_error("prof_ranks_format", n);
    PyBuffer_Release(&view);
    return out;
}

/* _ranks_emit(state): print the table where the summaries go. */
PyObject *py_ranks_emit(PyObject *Py_UNUSED(m), PyObject *obj)
{
    Py_buffer view;
    int rc;

    if (buffer_arg(obj, &view, PROF_RANKS_STATE_SIZE, 0) < 0)
        return NULL;
    Py_BEGIN_ALLOW_THREADS
    rc = prof_ranks_emit(view.buf);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    log_drain();
    if (rc < 0)
        return os_error("prof_ranks_emit", rc);
    Py_RETURN_NONE;
}

PyObject *py_ranks_abandon(PyObject *Py_UNUSED(m), PyObject *arg)
{
    const char *why = PyUnicode_AsUTF8(arg);

    if (why == NULL)
        return NULL;
    prof_ranks_abandon(why);
    log_drain();
    Py_RETURN_NONE;
}
