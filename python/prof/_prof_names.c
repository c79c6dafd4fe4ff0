/*
 * _prof_names.c - names from Python: validation, interning, and the cache
 * of Zone objects that prof.zone() answers from.
 *
 * A name crosses from Python once. Its first use checks it (a str, no NUL,
 * at most NAME_MAX_BYTES of UTF-8), interns it with prof_intern() and
 * caches a Zone holding both forms under the str; every later prof.zone(),
 * counter, mark, cuda_zone or stats call with that exact str is a lookup:
 * first by the str's address in a small direct-mapped table (a call site
 * usually passes one constant str), then by hash in the dict.
 *
 * Cached Zones are never removed, so the pointers handed out stay valid
 * for the life of the process. GIL held throughout.
 */
#include "_prof_common.h"

#include <string.h>

/* Zone objects kept in the name cache; past this, names are still interned
 * (they live as long as the process in any case) but each call to
 * prof.zone() with a new name builds a fresh object. */
#define NAME_CACHE_MAX 100000

PyObject *zone_cache;              /* str -> Zone; entries are never removed */

/* Direct-mapped cache in front of zone_cache, keyed by the str's address. */
#define RECENT_SIZE 64
static struct recent {
    PyObject *str;       /* strong reference */
    ZoneObject *zone;
} recent[RECENT_SIZE];

/* Validate a name and return its interned UTF-8 copy, or NULL with an
 * exception set. */
static const char *intern_name(PyObject *name, const char *what)
{
    const char *utf8;
    const char *interned;
    Py_ssize_t len;

    if (!PyUnicode_Check(name)) {
        PyErr_Format(PyExc_TypeError, "prof: %s name must be a str, not %.100s", what,
                     Py_TYPE(name)->tp_name);
        return NULL;
    }
    utf8 = PyUnicode_AsUTF8AndSize(name, &len);
    if (utf8 == NULL) {
#if PY_VERSION_HEX >= 0x030B0000
        /* Lone surrogates: say who refused them (UnicodeEncodeError is a
         * ValueError, so both kinds of handler catch it). */
        if (PyErr_ExceptionMatches(PyExc_UnicodeEncodeError)) {
            PyObject *type, *value, *tb, *r;
            PyErr_Fetch(&type, &value, &tb);
            PyErr_NormalizeException(&type, &value, &tb);
            r = PyObject_CallMethod(value, "add_note", "s",
                                    "prof: names must be encodable as UTF-8");
            Py_XDECREF(r);
            PyErr_Clear();
            PyErr_Restore(type, value, tb);
        }
#endif
        return NULL;
    }
    if ((size_t)len != strlen(utf8)) {
        PyErr_Format(PyExc_ValueError, "prof: %s name contains a NUL character", what);
        return NULL;
    }
    if (len > NAME_MAX_BYTES) {
        PyErr_Format(PyExc_ValueError,
                     "prof: %s name is %zd bytes long in UTF-8; the limit is %d", what, len,
                     NAME_MAX_BYTES);
        return NULL;
    }
    interned = prof_intern(utf8);
    if (interned == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    return interned;
}

/* The Zone for name: a borrowed reference from the cache, or a new one
 * (*owned set) when the cache is full. */
static ZoneObject *zone_for(PyObject *name, int *owned)
{
    ZoneObject *z;
    PyObject *key;
    const char *interned;

    *owned = 0;
    if (LIKELY(PyUnicode_CheckExact(name))) {
        /* A name at a call site is usually one constant str object: try it
         * by address before hashing into the dict. */
        struct recent *r = &recent[((uintptr_t)name >> 4) % RECENT_SIZE];
        if (LIKELY(r->str == name))
            return r->zone;
        z = (ZoneObject *)PyDict_GetItemWithError(zone_cache, name);
        if (LIKELY(z != NULL)) {
            /* The entry owns a reference to the str, so its address cannot
             * be reused by another object while it is here. */
            Py_INCREF(name);
            Py_XSETREF(r->str, name);
            r->zone = z;     /* borrowed: cached zones live in zone_cache forever */
            return z;
        }
        if (PyErr_Occurred())
            return NULL;
    }
    interned = intern_name(name, "zone");
    if (interned == NULL)
        return NULL;
    /* A str subclass is cached under an exact copy, so its own __hash__ /
     * __eq__ never run on the fast path; that copy may be cached already,
     * and replacing its entry would free a Zone that recent[] and callers
     * still hold. */
    key = PyUnicode_CheckExact(name) ? Py_NewRef(name) : PyUnicode_FromObject(name);
    if (key == NULL)
        return NULL;
    if (!PyUnicode_CheckExact(name)) {
        z = (ZoneObject *)PyDict_GetItemWithError(zone_cache, key);
        if (z != NULL || PyErr_Occurred()) {
            Py_DECREF(key);
            return z;
        }
    }
    z = PyObject_New(ZoneObject, &Zone_Type);
    if (z == NULL) {
        Py_DECREF(key);
        return NULL;
    }
    z->name = interned;
    z->pyname = key;
    z->bound[0] = z->bound[1] = NULL;
    if (PyDict_GET_SIZE(zone_cache) < NAME_CACHE_MAX) {
        if (PyDict_SetItem(zone_cache, key, (PyObject *)z) < 0) {
            Py_DECREF(z);
            return NULL;
        }
        Py_DECREF(z);    /* the cache holds it */
        return z;
    }
    *owned = 1;
    return z;
}

/* A name for counters and marks: the same cache. */
const char *name_for(PyObject *name)
{
    int owned;
    ZoneObject *z = zone_for(name, &owned);
    const char *s;

    if (z == NULL)
        return NULL;
    s = z->name;
    if (owned)
        Py_DECREF(z);
    return s;
}

/* prof.zone(name) -> the cached Zone (a new one past NAME_CACHE_MAX). */
PyObject *py_zone(PyObject *Py_UNUSED(m), PyObject *name)
{
    int owned;
    ZoneObject *z = zone_for(name, &owned);

    if (z == NULL)
        return NULL;
    return owned ? (PyObject *)z : Py_NewRef((PyObject *)z);
}
