/* site.c - call sites: see site.h. */
#include <stddef.h>
#include <stdint.h>

#include "site.h"

static int bytes_match(const unsigned char *p, const void *want, size_t n)
{
    const unsigned char *w = want;

    for (size_t i = 0; i < n; i++)
        if (p[i] != w[i])
            return 0;
    return 1;
}

const struct prof_site_ *prof_site_of(const char *raw)
{
    uint64_t magic = PROF_SITE_MAGIC_;
    const struct prof_site_ *self = (const struct prof_site_ *)(const void *)raw;
    const unsigned char *p = (const unsigned char *)raw;

    if (raw == NULL || (uintptr_t)raw % 8 != 0)
        return NULL;
    if (!bytes_match(p, &magic, sizeof magic) ||
        !bytes_match(p + offsetof(struct prof_site_, self), &self, sizeof self))
        return NULL;
    return self;
}

const char *prof_site_name(const char *raw)
{
    const struct prof_site_ *s = prof_site_of(raw);

    return s != NULL ? s->name : raw;
}
