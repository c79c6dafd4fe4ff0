/* map.c - linear probing, load factor at most 1/2 (the lookup is inline
 * in map.h). */
#include <errno.h>
#include <stdlib.h>

#include "map.h"

static int grow(struct prof_map *m)
{
    size_t cap = m->cap ? m->cap * 2 : 64;
    struct prof_map_slot *slots = calloc(cap, sizeof *slots);

    if (slots == NULL)
        return -ENOMEM;
    for (size_t i = 0; i < m->cap; i++) {
        if (m->slots[i].key == 0)
            continue;
        size_t j = prof_map_slot_(m->slots[i].key, cap);
        while (slots[j].key != 0)
            j = (j + 1) & (cap - 1);
        slots[j] = m->slots[i];
    }
    free(m->slots);
    m->slots = slots;
    m->cap = cap;
    return 0;
}

int prof_map_put(struct prof_map *m, uint64_t key, void *value)
{
    size_t i;

    if (key == 0)
        return -EINVAL;
    if ((m->len + 1) * 2 > m->cap && grow(m) != 0)
        return -ENOMEM;
    for (i = prof_map_slot_(key, m->cap); m->slots[i].key != 0; i = (i + 1) & (m->cap - 1)) {
        if (m->slots[i].key == key) {
            m->slots[i].value = value;
            return 0;
        }
    }
    m->slots[i].key = key;
    m->slots[i].value = value;
    m->len++;
    return 0;
}

void prof_map_clear(struct prof_map *m)
{
    free(m->slots);
    m->slots = NULL;
    m->cap = m->len = 0;
}
