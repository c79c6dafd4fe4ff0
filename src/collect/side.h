/* side.h - a collector part's own state for each thread: made at the
 * part's first need of it, kept in the thread slot's side pointer (sink.h's
 * PROF_SIDE_SELF, PROF_SIDE_DRAIN, PROF_SIDE_LOSS), and listed, so that the
 * part frees it when the thread is gone, a forked child forgets the other
 * threads', and leak checkers find it. The part's struct begins with a
 * struct prof_side. Everything here runs under the runtime lock. */
#ifndef PROF_SIDE_H
#define PROF_SIDE_H

#include <stddef.h>

#include "registry.h"

struct prof_side {
    struct prof_thread *thread;
    struct prof_side *next, *prev;
};

/* One part's: which side pointer of the slot, and the size of its struct. */
struct prof_sides {
    struct prof_side *head;
    unsigned which;
    size_t size;
};

#define PROF_SIDES_INIT(which, type) {NULL, (which), sizeof(type)}

/* t's state, made zeroed (and listed) on the first call; NULL when out of
 * memory. */
void *prof_side_get(struct prof_sides *l, struct prof_thread *t);

/* t's state, or NULL when it has none yet. */
static inline void *prof_side_of(const struct prof_sides *l, const struct prof_thread *t)
{
    return t->side[l->which];
}

/* Unlisted, the slot's pointer cleared, freed. */
void prof_side_free(struct prof_sides *l, void *side);

/* In a forked child: every other thread's state freed (release, when not
 * NULL, first frees what the part's state holds besides itself); the
 * calling thread's returned for the part to reset, or NULL. */
void *prof_side_atfork_child(struct prof_sides *l, const struct prof_thread *self,
                             void (*release)(void *side));

#endif
