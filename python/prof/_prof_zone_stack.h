/*
 * _prof_zone_stack.h - the per-context stacks of open `with` zones and each
 * thread's cached state (_prof_zone_stack.c): the types, and a zone's open
 * and end on them as fast paths, inline in Zone.__enter__ and __exit__
 * (_prof_zone.c) and in the decorator (_prof_zone_wrapper.c); what they
 * leave out is in _prof_zone_stack.c. _prof_zone.c has the design.
 */
#ifndef PROF_PYTHON_ZONE_STACK_H
#define PROF_PYTHON_ZONE_STACK_H

#include "_prof_common.h"

/* ------------------------------------------------------------------------ */
/* Open `with` zones, per context                                            */

/* Where a thread's nesting stands: the level and the path hash of its
 * innermost open zone (prof_thread_::depth's level and ::path). */
typedef struct {
    uint32_t depth, path;
} nest;

#define NEST_NONE UINT32_MAX   /* depth of a nest not known: no level has it */

typedef struct {
    const char *key;     /* the interned name: identifies the Zone */
    prof_zone z;
    nest in;             /* the nesting inside the zone; kept only for a zone
                            the runtime did not place (entry_in) */
} open_zone;

/* The open zones of one contextvars context: an asyncio task, a callback,
 * a thread's own context. Found from the context through a ContextVar,
 * and owned by it: a task's copy of its creator's context finds the
 * creator's stack there, sees that it is not its own (ctx differs) and
 * makes its own, whose zones start where the creator's innermost zone
 * was. */
typedef struct ContextStack {
    PyObject_HEAD
    PyObject *ctx;                      /* the context it belongs to */
    struct prof_thread_ *thread;        /* the thread whose levels base names */
    nest base;                          /* where its first zone opens */
    uint64_t id;                        /* unique: a new stack at a freed
                                           one's address is another stack */
    uint32_t lane;                      /* its zones' lane (0: the thread's) */
    uint32_t holes;                     /* a zone under the top ended first
                                           (a generator's) since it was last
                                           empty */
    size_t n, cap;
    open_zone *v;
    struct ContextStack *prev, *next;   /* every live stack */
} ContextStack;

/* Per thread: the context of the last Python zone begun or ended here, as
 * long as it is still the current one (a cache keyed the way CPython keys
 * its own ContextVar cache: the context and its version), the nesting
 * that zone left on the thread, and the nesting below the Python zones
 * (C zones around an event loop).
 *
 * The cache is the fast path's whole test: while it holds, the thread's
 * nesting is this context's (or C zones opened inside it since), as in a
 * program without tasks, and a zone opens and closes with nothing to
 * switch. Whatever makes another context's zone the last one here (a task
 * switch, a generator resumed in another task) goes through the slow path,
 * which sets it again (cache_set). */
typedef struct {
    nest set;                           /* left by the last Python zone here
                                           (depth NEST_NONE: not known) */
    uint64_t last;                      /* id of the stack of the last
                                           Python zone opened or ended here */
} zone_mark;

/* A zone_mark as one SSE register: the compiler copies the struct as two
 * 8-byte words, kept in a register and a stack slot across the call. */
typedef long long mark_copy __attribute__((vector_size(16)));
_Static_assert(sizeof(mark_copy) == sizeof(zone_mark), "a zone_mark is 16 bytes");

typedef struct {
    PyObject *ctx;                      /* compared only, never dereferenced */
    uint64_t ctx_ver;                   /* CTX_VER_NONE: nothing cached */
    uint64_t deco_ver;                  /* ctx_ver when the stack's lane is 0,
                                           else CTX_VER_NONE: the decorator's
                                           fast path (lane 0 only) tests the
                                           lane in the same compare */
    ContextStack *stack;                /* borrowed: ctx holds it */
    uint64_t ts_id;                     /* the thread state ctx was current in */
    zone_mark mark;                     /* one 16-byte copy: what a decorated
                                           call keeps across the call */
    nest floor;                         /* below the Python zones */
    int has_base;                       /* a stack of lane 0 was made here */
} thread_py;

