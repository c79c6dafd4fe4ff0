/*
 * _prof_zone.c - Python zones: the Zone type (context manager and
 * decorator), the ZoneWrapper it makes of a decorated function, and the
 * per-thread stack of open `with` zones.
 *
 * Everything a Python zone costs is here, so the design is about the
 * context-manager protocol:
 *
 *   prof.zone(name)   returns the Zone object for name. Zone objects are
 *                     cached per name string (one dict lookup), and each
 *                     holds the name interned once with prof_intern(), so a
 *                     `with prof.zone("x"):` converts nothing per use
 *                     (_prof_names.c).
 *   Zone.__enter__    begins a zone with the header's inline fast path and
 *                     pushes it on the stack of open zones of the current
 *                     contextvars context (an asyncio task's, or the
 *                     thread's own).
 *   Zone.__exit__     pops it (normally the top entry) and ends it.
 *   Zone(func)        decorator: a C wrapper whose call begins a zone, calls
 *                     func and ends the zone; the prof_zone lives on the C
 *                     stack, so recursion and threads need nothing else.
 *
 * The fast path. Each thread caches the context of its last Python zone
 * (the context object and its version, the key CPython's own ContextVar
 * cache uses). While that context is the current one, nothing has to
 * switch: enter is a push and the runtime's inline begin, exit a pop and
 * its inline end, and a decorated call a begin and an end around the call,
 * as in a program without tasks; the asyncio work (placing a task's zone
 * where the task was, lanes, generators' out-of-order ends) is in the
 * *_slow functions, taken only when the context changed or the top entry
 * is not the zone that ends. __enter__ and __exit__ are handed out bound
 * once per Zone (ZoneSpecial), so a `with` block makes no method objects.
 *
 * One Zone object serves every use of its name: nested (recursion), on
 * several threads, and from generators or coroutines that suspend inside a
 * `with` block. That is why the open zones live on per-context stacks
 * keyed by the interned name rather than in the object.
 *
 * Nesting repair. The runtime keeps one nesting depth per thread and a zone
 * end restores it to the depth of the zone that ends, which assumes zones
 * end in LIFO order. C blocks guarantee that; Python does not: two asyncio
 * tasks (or two generators) on one thread can open A, then B, then close A
 * before B. Ending A naively would set the depth to 0 while B is open, and
 * B's end would then set it back to 1 forever. So every end checks the
 * thread's depth first (one load, in the inline fast path, prof_impl.h) and, when
 * the zone is not the innermost, the runtime (src/capture/zone.c) records it but
 * keeps the inner zones' depth, remembering the freed slot in a per-thread
 * bit mask; when the inner zones end, the depth falls through the freed
 * slots. The records themselves are always exact (start, end,
 * name, parent); only later zones' placement in the tree depends on this.
 *
 * The stacks and everything that touches them stay in this file: tls_py
 * is static here, so Zone.__enter__ and __exit__ read it with one TLS load
 * and no other file can change it behind their back.
 *
 * Thread-local storage: one pointer (this module is dlopen'd).
 */
#include "_prof.h"

#include <stdlib.h>
#include <string.h>

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

static PyTypeObject ContextStack_Type;
static ContextStack *all_stacks;
static uint64_t stacks_made;

/* Lanes (prof_impl.h): a stack made for a context derived from another one (a
 * task, a callback) records its zones in a lane of its own, so that the
 * runtime sums their children, and the trace draws them, apart from other
 * tasks'. Lane 0 is the thread's own context. In use: a bit each. */
static uint64_t lanes_used[(PROF_LANES_MAX_ + 64) / 64];

static uint32_t lane_take(void)
{
    for (uint32_t w = 0; w < sizeof lanes_used / sizeof lanes_used[0]; w++) {
        if (~lanes_used[w] == 0)
            continue;
        uint32_t b = (uint32_t)__builtin_ctzll(~lanes_used[w]), lane = w * 64 + b;
        if (lane == 0 || lane > PROF_LANES_MAX_) {
            if (lane == 0) {
                lanes_used[0] |= 1;   /* never handed out */
                return lane_take();
            }
            break;
        }
        lanes_used[w] |= (uint64_t)1 << b;
        return lane;
    }
    prof_lane_shared_();   /* counted, said once */
    return 0;   /* all in use: the thread's nesting (placement may mix) */
}

static void lane_give(uint32_t lane)
{
    if (lane != 0)
        lanes_used[lane / 64] &= ~((uint64_t)1 << (lane % 64));
}

/* Zones still open when their context went away (a thread that exited
 * inside a `with` block, a task dropped unfinished): kept, up to a bound,
 * so that an end on another thread still reaches the runtime, which
 * refuses and counts it. */
