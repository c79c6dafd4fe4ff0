// header_cpp.cpp - prof.h stands on its own in C++11: first and only
// include, -Wall -Wextra -Wpedantic -Werror, also with -DPROF_DISABLE. The
// RAII zone ends at the end of its scope, including on an exception.
#include <prof.h>

static int calls;

/* Not static: compiled out (PROF_DISABLE), only sizeof sees it. */
const char *name_of(const char *s);
const char *name_of(const char *s)
{
    calls++;
    return s;
}

static void work()
{
    PROF_FUNC();
}

static void throws()
{
    PROF_ZONE("throws");
    throw 42;
}

namespace outer {
struct Widget {
    void method()
    {
        PROF_ZONE("Widget::method");
        work();
    }
};
}  // namespace outer

int main(int argc, char **)
{
    {
        PROF_ZONE("block");
        PROF_ZONE("second in the same block");
        work();
    }
    {
        PROF_ZONE_BEGIN(z, "pair");
        work();
        PROF_ZONE_END(z);
    }
    {
        PROF_CUDA_ZONE("gpu", nullptr);
    }
    if (argc > 100)
        PROF_MARK("never");
    else
        PROF_COUNTER("value", 1.5f);
    try {
        throws();
    } catch (int) {
    }
    outer::Widget().method();
    {
        PROF_ZONE(name_of("evaluated"));
    }
    (void)prof_step();
#ifdef PROF_DISABLE
    return calls == 0 ? 0 : 1;
#else
    return calls == 1 ? 0 : 1;
#endif
}