/* No context has this version: a thread's counter starts at 0 and goes up
 * by one per context switch or variable set. */
#define CTX_VER_NONE UINT64_MAX

/* initial-exec: one %fs-relative load instead of a __tls_get_addr call per
 * access. A dlopen'd module may use a few bytes of static TLS (glibc keeps
 * a surplus for exactly this); a pointer is all we take. */
#define TLS_IE __attribute__((tls_model("initial-exec")))
/* The calling thread's state (no_thread_py in _prof_zone_stack.c until it
 * has one, whose cache never hits, so the fast paths test the cache alone,
 * not the pointer first). Only _prof_zone_stack.c writes it: the thread's
 * state made, or freed at the thread's exit. */
extern __thread thread_py *tls_py TLS_IE;
/* The runtime's per-thread pointer, read by the inline fast path: the same
 * treatment (libprof declares it as one pointer for this reason). */
extern __thread struct prof_thread_ *prof_thread_self_ TLS_IE;

static inline struct prof_thread_ *self_thread(void)
{
    return prof_thread_self_;
}

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
/* Called per zone and per decorated call: through the GOT, not the PLT
 * (one jump fewer). */
#  if PY_VERSION_HEX >= 0x030D0000
PyAPI_FUNC(PyThreadState *) PyThreadState_GetUnchecked(void) __attribute__((noplt));
#  else
PyAPI_FUNC(PyThreadState *) _PyThreadState_UncheckedGet(void) __attribute__((noplt));
#  endif
#endif

/* The calling thread's Python state, without the NULL test of
 * PyThreadState_Get (a zone runs with the GIL held). */
static inline PyThreadState *tstate_now(void)
{
#if PY_VERSION_HEX >= 0x030D0000
    return PyThreadState_GetUnchecked();
#else
    return _PyThreadState_UncheckedGet();
#endif
}

static inline uint32_t thread_depth(const struct prof_thread_ *t)
{
    return __atomic_load_n(&t->depth, __ATOMIC_RELAXED) & PROF_DEPTH_LEVEL_;
}

static inline nest thread_nest(const struct prof_thread_ *t)
{
    nest n = {thread_depth(t), __atomic_load_n(&t->path, __ATOMIC_RELAXED)};

    return n;
}

static inline int nest_eq(nest a, nest b)
{
    return a.depth == b.depth && a.path == b.path;
}

/* Whether z was begun by this thread: its slot, and the slot's generation
 * (a slot freed by an exited thread is reused by a later one). */
static inline int begun_here(const prof_zone *z, const struct prof_thread_ *t)
{
    return t != NULL && ((uintptr_t)z->thread & ~(uintptr_t)1) == (uintptr_t)t &&
           z->gen == (uint16_t)(__atomic_load_n(&t->depth, __ATOMIC_RELAXED) >>
                                PROF_DEPTH_GEN_SHIFT_);
}

/* Whether the runtime placed z in its thread's nesting (begun while
 * recording, not refused). The nesting inside such a zone follows from the
 * zone, so opening it stores nothing more. */
static inline int zone_placed(const prof_zone *z)
{
    return z->start != 0 && ((uintptr_t)z->thread & ~(uintptr_t)1) != 0;
}

static inline nest entry_in(const open_zone *e)
{
    if (LIKELY(zone_placed(&e->z))) {
        nest n = {((uint32_t)e->z.depth + 1) & PROF_DEPTH_LEVEL_,
                  prof_path_mix_(e->z.parent, e->z.name)};
        return n;
    }
    return e->in;
}

/* Where a zone opened now in stack s goes: inside its innermost zone, or
 * at its base. */
static inline nest stack_top(const ContextStack *s)
{
    return s->n > 0 ? entry_in(&s->v[s->n - 1]) : s->base;
}