#define ORPHANS_MAX 1024
static open_zone orphans[ORPHANS_MAX];
static size_t orphans_n;
static PyObject *stack_var;             /* the ContextVar */

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
/* A thread with no state yet points at no_thread_py, whose cache never
 * hits (no context has version CTX_VER_NONE), so the fast paths test the
 * cache alone, not the pointer first. */
static thread_py no_thread_py = {.ctx_ver = CTX_VER_NONE, .deco_ver = CTX_VER_NONE,
                                 .mark = {.set = {.depth = NEST_NONE}}};
static __thread thread_py *tls_py TLS_IE = &no_thread_py;
/* The runtime's per-thread pointer, read by the inline fast path: the same
 * treatment (libprof declares it as one pointer for this reason). */
extern __thread struct prof_thread_ *prof_thread_self_ TLS_IE;
pthread_key_t stack_key;            /* frees a thread's state at its exit */

void stack_free(void *p)
{
    if (tls_py == p)
        tls_py = &no_thread_py;   /* a later destructor may still run Python */
    free(p);
}

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

static int ContextStack_traverse(ContextStack *self, visitproc visit, void *arg)
{
    Py_VISIT(self->ctx);
    return 0;
}

static int ContextStack_clear(ContextStack *self)
{
    Py_CLEAR(self->ctx);
    return 0;
}

static void ContextStack_dealloc(ContextStack *self)
{
    PyObject_GC_UnTrack(self);
    if (self->prev != NULL)
        self->prev->next = self->next;
    else if (all_stacks == self)
        all_stacks = self->next;
    if (self->next != NULL)
        self->next->prev = self->prev;
    for (size_t i = 0; i < self->n; i++) {
        if (self->v[i].z.start == 0)
            continue;
        if (orphans_n == ORPHANS_MAX) {
            memmove(&orphans[0], &orphans[1], (ORPHANS_MAX - 1) * sizeof orphans[0]);
            orphans_n--;
        }
        orphans[orphans_n++] = self->v[i];
    }
    lane_give(self->lane);
    ContextStack_clear(self);
    free(self->v);
    PyObject_GC_Del(self);
}

static PyTypeObject ContextStack_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "prof._ContextStack",
    .tp_basicsize = sizeof(ContextStack),
    .tp_dealloc = (destructor)ContextStack_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_traverse = (traverseproc)ContextStack_traverse,
    .tp_clear = (inquiry)ContextStack_clear,
};

