/*
 * _prof_common.h - what the files of the extension prof._prof share.
 *
 * The extension is one module built from several files, each owning one
 * part (_prof.c lists them). This header is private to them: nothing in it
 * is installed, and the extension is built with hidden visibility, so the
 * names below never leave _prof*.so. Every file includes it first (or a
 * header of its part that does), because Python.h must come before any
 * system header. It belongs to no part: _prof.c uses the parts, and no
 * part uses _prof.c.
 *
 * Everything declared here is used only with the GIL held, which is what
 * serialises it; log_pending is the one exception (the collector thread
 * raises it, see _prof_log.c).
 */
#ifndef PROF_PYTHON_PROF_COMMON_H
#define PROF_PYTHON_PROF_COMMON_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <pthread.h>
#include <stdint.h>

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

/* ------------------------------------------------------------------------ */
/* Zones (_prof_zone*.c) and their names (_prof_names.c)                     */

typedef struct {
    PyObject_HEAD
    const char *name;    /* interned by the runtime: lives forever */
    PyObject *pyname;    /* the str it came from */
    PyObject *bound[2];  /* its __enter__ and __exit__, bound once, made on
                            first use (_prof_zone.c); NULL until then */
} ZoneObject;

extern PyTypeObject Zone_Type;         /* _prof_zone.c */
extern PyTypeObject ZoneWrapper_Type;  /* _prof_zone_wrapper.c */
extern PyObject *zone_cache;       /* str -> Zone; made by PyInit__prof */
/* Module set-up, each 0 or -1 with an exception set: Zone_Type with its
 * __enter__ and __exit__; ZoneWrapper_Type and functools.update_wrapper;
 * the ContextVar behind the per-context stacks of open zones and the key
 * that frees a thread's zone state at its exit. */
int zone_type_init(void);
int zone_wrapper_init(void);
int zone_stacks_init(void);
/* Zone(func), the decorator (_prof_zone_wrapper.c): Zone_Type's call. */
PyObject *Zone_call(ZoneObject *self, PyObject *args, PyObject *kwargs);

/* The interned name for a zone, counter or mark name (the Zone cache's),
 * or NULL with an exception set. */
const char *name_for(PyObject *name);

/* ------------------------------------------------------------------------ */
/* The no-op context manager (_prof_nullctx.c) and CUDA zones (_prof_cuda.c) */

extern PyTypeObject NullCtx_Type;
extern PyObject *null_ctx;         /* the shared instance; made by PyInit__prof */
extern PyTypeObject CudaZone_Type;

/* ------------------------------------------------------------------------ */
/* Summaries routed to Python's logging (_prof_log.c)                        */

/* 1 when summaries may wait in the queue: prof.step() tests it before
 * paying for a call (written by the collector thread, hence atomics). */
extern int log_pending;
/* Hand every queued summary to the sink. GIL held. */
void log_drain(void);
/* pthread_atfork child handler, registered once by PyInit__prof. */
void log_atfork_child(void);

/* ------------------------------------------------------------------------ */
/* Module functions, listed in _prof.c's method table                        */

/* _prof_names.c */
PyObject *py_zone(PyObject *m, PyObject *name);
/* _prof_zone_wrapper.c */
PyObject *py_set_special_wrapper(PyObject *m, PyObject *fn);
/* _prof_zone_stack.c */
PyObject *py_debug_state(PyObject *m, PyObject *ignored);
/* _prof_nullctx.c */
PyObject *py_null_track(PyObject *m, PyObject *name);
/* _prof_cuda.c */
PyObject *py_cuda_zone(PyObject *m, PyObject *args, PyObject *kwargs);
/* _prof_log.c */
PyObject *py_set_log_sink(PyObject *m, PyObject *sink);
PyObject *py_drain_log(PyObject *m, PyObject *ignored);
PyObject *py_skip_final_summary(PyObject *m, PyObject *ignored);
/* _prof_events.c */
PyObject *py_step(PyObject *m, PyObject *ignored);
PyObject *py_step_count(PyObject *m, PyObject *ignored);
PyObject *py_counter(PyObject *m, PyObject *const *args, Py_ssize_t nargs);
PyObject *py_mark(PyObject *m, PyObject *arg);
PyObject *py_thread_name(PyObject *m, PyObject *arg);
/* _prof_results.c */
PyObject *py_stats(PyObject *m, PyObject *args, PyObject *kwargs);
PyObject *py_counters(PyObject *m, PyObject *ignored);
PyObject *py_summary(PyObject *m, PyObject *args, PyObject *kwargs);
PyObject *py_window_stats(PyObject *m, PyObject *args, PyObject *kwargs);
PyObject *py_window_step(PyObject *m, PyObject *ignored);
/* _prof_ranks.c */
PyObject *py_ranks_start(PyObject *m, PyObject *ignored);
PyObject *py_ranks_snapshot(PyObject *m, PyObject *arg);
PyObject *py_ranks_contribute(PyObject *m, PyObject *args);
PyObject *py_ranks_result(PyObject *m, PyObject *args);
PyObject *py_ranks_combine(PyObject *m, PyObject *args);
PyObject *py_ranks_format(PyObject *m, PyObject *args, PyObject *kwargs);
PyObject *py_ranks_emit(PyObject *m, PyObject *obj);
PyObject *py_ranks_abandon(PyObject *m, PyObject *arg);

#endif /* PROF_PYTHON_PROF_COMMON_H */