/* Whether the thread's nesting is what the last Python zone left (else C
 * zones have opened since, or a decorated call's zone, and Python zones
 * nest inside them). */
static inline int python_owns_state(const thread_py *tp, const struct prof_thread_ *t)
{
    return nest_eq(thread_nest(t), tp->mark.set);
}

/* The fast paths' test: whether the current context is the one of the
 * last Python zone here (its stack is then tp->stack). The thread state's
 * id is part of the key: a C thread that enters Python through
 * PyGILState_Ensure (ctypes and pybind11 callbacks, C libraries' threads)
 * gets a new thread state each time, whose context version starts again
 * from 1 and whose context is often allocated where the last one was
 * freed; on (context, version) alone its first zone used the freed stack
 * (tests/python/test_embedded.py). Ids are never reused. */
static inline int cache_hit(const thread_py *tp, const PyThreadState *ts)
{
    return ts->context == tp->ctx && ts->context_ver == tp->ctx_ver && ts->id == tp->ts_id;
}

/* ------------------------------------------------------------------------ */
/* A zone's open and end: the fast paths                                     */

/* The zone e did not get a place in the thread's nesting (recording off,
 * refused): it keeps where it would be, for zones opened inside it. */
void entry_unplaced(thread_py *tp, ContextStack *s, open_zone *e);
/* Everything a zone open does that zone_open() does not: a first zone on
 * this thread or in this context, a task switch, a full stack. 0, or -1
 * with an exception set. */
int zone_open_slow(ZoneObject *self);
/* Everything a zone end does that zone_close() does not: a task's zone
 * (a lane), a task switch, ends out of order. 0, or -1 with an exception
 * set. */
int zone_close_slow(ZoneObject *self);

/* Push a zone on stack s, whose context's zone was the last on this
 * thread: the thread's nesting is already the context's. */
static inline __attribute__((always_inline)) void open_here(thread_py *tp, ContextStack *s,
                                                            ZoneObject *self)
{
    open_zone *e = &s->v[s->n++];

    e->key = self->name;
    e->z = prof_zone_begin_inline_(self->name);
    if (LIKELY(zone_placed(&e->z)))
        tp->mark.set = entry_in(e);
    else
        entry_unplaced(tp, s, e);
}

/* Inlined into Zone.__enter__: with the context of the last Python zone
 * here still current, a push and the runtime's inline begin. */
static inline __attribute__((always_inline)) int zone_open(ZoneObject *self)
{
    thread_py *tp = tls_py;

    if (LIKELY(cache_hit(tp, tstate_now()))) {
        ContextStack *s = tp->stack;

        if (LIKELY(s->n != s->cap)) {
            open_here(tp, s, self);
            return 0;
        }
    }
    return zone_open_slow(self);
}

/* The nesting the thread has now, as left by a Python zone's end. */
static inline void set_from_thread(thread_py *tp)
{
    struct prof_thread_ *t = self_thread();

    if (LIKELY(t != NULL))
        tp->mark.set = thread_nest(t);
}

/* Inlined into Zone.__exit__: the innermost zone of the context of the last
 * Python zone here, outside tasks and generators' out-of-order ends, is a
 * pop and the runtime's inline end. */
static inline __attribute__((always_inline)) int zone_close(ZoneObject *self)
{
    thread_py *tp = tls_py;

    if (LIKELY(cache_hit(tp, tstate_now()))) {
        ContextStack *s = tp->stack;

        if (LIKELY(s->n != 0) && LIKELY(s->v[s->n - 1].key == self->name) &&
            LIKELY((s->lane | s->holes) == 0)) {
            prof_zone z = s->v[--s->n].z;

            prof_zone_end_inline_(&z);
            set_from_thread(tp);
            return 0;
        }
    }
    return zone_close_slow(self);
}

#endif /* PROF_PYTHON_ZONE_STACK_H */
