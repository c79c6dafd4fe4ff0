// The C++ side of app.c: PROF_DISABLE and no -lprof. The RAII types and
// PROF_FUNC in a method and a lambda compile to nothing; the calls are the
// inline no-ops.
#include <cerrno>
#include <cstdio>

#include <prof.h>

namespace app {
struct Encoder {
    int run()
    {
        PROF_FUNC();
        auto body = [] { PROF_FUNC(); return 1; };
        return body();
    }
};
}  // namespace app

int main()
{
    int failures = 0;
    {
        prof::Zone zone("zone");
        prof::CudaZone gpu("gpu", nullptr);
        PROF_ZONE("block");
        failures += app::Encoder().run() != 1;
    }
    failures += prof_step() != 1;
    failures += prof_step() != 2;
    failures += prof_enable(1) != 0;
    failures += prof_enabled() != 0;
    failures += prof_stats("zone", nullptr) != -ESRCH;
    std::printf("disabled c++: %s\n", failures ? "FAILED" : "ok");
    return failures != 0;
}
