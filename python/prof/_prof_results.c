/*
 * _prof_results.c - the runtime's numbers as Python objects: prof.stats()
 * and prof.counters() as dicts of dicts, prof.summary() as a str, and the
 * last periodic window (prof.window_stats(), prof.window_step()).
 *
 * Each call flushes first (here, or inside the runtime call), so every
 * zone ended before it is counted, and drains the summaries waiting for Python's logging (_prof_log.c). The
 * runtime's list calls fill a caller's array and say how many items there
 * are; the array is grown and the call retried when the table grew in
 * between (other threads keep recording). Flushing and listing run with
 * the GIL released: they wait on the collector, which never needs it.
 */
#include "_prof_common.h"

#include <errno.h>
#include <string.h>

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
        set_item(d, "gpu", PyBool_FromLong((st->flags & PROF_STAGE_GPU) != 0)) < 0 ||
        set_item(d, "lossy", PyBool_FromLong((st->flags & PROF_STAGE_LOSSY) != 0)) < 0 ||
        /* Sampled on-CPU time of the self time, None where not measured
         * (PROF_CPU=0, GPU stages). */
        set_item(d, "cpu_ms", (st->flags & PROF_STAGE_CPU)
                                  ? PyFloat_FromDouble((double)st->cpu_ns / 1e6)
                                  : Py_NewRef(Py_None)) < 0 ||
        /* The rise of the process's peak RSS while it ran, sampled with
         * cpu_ms (None where that is not measured). */
        set_item(d, "peak_rise_bytes", (st->flags & PROF_STAGE_CPU)
                                           ? PyLong_FromUnsignedLongLong(st->peak_rise_bytes)
                                           : Py_NewRef(Py_None)) < 0) {
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
PyObject *py_stats(PyObject *Py_UNUSED(m), PyObject *args, PyObject *kwargs)
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

PyObject *py_counters(PyObject *Py_UNUSED(m), PyObject *Py_UNUSED(ignored))
{
    return list_dict(sizeof(prof_counter_stats), list_counters, counter_dict,
                     "prof_counter_stats_list");
}

PyObject *py_summary(PyObject *Py_UNUSED(m), PyObject *args, PyObject *kwargs)
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

/* ------------------------------------------------------------------------ */
/* The last window: what the last periodic summary showed                    */

static int list_window(void *out, size_t cap)
{
    int n = prof_window_stats_list(out, cap, NULL);

    /* No window has closed yet: an empty dict, as stats() before any zone. */
    return n == -ENOENT ? 0 : n;
}

/* prof.window_stats() -> {name: {...}} of the last window a periodic
 * summary showed; prof.window_stats(name) -> one stage, KeyError when that
 * window does not list it. */
PyObject *py_window_stats(PyObject *Py_UNUSED(m), PyObject *args, PyObject *kwargs)
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
PyObject *py_window_step(PyObject *Py_UNUSED(m), PyObject *Py_UNUSED(ignored))
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
