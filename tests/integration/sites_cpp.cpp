// sites_cpp.cpp - C++ call sites and qualified PROF_FUNC names
// (trace_sites.py reads the "site:" comments below).
#include <cstdint>

#include "prof.h"

namespace model {
struct Encoder {
    void run()
    {
        PROF_FUNC();            // site: model::Encoder::run
        spin();
    }
    static void spin()
    {
        for (int i = 0; i < 2000; i++)
            sink = sink + static_cast<std::uint64_t>(i);
    }
    static volatile std::uint64_t sink;
};
volatile std::uint64_t Encoder::sink;
}  // namespace model

int main()
{
    model::Encoder e;
    auto step = [&e]() {
        PROF_FUNC();            // site: main::lambda
        e.run();
    };
    for (int i = 0; i < 10; i++) {
        PROF_ZONE("cpp_outer"); // site: cpp_outer
        step();
    }
    return 0;
}
