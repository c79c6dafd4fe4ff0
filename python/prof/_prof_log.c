/*
 * _prof_log.c - summaries routed to Python's logging (prof.log_to_logging()
 * or PROF_SUMMARY=logging, through _set_log_sink): a queue between the
 * collector thread, which formats summaries and must never wait for the
 * GIL, and the Python threads that hand them to the sink.
 *
 * The collector thread formats a periodic or final summary and calls
 * log_handler, which must not take the GIL (the collector never waits on
 * Python). It copies the text into this queue under log_mu and raises
 * log_pending; the next prof.step(), flush(), summary(), stats() or
 * shutdown() on a Python thread drains the queue into the sink.
 *
 * The queue is bounded (LOG_PENDING_MAX): a program that never steps or
 * flushes loses the oldest summaries, and the next drain says how many.
 */
#include "_prof_common.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Summaries waiting for Python's logging when nobody calls prof.step(). */
#define LOG_PENDING_MAX 64

typedef struct log_item {
    struct log_item *next;
    int kind;
    size_t len;
    char text[];
} log_item;

static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
static log_item *log_head, *log_tail;
static int log_count;
static uint64_t log_lost;
int log_pending;                 /* 1 when the queue may be non-empty */
static PyObject *log_sink;       /* callable(text, kind) or NULL */

static void log_handler(void *user, const char *text, int kind)
{
    size_t len = strlen(text);
    log_item *it = malloc(sizeof(*it) + len + 1), *old = NULL;

    (void)user;
    pthread_mutex_lock(&log_mu);
    if (it == NULL) {
        log_lost++;
    } else {
        it->next = NULL;
        it->kind = kind;
        it->len = len;
        memcpy(it->text, text, len + 1);
        if (log_tail != NULL)
            log_tail->next = it;
        else
            log_head = it;
        log_tail = it;
        if (++log_count > LOG_PENDING_MAX) {
            old = log_head;
            log_head = old->next;
            log_count--;
            log_lost++;
        }
    }
    pthread_mutex_unlock(&log_mu);
    free(old);
    /* Release: a reader that sees the flag finds the item under the lock. */
    __atomic_store_n(&log_pending, 1, __ATOMIC_RELEASE);
}

void log_atfork_child(void)
{
    /* The parent's collector may have held the lock at fork; the child owns
     * no pending summaries of its own yet. */
    pthread_mutex_init(&log_mu, NULL);
    log_head = log_tail = NULL;
    log_count = 0;
    log_lost = 0;
    log_pending = 0;
}

/* Emit every queued summary to the sink. GIL held. Errors raised by the
 * sink are reported as unraisable: a logging failure never breaks a step. */
void log_drain(void)
{
    log_item *it, *next;
    uint64_t lost;
    PyObject *r;

    if (!__atomic_load_n(&log_pending, __ATOMIC_ACQUIRE))
        return;
    pthread_mutex_lock(&log_mu);
    it = log_head;
    log_head = log_tail = NULL;
    log_count = 0;
    lost = log_lost;
    log_lost = 0;
    __atomic_store_n(&log_pending, 0, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&log_mu);

    if (lost != 0 && log_sink != NULL) {
        PyObject *msg = PyUnicode_FromFormat(
            "prof: %llu summaries were not logged (more than %d waited for a "
            "prof.step() or prof.flush() call)",
            (unsigned long long)lost, LOG_PENDING_MAX);
        if (msg != NULL) {
            r = PyObject_CallFunction(log_sink, "Os", msg, "lost");
            Py_DECREF(msg);
            if (r == NULL)
                PyErr_WriteUnraisable(log_sink);
            Py_XDECREF(r);
        } else {
            PyErr_Clear();
        }
    }
    for (; it != NULL; it = next) {
        next = it->next;
        if (log_sink != NULL) {
            PyObject *text = PyUnicode_DecodeUTF8(it->text, (Py_ssize_t)it->len, "replace");
            if (text != NULL) {
                r = PyObject_CallFunction(log_sink, "Os", text,
                                          it->kind == PROF_SUMMARY_FINAL ? "final" : "periodic");
                Py_DECREF(text);
                if (r == NULL)
                    PyErr_WriteUnraisable(log_sink);
                Py_XDECREF(r);
            } else {
                PyErr_WriteUnraisable(NULL);
            }
        }
        free(it);
    }
}

PyObject *py_set_log_sink(PyObject *Py_UNUSED(m), PyObject *sink)
{
    if (sink != Py_None && !PyCallable_Check(sink)) {
        PyErr_SetString(PyExc_TypeError, "prof._set_log_sink: expected a callable or None");
        return NULL;
    }
    if (sink == Py_None) {
        prof_set_summary_handler(NULL, NULL);
        log_drain();    /* what was already formatted still goes to the old sink */
        Py_CLEAR(log_sink);
    } else {
        Py_XSETREF(log_sink, Py_NewRef(sink));
        prof_set_summary_handler(log_handler, NULL);
    }
    Py_RETURN_NONE;
}

/* The runtime's final summary would repeat the one the program printed
 * itself (__init__.py's _final_is_repeat): it is dropped; anything else
 * (a periodic summary still queued) goes to stderr, where PROF_SUMMARY
 * unset sends it, which is the only case this handler is used in. */
static void skip_final_handler(void *user, const char *text, int kind)
{
    size_t len = strlen(text), off = 0;

    (void)user;
    if (kind == PROF_SUMMARY_FINAL)
        return;
    while (off < len) {
        ssize_t n = write(STDERR_FILENO, text + off, len - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return;
        off += (size_t)n;
    }
}

PyObject *py_skip_final_summary(PyObject *Py_UNUSED(m), PyObject *Py_UNUSED(ignored))
{
    prof_set_summary_handler(skip_final_handler, NULL);
    Py_RETURN_NONE;
}

PyObject *py_drain_log(PyObject *Py_UNUSED(m), PyObject *Py_UNUSED(ignored))
{
    log_drain();
    Py_RETURN_NONE;
}