static thread_py *thread_py_get(void)
{
    thread_py *tp = tls_py;

    if (LIKELY(tp != &no_thread_py))
        return tp;
    tp = calloc(1, sizeof *tp);
    if (tp == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    tp->ctx_ver = tp->deco_ver = CTX_VER_NONE;
    tp->mark.set.depth = NEST_NONE;
    tls_py = tp;
    pthread_setspecific(stack_key, tp);
    return tp;
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

/* After a slow path in context stack s (ts's current context): cache it
 * when its zone is now the last one here. */
static void cache_set(thread_py *tp, const PyThreadState *ts, ContextStack *s)
{
    if (s->id == tp->mark.last) {
        tp->ctx = ts->context;
        tp->ctx_ver = ts->context_ver;
        tp->ts_id = ts->id;
        tp->deco_ver = s->lane == 0 ? tp->ctx_ver : CTX_VER_NONE;
        tp->stack = s;
    } else {
        tp->ctx_ver = tp->deco_ver = CTX_VER_NONE;
    }
}

/* The current context's stack, made on first use. */
static ContextStack *stack_lookup(thread_py *tp, PyThreadState *ts)
{
    PyObject *v = NULL, *token;
    ContextStack *s, *parent;
    struct prof_thread_ *t = self_thread();

    if (ts->context == NULL) {
        /* No context yet (nothing has used contextvars on this thread):
         * setting a variable makes the thread's context. */
        if ((token = PyContextVar_Set(stack_var, Py_None)) == NULL)
            return NULL;
        Py_DECREF(token);
    }
    if (PyContextVar_Get(stack_var, NULL, &v) < 0)
        return NULL;
    if (v == Py_None)
        Py_CLEAR(v);
    parent = (ContextStack *)v;
    if (parent != NULL && parent->ctx == ts->context) {
        Py_DECREF(v);
        return parent;
    }
    s = PyObject_GC_New(ContextStack, &ContextStack_Type);
    if (s == NULL) {
        Py_XDECREF(v);
        return NULL;
    }
    s->ctx = Py_NewRef(ts->context);
    s->thread = t;
    /* The thread's first context keeps the thread's own nesting; every
     * later one (tasks, callbacks) gets a lane. */
    s->holes = 0;
    s->id = ++stacks_made;
    s->lane = tp->has_base ? lane_take() : 0;
    tp->has_base = 1;
    s->n = 0;
    s->cap = 8;
    s->v = malloc(s->cap * sizeof *s->v);
    s->prev = NULL;
    s->next = all_stacks;
    if (all_stacks != NULL)
        all_stacks->prev = s;
    all_stacks = s;
    if (parent != NULL && parent->thread == t && t != NULL) {
        /* Made where its creator is: inside whatever the creator has open
         * on this thread now (a decorated call's zone, C zones) when the
         * creator's zone was the last here, else inside its innermost. */
        s->base = parent->id == tp->mark.last ? thread_nest(t) : stack_top(parent);
    } else if (t != NULL && python_owns_state(tp, t)) {
        s->base = tp->floor;
    } else if (t != NULL) {
        s->base = thread_nest(t);
    } else {
        s->base.depth = 0;
        s->base.path = PROF_PATH_ROOT_;
    }
    PyObject_GC_Track(s);
    Py_XDECREF(v);
    if (s->v == NULL) {
        Py_DECREF(s);
        PyErr_NoMemory();
        return NULL;
    }
    token = PyContextVar_Set(stack_var, (PyObject *)s);
    Py_DECREF(s);          /* the context holds it now */
    if (token == NULL)
        return NULL;
    Py_DECREF(token);
    return s;
}

static int stack_grow(ContextStack *s)
{
    open_zone *v = realloc(s->v, 2 * s->cap * sizeof(*v));

    if (v == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    s->v = v;
    s->cap *= 2;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Zone: context manager and decorator                                       */

static PyObject *special_wrapper;  /* prof._wrap_special, set by __init__ */
PyObject *update_wrapper;          /* functools.update_wrapper */

/* The zone e did not get a place in the thread's nesting (recording off,
 * refused): it keeps where it would be, for zones opened inside it. */
static __attribute__((noinline)) void entry_unplaced(thread_py *tp, ContextStack *s,
                                                     open_zone *e)
{
    struct prof_thread_ *t = self_thread();

    if (t != NULL) {
        e->in = tp->mark.set = thread_nest(t);
    } else {
        s->n--;
        e->in = stack_top(s);
        s->n++;
    }
}

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

/* Open a zone in stack s when another context's zone was the last on
 * this thread (or none was): the thread's nesting becomes this context's
 * first. */
static void zone_open_switch(ZoneObject *self, thread_py *tp, ContextStack *s)
{
    struct prof_thread_ *t = self_thread();
    nest at = stack_top(s);

    if (t != NULL) {
        if (!python_owns_state(tp, t)) {
            /* C zones own the thread's nesting: Python's nest inside. */
            tp->floor = thread_nest(t);
            if (s->n == 0 && s->thread == t)
                s->base = tp->floor;
            at = tp->floor;
        } else if (UNLIKELY(!nest_eq(tp->mark.set, at))) {
            /* Another task's zone was the last: take up this one's. */
            prof_zone_resume_(at.depth, at.path);
        }
    }
    if (s->thread == NULL)
        s->thread = t;
    tp->mark.last = s->id;
    open_here(tp, s, self);
}

/* Everything a zone open does that the fast path below does not: a first
 * zone on this thread or in this context, a task switch, a full stack. */
static __attribute__((noinline)) int zone_open_slow(ZoneObject *self)
{
    thread_py *tp = thread_py_get();
    PyThreadState *ts = tstate_now();
    ContextStack *s;

    if (tp == NULL || (s = stack_lookup(tp, ts)) == NULL)
        return -1;
    if (s->n == s->cap && stack_grow(s) < 0)
        return -1;
    if (s->id != tp->mark.last)
        zone_open_switch(self, tp, s);
    else
        open_here(tp, s, self);
    cache_set(tp, ts, s);
    return 0;
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

/* Inlined into ZoneBound_enter and ZoneBound_exit, which call these per
 * block (a call fewer each). */
static inline __attribute__((always_inline)) PyObject *
Zone_enter(ZoneObject *self, PyObject *Py_UNUSED(ignored))
{
    if (UNLIKELY(zone_open(self) < 0))
        return NULL;
    return Py_NewRef((PyObject *)self);
}

/* The nesting the thread has now, as left by a Python zone's end. */
static inline void set_from_thread(thread_py *tp)
{
    struct prof_thread_ *t = self_thread();

    if (LIKELY(t != NULL))
        tp->mark.set = thread_nest(t);
}

/* End the zone of entry i of stack s, begun on this thread. */
static void end_own(thread_py *tp, ContextStack *s, size_t i)
{
    open_zone e = s->v[i];
    struct prof_thread_ *t = self_thread();
    nest at;

    if (UNLIKELY(i + 1 != s->n)) {
        memmove(&s->v[i], &s->v[i + 1], (s->n - i - 1) * sizeof(*s->v));
        s->holes = 1;
    }
    s->n--;
    if (s->n == 0)
        s->holes = 0;
    if (e.z.start != 0 && begun_here(&e.z, t)) {
        /* Make it the innermost zone of the thread, whatever other tasks
         * opened meanwhile: their zones are not inside this one. */
        nest in = entry_in(&e);
        if (!nest_eq(thread_nest(t), in))
            prof_zone_resume_(in.depth, in.path);
        if (s->lane != 0)
            prof_zone_end_lane_(&e.z, s->lane);
        else
            prof_zone_end_inline_(&e.z);
        /* Out of order within the context (generators): the thread goes
         * on inside the context's innermost zone still open. */
        at = stack_top(s);
        if (!nest_eq(thread_nest(t), at))
            prof_zone_resume_(at.depth, at.path);
        tp->mark.set = at;
        tp->mark.last = s->id;
        return;
    }
    /* Begun while off, or on a thread this context ran on before. */
    prof_zone_end_inline_(&e.z);
}

/* End the innermost zone of stack s, whose context's zone was the last
 * here, when s is a task's (a lane) or a zone under the top ended first:
 * what the fast path leaves out. */
static void close_top(thread_py *tp, ContextStack *s)
{
    prof_zone z = s->v[--s->n].z;
    int on = z.start != 0;   /* the end clears it */

    if (s->lane != 0)
        prof_zone_end_lane_(&z, s->lane);
    else
        prof_zone_end_inline_(&z);
    /* Where the context goes on: inside its innermost zone still open
     * (which is where this zone began, unless a generator's zone under it
     * ended first). */
    if (UNLIKELY(s->holes)) {
        nest at = stack_top(s);
        if (self_thread() != NULL && on && (at.depth != z.depth || at.path != z.parent))
            prof_zone_resume_(at.depth, at.path);
        s->holes = s->n != 0;
    }
    set_from_thread(tp);
}

/* An end on another thread than the zone's: the runtime refuses it,
 * counts it with the dropped records and frees the level on the thread
 * that began it; the caller learns of it as for prof.cuda_zone. */
static int refuse(ZoneObject *self, prof_zone *z)
{
    prof_zone_end_inline_(z);
    PyErr_Format(PyExc_RuntimeError,
                 "prof.zone(%R) ended on another thread than the one that began it: refused "
                 "and counted (a zone must end on the thread that began it)", self->pyname);
    return -1;
}

/* An end whose zone is not the innermost of the current context. */
static int zone_close_search(ZoneObject *self, thread_py *tp, ContextStack *s)
{
    size_t i;
    prof_zone z;

    /* Not the innermost open zone of this context: a generator that
     * suspended inside this block resumed after inner blocks opened. */
    for (i = s->n; i-- > 0;) {
        if (s->v[i].key == self->name) {
            end_own(tp, s, i);
            return 0;
        }
    }
    /* Begun in another context: on this thread (a generator resumed in
     * another task), or on another thread, whose zone the runtime refuses
     * and counts, giving the level back to the thread that began it. */
    for (ContextStack *o = all_stacks; o != NULL; o = o->next) {
        for (i = o->n; i-- > 0;) {
            if (o->v[i].key != self->name)
                continue;
            z = o->v[i].z;
            if (z.start == 0 || begun_here(&z, self_thread())) {
                end_own(tp, o, i);
                return 0;
            }
            if (i + 1 != o->n)
                o->holes = 1;
            memmove(&o->v[i], &o->v[i + 1], (o->n - i - 1) * sizeof(*o->v));
            o->n--;
            return refuse(self, &z);
        }
    }
    for (i = orphans_n; i-- > 0;) {
        if (orphans[i].key != self->name)
            continue;
        z = orphans[i].z;
        memmove(&orphans[i], &orphans[i + 1], (orphans_n - i - 1) * sizeof orphans[0]);
        orphans_n--;
        return refuse(self, &z);
    }
    PyErr_Format(PyExc_RuntimeError,
                 "prof.zone(%R).__exit__() without a matching __enter__() (a zone must end on "
                 "the thread that began it)", self->pyname);
    return -1;
}

/* Everything a zone end does that the fast path below does not: a task's
 * zone (a lane), a task switch, ends out of order. */
static __attribute__((noinline)) int zone_close_slow(ZoneObject *self)
{
    thread_py *tp = thread_py_get();
    PyThreadState *ts = tstate_now();
    ContextStack *s;
    int r = 0;

    if (tp == NULL || (s = stack_lookup(tp, ts)) == NULL)
        return -1;
    if (s->n != 0 && s->v[s->n - 1].key == self->name) {
        if (s->id == tp->mark.last)
            close_top(tp, s);
        else
            end_own(tp, s, s->n - 1);   /* another context's zone was the last */
    } else {
        r = zone_close_search(self, tp, s);
    }
    cache_set(tp, ts, s);
    return r;
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

static inline __attribute__((always_inline)) PyObject *
Zone_exit(ZoneObject *self, PyObject *const *Py_UNUSED(args), Py_ssize_t Py_UNUSED(nargs))
{
    if (UNLIKELY(zone_close(self) < 0))
        return NULL;
    Py_RETURN_NONE;    /* never swallows the exception */
}

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *func;
    ZoneObject *zone;
    const char *name;     /* zone->name: one load fewer per call */
    PyObject *dict;
    PyObject *weakrefs;
} ZoneWrapperObject;

/* A decorated call whose context is not the last one here: on the
 * context's stack like a `with` block, placed by the slow path. */
static __attribute__((noinline)) PyObject *
ZoneWrapper_call_slow(ZoneWrapperObject *self, PyObject *const *args, size_t nargsf,
                      PyObject *kwnames)
{
    PyObject *r, *type, *value, *tb;

    if (zone_open_slow(self->zone) < 0)
        return NULL;
    r = PyObject_Vectorcall(self->func, args, nargsf, kwnames);
    if (r == NULL) {
        PyErr_Fetch(&type, &value, &tb);
        zone_close(self->zone);
        PyErr_Restore(type, value, tb);
        return NULL;
    }
    if (UNLIKELY(zone_close(self->zone) < 0))
        Py_CLEAR(r);
    return r;
}

/* Call func as PyObject_Vectorcall would, less its thread-state lookup
 * and its check of the result against the error state: the interpreter's
 * call of the wrapper checks the wrapper's result the same way. A Python
 * function's vectorcall is never NULL (CPython's own calls of it would
 * fail); any other callable's is read as the protocol lays it out
 * (PyVectorcall_Function is out of line before 3.12). */
static inline PyObject *call_func(PyObject *func, PyObject *const *args, size_t nargsf,
                                  PyObject *kwnames)
{
    PyTypeObject *type = Py_TYPE(func);
    vectorcallfunc call;

    if (LIKELY(type == &PyFunction_Type))
        return ((PyFunctionObject *)func)->vectorcall(func, args, nargsf, kwnames);
    if ((type->tp_flags & Py_TPFLAGS_HAVE_VECTORCALL) &&
        (call = *(vectorcallfunc *)((char *)func + type->tp_vectorcall_offset)) != NULL)
        return call(func, args, nargsf, kwnames);
    return PyObject_Vectorcall(func, args, nargsf, kwnames);
}

/* A decorated call in the context of the last Python zone here: the
 * thread's nesting is already its, and the call's zone ends before the
 * context can change, so it opens and closes like a C zone. Python zones
 * see it as one: inside it they nest in it, and a task made inside it
 * starts there (stack_lookup). Only what the end needs is kept across the
 * call: the zone, and the thread's mark, restored after it whole (one
 * 16-byte copy each way), so that the nesting the last Python zone left
 * is what it was before, and, when other contexts' zones ran inside the
 * call (an event loop run by it), this context's is the last one here
 * again. A cache entry such zones left cannot hit again: coming back
 * here moved the thread state's context version past it. */
static inline __attribute__((always_inline)) PyObject *
wrapper_call_here(ZoneWrapperObject *self, thread_py *tp, uint32_t lane, PyObject *const *args,
                  size_t nargsf, PyObject *kwnames)
{
    mark_copy mark;
    prof_zone z = prof_zone_begin_inline_(self->name);
    PyObject *r;

    memcpy(&mark, &tp->mark, sizeof mark);
    r = call_func(self->func, args, nargsf, kwnames);
    if (lane != 0)
        prof_zone_end_lane_(&z, lane);
    else
        prof_zone_end_inline_(&z);
    memcpy(&tp->mark, &mark, sizeof mark);
    return r;
}

/* The decorated call the fast path below does not take: a task's (its
 * zones go in a lane), or another context's than the last zone's here. */
static __attribute__((noinline)) PyObject *
ZoneWrapper_call_other(ZoneWrapperObject *self, PyObject *const *args, size_t nargsf,
                       PyObject *kwnames)
{
    thread_py *tp = tls_py;

    if (cache_hit(tp, tstate_now()))
        return wrapper_call_here(self, tp, tp->stack->lane, args, nargsf, kwnames);
    return ZoneWrapper_call_slow(self, args, nargsf, kwnames);
}

static PyObject *ZoneWrapper_vectorcall(ZoneWrapperObject *self, PyObject *const *args,
                                        size_t nargsf, PyObject *kwnames)
{
    thread_py *tp = tls_py;
    PyThreadState *ts;

    if (UNLIKELY((ts = tstate_now())->context != tp->ctx) ||
        UNLIKELY(ts->context_ver != tp->deco_ver) || UNLIKELY(ts->id != tp->ts_id))
        return ZoneWrapper_call_other(self, args, nargsf, kwnames);
    return wrapper_call_here(self, tp, 0, args, nargsf, kwnames);
}

static PyObject *Zone_call(ZoneObject *self, PyObject *args, PyObject *kwargs)
{
    PyObject *func, *r;
    ZoneWrapperObject *w;

    if (kwargs != NULL && PyDict_GET_SIZE(kwargs) != 0) {
        PyErr_SetString(PyExc_TypeError, "prof.zone(name)(func) takes no keyword arguments");
        return NULL;
    }
    if (!PyArg_UnpackTuple(args, "prof.zone(name)", 1, 1, &func))
        return NULL;
    if (!PyCallable_Check(func)) {
        PyErr_Format(PyExc_TypeError,
                     "prof.zone(%R) decorates callables, not %.100s; use `with` for blocks",
                     self->pyname, Py_TYPE(func)->tp_name);
        return NULL;
    }
    /* Generator and coroutine functions return at once; wrapping the call
     * would time nothing. prof/__init__.py wraps those in Python so the
     * zone spans the iteration or the await. */
    if (PyFunction_Check(func) && special_wrapper != NULL) {
        PyCodeObject *code = (PyCodeObject *)PyFunction_GET_CODE(func);
        if (code->co_flags & (CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR |
                              CO_ITERABLE_COROUTINE))
            return PyObject_CallFunctionObjArgs(special_wrapper, (PyObject *)self, func, NULL);
    }
    w = PyObject_GC_New(ZoneWrapperObject, &ZoneWrapper_Type);
    if (w == NULL)
        return NULL;
    w->vectorcall = (vectorcallfunc)ZoneWrapper_vectorcall;
    w->func = Py_NewRef(func);
    w->zone = (ZoneObject *)Py_NewRef((PyObject *)self);
    w->name = self->name;
    w->dict = NULL;
    w->weakrefs = NULL;
    PyObject_GC_Track(w);
    /* __name__, __qualname__, __doc__, __module__, __wrapped__, __dict__. */
    r = PyObject_CallFunctionObjArgs(update_wrapper, (PyObject *)w, func, NULL);
    if (r == NULL) {
        Py_DECREF(w);
        return NULL;
    }
    Py_DECREF(r);
    return (PyObject *)w;
}

static PyObject *Zone_repr(ZoneObject *self)
{
    return PyUnicode_FromFormat("prof.zone(%R)", self->pyname);
}

/* ------------------------------------------------------------------------ */
/* __enter__ and __exit__ without a method object per block                  */
/*
 * A `with` statement looks __enter__ and __exit__ up on the type and binds
 * each to the object: for methods, two method objects made and freed per
 * block, which cost more than the zone itself. Python 3.14 calls methods
 * without binding them; before it, a Zone keeps its two bound forms
 * (ZoneBound, made on first use, kept as long as the zone) and the type's
 * __enter__ and __exit__ (ZoneSpecial descriptors) hand those out. Called
 * on the type, as contextlib.ExitStack does (type(cm).__exit__(cm, ...)),
 * they take the zone first, like methods.
 */
enum { SPECIAL_ENTER, SPECIAL_EXIT };

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    ZoneObject *zone;     /* borrowed: the zone owns this object, and clears
                             this when it goes */
    int which;
} ZoneBoundObject;

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    int which;
} ZoneSpecialObject;

static PyTypeObject ZoneBound_Type, ZoneSpecial_Type;
static const char *const special_names[2] = {"__enter__", "__exit__"};

/* A call the fast functions below do not take: of a freed zone, with
 * arguments __enter__ does not take, with keywords. */
static PyObject *special_refuse(ZoneObject *zone, int which, Py_ssize_t nargs,
                                PyObject *kwnames)
{
    if (zone == NULL)
        PyErr_Format(PyExc_RuntimeError, "prof.Zone.%s() of a zone that no longer exists",
                     special_names[which]);
    else if (kwnames != NULL && PyTuple_GET_SIZE(kwnames) != 0)
        PyErr_Format(PyExc_TypeError, "prof.Zone.%s() takes no keyword arguments",
                     special_names[which]);
    else
        PyErr_Format(PyExc_TypeError, "prof.Zone.__enter__() takes no arguments (%zd given)",
                     nargs);
    return NULL;
}

static PyObject *ZoneBound_enter(ZoneBoundObject *self, PyObject *const *Py_UNUSED(args),
                                 size_t nargsf, PyObject *kwnames)
{
    if (UNLIKELY(self->zone == NULL || PyVectorcall_NARGS(nargsf) != 0 || kwnames != NULL))
        return special_refuse(self->zone, SPECIAL_ENTER, PyVectorcall_NARGS(nargsf), kwnames);
    return Zone_enter(self->zone, NULL);
}

static PyObject *ZoneBound_exit(ZoneBoundObject *self, PyObject *const *args, size_t nargsf,
                                PyObject *kwnames)
{
    if (UNLIKELY(self->zone == NULL || kwnames != NULL))
        return special_refuse(self->zone, SPECIAL_EXIT, PyVectorcall_NARGS(nargsf), kwnames);
    return Zone_exit(self->zone, args, PyVectorcall_NARGS(nargsf));
}

static const vectorcallfunc bound_calls[2] = {(vectorcallfunc)ZoneBound_enter,
                                              (vectorcallfunc)ZoneBound_exit};

static PyObject *ZoneBound_repr(ZoneBoundObject *self)
{
    if (self->zone == NULL)
        return PyUnicode_FromFormat("<bound %s of a freed prof.Zone>",
                                    special_names[self->which]);
    return PyUnicode_FromFormat("<bound %s of prof.zone(%R)>", special_names[self->which],
                                self->zone->pyname);
}

static PyTypeObject ZoneBound_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "prof._ZoneBound",
    .tp_basicsize = sizeof(ZoneBoundObject),
    .tp_dealloc = (destructor)PyObject_Free,
    .tp_vectorcall_offset = offsetof(ZoneBoundObject, vectorcall),
    .tp_repr = (reprfunc)ZoneBound_repr,
    .tp_call = PyVectorcall_Call,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "A prof.Zone's __enter__ or __exit__, bound to it once.",
};

static PyObject *ZoneSpecial_get(ZoneSpecialObject *self, PyObject *obj,
                                 PyObject *Py_UNUSED(type))
{
    ZoneObject *zone = (ZoneObject *)obj;
    ZoneBoundObject *b;

    if (obj == NULL)
        return Py_NewRef((PyObject *)self);
    if (LIKELY(zone->bound[self->which] != NULL))
        return Py_NewRef(zone->bound[self->which]);
    b = PyObject_New(ZoneBoundObject, &ZoneBound_Type);
    if (b == NULL)
        return NULL;
    b->vectorcall = bound_calls[self->which];
    b->zone = zone;
    b->which = self->which;
    zone->bound[self->which] = (PyObject *)b;
    return Py_NewRef((PyObject *)b);
}

/* Zone.__enter__(zone), Zone.__exit__(zone, *exc): called on the type. */
static PyObject *ZoneSpecial_vectorcall(ZoneSpecialObject *self, PyObject *const *args,
                                        size_t nargsf, PyObject *kwnames)
{
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);

    if (nargs < 1 || !Py_IS_TYPE(args[0], &Zone_Type)) {
        PyErr_Format(PyExc_TypeError, "prof.Zone.%s() needs a prof.Zone as first argument",
                     special_names[self->which]);
        return NULL;
    }
    if (self->which == SPECIAL_EXIT && kwnames == NULL)
        return Zone_exit((ZoneObject *)args[0], args + 1, nargs - 1);
    if (self->which == SPECIAL_ENTER && kwnames == NULL && nargs == 1)
        return Zone_enter((ZoneObject *)args[0], NULL);
    return special_refuse((ZoneObject *)args[0], self->which, nargs - 1, kwnames);
}

static PyObject *ZoneSpecial_repr(ZoneSpecialObject *self)
{
    return PyUnicode_FromFormat("<prof.Zone.%s>", special_names[self->which]);
}

static PyTypeObject ZoneSpecial_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "prof._ZoneSpecial",
    .tp_basicsize = sizeof(ZoneSpecialObject),
    .tp_dealloc = (destructor)PyObject_Free,
    .tp_vectorcall_offset = offsetof(ZoneSpecialObject, vectorcall),
    .tp_repr = (reprfunc)ZoneSpecial_repr,
    .tp_call = PyVectorcall_Call,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_METHOD_DESCRIPTOR,
    .tp_doc = "prof.Zone's __enter__ (begin the zone) or __exit__ (end it; exceptions "
              "propagate).",
    .tp_descr_get = (descrgetfunc)ZoneSpecial_get,
};

