/*
 * _prof.c - the Python binding of prof, on the shared runtime (libprof):
 * where the module prof._prof is made, and the calls that switch and steer
 * the runtime as a whole (enable, flush, reset, shutdown, versions).
 *
 * The module is built from one file per part, sharing _prof_common.h:
 *
 *   _prof_zone.c     Zone (`with` and decorator), its __enter__ and
 *                    __exit__; the design of Python zones
 *   _prof_zone_stack.c  the per-context stacks of open `with` zones, each
 *                    thread's state, a zone's open and end on them (the
 *                    fast paths inline in _prof_zone_stack.h): the hot path
 *   _prof_zone_wrapper.c  @prof.zone: ZoneWrapper
 *   _prof_names.c    name checks, interning, the Zone cache; prof.zone()
 *   _prof_nullctx.c  the no-op context manager of a disabled
 *                    ProfilingContext
 *   _prof_cuda.c     prof.cuda_zone() and its CudaZone type
 *   _prof_events.c   steps, counters, marks, thread names
 *   _prof_results.c  stats(), counters(), summary(), window_stats()
 *   _prof_log.c      summaries routed to Python's logging
 *   _prof_ranks.c    the C half of prof.distributed
 *
 * The other files hand their module functions, types and shared objects
 * to this one through _prof_common.h; the method table and PyInit__prof
 * stay here, so the module's whole surface and its init order read in one
 * place. Calls go one way: this file uses the parts, no part uses it.
 *
 * Threads and the GIL: the module is only entered with the GIL held, which
 * serialises the name cache and the per-thread stacks' owners. The runtime
 * never needs the GIL: its collector thread calls back into this module
 * only for summaries routed to Python logging, and that callback copies the
 * text under a plain mutex (_prof_log.c). Calls that wait on the collector
 * release the GIL while they wait.
 */
#include "_prof_common.h"

#include <dlfcn.h>

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

/* _signal_chain(sig): see prof_signal_chain_ (sigchain.c); the module calls it
 * in DataLoader workers once PyTorch has set their signal handlers. */
static PyObject *py_signal_chain(PyObject *self, PyObject *arg)
{
    long sig = PyLong_AsLong(arg);

    (void)self;
    if (sig == -1 && PyErr_Occurred())
        return NULL;
    return PyLong_FromLong(prof_signal_chain_((int)sig));
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
     "p50_ms, p95_ms, p99_ms, wall_share, parent, depth, gpu, lossy, cpu_ms}} in summary "
     "order, or "
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
    {"_signal_chain", py_signal_chain, METH_O, NULL},
    {"_drain_log", py_drain_log, METH_NOARGS, NULL},
    {"_skip_final_summary", py_skip_final_summary, METH_NOARGS, NULL},
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
    {"_ranks_snapshot", py_ranks_snapshot, METH_O, NULL},
    {"_ranks_contribute", py_ranks_contribute, METH_VARARGS, NULL},
    {"_ranks_result", py_ranks_result, METH_VARARGS, NULL},
    {"_ranks_combine", py_ranks_combine, METH_VARARGS, NULL},
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
    PyObject *m;
    static int once;

    if (zone_type_init() < 0 || zone_wrapper_init() < 0 ||
        PyType_Ready(&NullCtx_Type) < 0 || PyType_Ready(&CudaZone_Type) < 0 ||
        zone_stacks_init() < 0)
        return NULL;
    if (!once) {
        pthread_atfork(NULL, NULL, log_atfork_child);
        once = 1;
    }
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
