/* intern.c - an open-addressing set of strings, stored in arena blocks that
 * are never freed: an interned pointer is valid for the life of the process
 * (zones keep it in their records; the collector reads it later). Taken
 * only off the hot path (prof_intern callers, the collector), under its own
 * mutex. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "prof.h"
#include "intern.h"

#define ARENA_BLOCK (64 * 1024)

struct slot {
    uint64_t hash;
    const char *str;
    size_t len;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct slot *slots;
static size_t nslots, nused;
static char *arena;
static size_t arena_left;

uint64_t prof_hash_bytes(const void *p, size_t n)
{
    const unsigned char *b = p;
    uint64_t h = 0xcbf29ce484222325ull;

    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

static char *arena_copy(const char *s, size_t n)
{
    char *d;

    if (n + 1 > ARENA_BLOCK / 4) {
        /* Big strings get their own block. */
        d = malloc(n + 1);
    } else {
        if (arena_left < n + 1) {
            if ((arena = malloc(ARENA_BLOCK)) == NULL)
                return NULL;
            arena_left = ARENA_BLOCK;
        }
        d = arena;
        arena += n + 1;
        arena_left -= n + 1;
    }
    if (d != NULL) {
        memcpy(d, s, n);
        d[n] = '\0';
    }
    return d;
}

static int grow(void)
{
    size_t n = nslots ? nslots * 2 : 1024;
    struct slot *s = calloc(n, sizeof *s);

    if (s == NULL)
        return -1;
    for (size_t i = 0; i < nslots; i++) {
        if (slots[i].str == NULL)
            continue;
        size_t j = slots[i].hash & (n - 1);
        while (s[j].str != NULL)
            j = (j + 1) & (n - 1);
        s[j] = slots[i];
    }
    free(slots);
    slots = s;
    nslots = n;
    return 0;
}

const char *prof_intern_n(const char *s, size_t n)
{
    uint64_t h = prof_hash_bytes(s, n);
    const char *r = NULL;
    size_t i;

    pthread_mutex_lock(&lock);
    if ((nused + 1) * 2 > nslots && grow() != 0)
        goto out;
    for (i = h & (nslots - 1); slots[i].str != NULL; i = (i + 1) & (nslots - 1)) {
        if (slots[i].hash == h && slots[i].len == n && memcmp(slots[i].str, s, n) == 0) {
            r = slots[i].str;
            goto out;
        }
    }
    if ((r = arena_copy(s, n)) != NULL) {
        slots[i].hash = h;
        slots[i].str = r;
        slots[i].len = n;
        nused++;
    }
out:
    pthread_mutex_unlock(&lock);
    return r;
}

PROF_API const char *prof_intern(const char *s)
{
    return s == NULL ? NULL : prof_intern_n(s, strlen(s));
}

void prof_intern_atfork_prepare(void)
{
    pthread_mutex_lock(&lock);
}

void prof_intern_atfork_parent(void)
{
    pthread_mutex_unlock(&lock);
}

void prof_intern_atfork_child(void)
{
    pthread_mutex_unlock(&lock);
}
