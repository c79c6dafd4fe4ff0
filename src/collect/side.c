/* side.c - a collector part's own state for each thread (side.h). */
#include <stdlib.h>

#include "side.h"

void *prof_side_get(struct prof_sides *l, struct prof_thread *t)
{
    struct prof_side *s = t->side[l->which];

    if (s != NULL || (s = calloc(1, l->size)) == NULL)
        return s;
    s->thread = t;
    s->next = l->head;
    if (l->head != NULL)
        l->head->prev = s;
    l->head = s;
    t->side[l->which] = s;
    return s;
}

void prof_side_free(struct prof_sides *l, void *side)
{
    struct prof_side *s = side;

    if (s->prev != NULL)
        s->prev->next = s->next;
    else
        l->head = s->next;
    if (s->next != NULL)
        s->next->prev = s->prev;
    s->thread->side[l->which] = NULL;
    free(s);
}

void *prof_side_atfork_child(struct prof_sides *l, const struct prof_thread *self,
                             void (*release)(void *side))
{
    struct prof_side *s, *next, *kept = NULL;

    for (s = l->head; s != NULL; s = next) {
        next = s->next;
        if (s->thread == self) {
            kept = s;
            continue;
        }
        if (release != NULL)
            release(s);
        prof_side_free(l, s);
    }
    return kept;
}