/* Zone.__enter__ and __exit__ into the type's dict. */
static int zone_specials_init(void)
{
    if (PyType_Ready(&ZoneBound_Type) < 0 || PyType_Ready(&ZoneSpecial_Type) < 0)
        return -1;
    for (int which = SPECIAL_ENTER; which <= SPECIAL_EXIT; which++) {
        ZoneSpecialObject *d = PyObject_New(ZoneSpecialObject, &ZoneSpecial_Type);
        int r;

        if (d == NULL)
            return -1;
        d->vectorcall = (vectorcallfunc)ZoneSpecial_vectorcall;
        d->which = which;
        r = PyDict_SetItemString(Zone_Type.tp_dict, special_names[which], (PyObject *)d);
        Py_DECREF(d);
        if (r < 0)
            return -1;
    }
    PyType_Modified(&Zone_Type);
    return 0;
}

static void Zone_dealloc(ZoneObject *self)
{
    for (int which = SPECIAL_ENTER; which <= SPECIAL_EXIT; which++) {
        if (self->bound[which] != NULL) {
            ((ZoneBoundObject *)self->bound[which])->zone = NULL;
            Py_DECREF(self->bound[which]);
        }
    }
    Py_XDECREF(self->pyname);
    PyObject_Free(self);
}

static PyObject *Zone_get_name(ZoneObject *self, void *Py_UNUSED(closure))
{
    return Py_NewRef(self->pyname);
}

