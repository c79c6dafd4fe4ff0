/* map.h - open-addressing hash map from a nonzero 64-bit key to a pointer.
 * The runtime's tables key by pointer (interned names) or by path hash. */
#ifndef PROF_MAP_H
#define PROF_MAP_H

#include <stddef.h>
#include <stdint.h>

/* A key beside its value: a lookup in a table larger than the caches
 * costs one cache miss, not one in a key array and one in a value array
 * (the drain looks up every record's path node here). */
struct prof_map_slot {
    uint64_t key;       /* 0 = empty */
    void *value;
};

struct prof_map {
    struct prof_map_slot *slots;
    size_t cap, len;
};

/* The slot a key starts its probe at: keys mixed so that aligned
 * pointers spread over the table. */
static inline size_t prof_map_slot_(uint64_t key, size_t cap)
{
    key ^= key >> 33;
    key *= 0xff51afd7ed558ccdull;
    key ^= key >> 33;
    return (size_t)key & (cap - 1);
}

/* Inline: the drain looks up every record's path node, and the call cost
 * a third of the lookup. NULL when absent. */
static inline void *prof_map_get(const struct prof_map *m, uint64_t key)
{
    if (m->cap == 0 || key == 0)
        return NULL;
    for (size_t i = prof_map_slot_(key, m->cap);; i = (i + 1) & (m->cap - 1)) {
        if (m->slots[i].key == key)
            return m->slots[i].value;
        if (m->slots[i].key == 0)
            return NULL;
    }
}

/* Insert or replace. Returns 0 or -ENOMEM. */
int prof_map_put(struct prof_map *m, uint64_t key, void *value);
void prof_map_clear(struct prof_map *m);   /* frees the table, not the values */

/* Iterate: for (size_t i = 0; i < m->cap; i++) if (m->slots[i].key != 0) ... */

#endif
