/*
 * _prof_zone.c - Python zones: the Zone type (context manager and
 * decorator) and its __enter__ and __exit__, bound once per Zone; the
 * design of every part of a Python zone:
 *
 *   _prof_zone_stack.c  the per-context stacks of open `with` zones, each
 *                       thread's state and its cache, a zone's open and
 *                       end on them; the fast paths inline in
 *                       _prof_zone_stack.h
 *   _prof_zone_wrapper.c  the decorator: Zone's call, the ZoneWrapper
 *   _prof_names.c       the Zone cache, names interned
 *
 * Everything a Python zone costs is in these, so the design is about the
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
 * The thread's state (tls_py) is written only in _prof_zone_stack.c, where
 * it is made and freed; the fast paths read it with one TLS load.
 *
 * Thread-local storage: one pointer (this module is dlopen'd).
 */
#include "_prof_zone_stack.h"

/* Inlined into ZoneBound_enter and ZoneBound_exit, which call these per
 * block (a call fewer each). */
static inline __attribute__((always_inline)) PyObject *
Zone_enter(ZoneObject *self, PyObject *Py_UNUSED(ignored))
{
    if (UNLIKELY(zone_open(self) < 0))
        return NULL;
    return Py_NewRef((PyObject *)self);
}

static inline __attribute__((always_inline)) PyObject *
Zone_exit(ZoneObject *self, PyObject *const *Py_UNUSED(args), Py_ssize_t Py_UNUSED(nargs))
{
    if (UNLIKELY(zone_close(self) < 0))
        return NULL;
    Py_RETURN_NONE;    /* never swallows the exception */
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

/* Module set-up: the type, with its __enter__ and __exit__. */
int zone_type_init(void)
{
    if (PyType_Ready(&Zone_Type) < 0)
        return -1;
    return zone_specials_init();
}
