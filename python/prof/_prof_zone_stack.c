/*
 * _prof_zone_stack.c - the per-context stacks of open `with` zones: each
 * found from its contextvars context through a ContextVar and owned by it;
 * lanes for the stacks of tasks and callbacks; the zones of stacks gone;
 * each thread's state and its cache of the last zone's context; and what
 * a zone's open and end do beyond their inline fast paths
 * (_prof_zone_stack.h): the thread's nesting switched to the zone's
 * context, ends out of order (generators) or in another context, ends
 * refused on another thread. _prof_zone.c has the design.
 */
#include "_prof_zone_stack.h"

#include <stdlib.h>
#include <string.h>

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

/* The state of a thread that has none yet: its cache never hits (no
 * context has version CTX_VER_NONE). */
static thread_py no_thread_py = {.ctx_ver = CTX_VER_NONE, .deco_ver = CTX_VER_NONE,
                                 .mark = {.set = {.depth = NEST_NONE}}};
__thread thread_py *tls_py TLS_IE = &no_thread_py;
static pthread_key_t stack_key;     /* frees a thread's state at its exit */

static void stack_free(void *p)
{
    if (tls_py == p)
        tls_py = &no_thread_py;   /* a later destructor may still run Python */
    free(p);
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
/* A zone's open and end, beyond the fast paths                              */

__attribute__((noinline)) void entry_unplaced(thread_py *tp, ContextStack *s, open_zone *e)
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

__attribute__((noinline)) int zone_open_slow(ZoneObject *self)
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

__attribute__((noinline)) int zone_close_slow(ZoneObject *self)
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

/* Module set-up: the ContextVar that finds each context's stack, and the
 * key whose destructor frees a thread's state at its exit (made once). */
int zone_stacks_init(void)
{
    static int once;

    if (PyType_Ready(&ContextStack_Type) < 0)
        return -1;
    if (!once) {
        if (pthread_key_create(&stack_key, stack_free) != 0) {
            PyErr_NoMemory();
            return -1;
        }
        once = 1;
    }
    stack_var = PyContextVar_New("prof._open_zones", NULL);
    return stack_var == NULL ? -1 : 0;
}
