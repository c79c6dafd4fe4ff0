/*
 * _prof_events.c - what Python records besides zones: steps, counter
 * values, instant marks, and the current thread's name.
 *
 * Each is one call into the runtime after the argument checks; names go
 * through the Zone cache (_prof_names.c) so a counter or mark converts its
 * name once, like a zone. prof.step() is also the usual place where
 * summaries waiting for Python's logging are handed over (_prof_log.c), so
 * it tests log_pending itself rather than pay for a call every step.
 */
#include "_prof_common.h"

#include <errno.h>
#include <string.h>

PyObject *py_step(PyObject *Py_UNUSED(m), PyObject *Py_UNUSED(ignored))
{
    uint64_t n = prof_step();

    if (UNLIKELY(__atomic_load_n(&log_pending, __ATOMIC_RELAXED)))
        log_drain();
    return PyLong_FromUnsignedLongLong(n);
}

PyObject *py_step_count(PyObject *Py_UNUSED(m), PyObject *Py_UNUSED(ignored))
{
    return PyLong_FromUnsignedLongLong(prof_step_count());
}

PyObject *py_counter(PyObject *Py_UNUSED(m), PyObject *const *args, Py_ssize_t nargs)
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

PyObject *py_mark(PyObject *Py_UNUSED(m), PyObject *arg)
{
    const char *name = name_for(arg);

    if (name == NULL)
        return NULL;
    prof_mark(name);
    Py_RETURN_NONE;
}

PyObject *py_thread_name(PyObject *Py_UNUSED(m), PyObject *arg)
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
