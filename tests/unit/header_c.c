/* header_c.c - prof.h stands on its own in C: it is the first and only
 * include, and this file is built with -std=c99 and -std=c11 and
 * -Wall -Wextra -Wpedantic -Werror (and again with -DPROF_DISABLE, where
 * every macro must compile to nothing that runs). Each macro is used once in
 * every position a program may put it. */
#include <prof.h>

static int calls;

/* Not static: compiled out (PROF_DISABLE), only sizeof sees it. */
const char *name_of(const char *s);
const char *name_of(const char *s)
{
    calls++;
    return s;
}

static void work(void)
{
    PROF_FUNC();
}

int main(int argc, char **argv)
{
    (void)argv;
    {
        PROF_ZONE("block");
        work();
    }
    {
        PROF_ZONE_BEGIN(z, "pair");
        work();
        PROF_ZONE_END(z);
    }
    {
        PROF_CUDA_ZONE("gpu", (void *)0);
    }
    /* Expression macros are statements: if / else without braces. */
    if (argc > 100)
        PROF_MARK("never");
    else
        PROF_COUNTER("value", 1.5);
    if (argc > 100)
        PROF_COUNTER("never", 2);
    else
        PROF_MARK("mark");
    (void)prof_step();
    (void)prof_version();
    (void)prof_enabled();
    {
        PROF_ZONE(name_of("evaluated"));
    }
#ifdef PROF_DISABLE
    /* Compiled out: the name expression is not evaluated at all. */
    if (calls != 0)
        return 1;
#else
    if (calls != 1)
        return 1;
#endif
    {
        /* The runtime's version is the header's. */
        const char *v = prof_version(), *h = PROF_VERSION_STRING;
        while (*v != '\0' && *v == *h)
            v++, h++;
        if (*v != *h)
            return 1;
    }
    return PROF_VERSION >= PROF_VERSION_AT(0, 1, 0) ? 0 : 1;
}