static PyGetSetDef Zone_getset[] = {
    {"name", (getter)Zone_get_name, NULL, "The stage name.", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

PyTypeObject Zone_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "prof.Zone",
    .tp_basicsize = sizeof(ZoneObject),
    .tp_dealloc = (destructor)Zone_dealloc,
    .tp_repr = (reprfunc)Zone_repr,
    .tp_call = (ternaryfunc)Zone_call,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A named stage: `with prof.zone(name):` or `@prof.zone(name)`.\n\n"
              "One object per name, shared by every use; made by prof.zone().",
    .tp_getset = Zone_getset,
};

static int ZoneWrapper_traverse(ZoneWrapperObject *self, visitproc visit, void *arg)
{
    Py_VISIT(self->func);
    Py_VISIT(self->zone);
    Py_VISIT(self->dict);
    return 0;
}

static int ZoneWrapper_clear(ZoneWrapperObject *self)
{
    Py_CLEAR(self->func);
    Py_CLEAR(self->zone);
    Py_CLEAR(self->dict);
    return 0;
}

static void ZoneWrapper_dealloc(ZoneWrapperObject *self)
{
    PyObject_GC_UnTrack(self);
    if (self->weakrefs != NULL)
        PyObject_ClearWeakRefs((PyObject *)self);
    ZoneWrapper_clear(self);
    PyObject_GC_Del(self);
}

/* Methods: bind like a function does. */
static PyObject *ZoneWrapper_get(PyObject *self, PyObject *obj, PyObject *Py_UNUSED(type))
{
    if (obj == NULL || obj == Py_None)
        return Py_NewRef(self);
    return PyMethod_New(self, obj);
}

static PyObject *ZoneWrapper_repr(ZoneWrapperObject *self)
{
    return PyUnicode_FromFormat("<prof.zone(%R) wrapping %R>", self->zone->pyname, self->func);
}

static PyObject *ZoneWrapper_get_zone(ZoneWrapperObject *self, void *Py_UNUSED(closure))
{
    return Py_NewRef((PyObject *)self->zone);
}

static PyGetSetDef ZoneWrapper_getset[] = {
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, NULL, NULL},
    {"zone", (getter)ZoneWrapper_get_zone, NULL, "The Zone this wrapper opens.", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

PyTypeObject ZoneWrapper_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "prof.ZoneWrapper",
    .tp_basicsize = sizeof(ZoneWrapperObject),
    .tp_dealloc = (destructor)ZoneWrapper_dealloc,
    .tp_vectorcall_offset = offsetof(ZoneWrapperObject, vectorcall),
    .tp_repr = (reprfunc)ZoneWrapper_repr,
    .tp_call = PyVectorcall_Call,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL |
                Py_TPFLAGS_METHOD_DESCRIPTOR,
    .tp_doc = "A function wrapped by @prof.zone(name): each call is one zone.",
    .tp_traverse = (traverseproc)ZoneWrapper_traverse,
    .tp_clear = (inquiry)ZoneWrapper_clear,
    .tp_weaklistoffset = offsetof(ZoneWrapperObject, weakrefs),
    .tp_getset = ZoneWrapper_getset,
    .tp_descr_get = ZoneWrapper_get,
    .tp_dictoffset = offsetof(ZoneWrapperObject, dict),
};

PyObject *py_set_special_wrapper(PyObject *Py_UNUSED(m), PyObject *fn)
{
    Py_XSETREF(special_wrapper, fn == Py_None ? NULL : Py_NewRef(fn));
    Py_RETURN_NONE;
}

/* For tests: the current context's open Python zones and the runtime's
 * depth on this thread. */
PyObject *py_debug_state(PyObject *Py_UNUSED(m), PyObject *Py_UNUSED(ignored))
{
    thread_py *tp = thread_py_get();
    PyThreadState *ts = tstate_now();
    ContextStack *s = tp != NULL ? stack_lookup(tp, ts) : NULL;
    uint32_t depth, dead;
    int repair;

    if (s == NULL)
        return NULL;
    cache_set(tp, ts, s);
    prof_thread_nesting_(&depth, &dead, &repair);
    return Py_BuildValue("{s:n,s:l,s:K,s:l}", "open", (Py_ssize_t)s->n, "depth",
                         prof_thread_self_ != NULL ? (long)depth : -1L, "dead",
                         (unsigned long long)dead, "dead_pending", (long)repair);
}

/* Module set-up: the ContextVar that finds each context's stack, and
 * Zone's __enter__ and __exit__. */
int zone_stacks_init(void)
{
    if (PyType_Ready(&ContextStack_Type) < 0 || zone_specials_init() < 0)
        return -1;
    stack_var = PyContextVar_New("prof._open_zones", NULL);
    return stack_var == NULL ? -1 : 0;
}
