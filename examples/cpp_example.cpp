// cpp_example.cpp - the prof API from C++: PROF_ZONE is an RAII object that
// ends with its scope, exceptions included.
#include <prof.h>

#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

static double compute(int n)
{
    PROF_FUNC();
    double s = 0;
    for (int i = 1; i < n; i++)
        s += std::sqrt(static_cast<double>(i));
    return s;
}

static void may_throw(int i)
{
    PROF_ZONE("may_throw");
    if (i % 50 == 0)
        throw std::runtime_error("bad batch");
    compute(2000);
}

int main()
{
    prof_enable(1);
    std::vector<std::thread> workers;
    for (int w = 0; w < 2; w++) {
        workers.emplace_back([w] {
            std::string name = "worker-" + std::to_string(w);
            prof_thread_name(name.c_str());
            for (int i = 0; i < 200; i++) {
                PROF_ZONE("work_item");
                compute(20000);
            }
        });
    }
    int caught = 0;
    for (int step = 0; step < 200; step++) {
        PROF_ZONE("step");
        try {
            may_throw(step);
        } catch (const std::exception &) {
            caught++;   // the zone of may_throw ended during unwinding
        }
        PROF_COUNTER("caught", caught);
        prof_step();
    }
    for (auto &t : workers)
        t.join();
    prof_stage_stats st;
    if (prof_stats("may_throw", &st) == 0)
        std::printf("may_throw: %llu zones, p50 %.1f us\n",
                    static_cast<unsigned long long>(st.count), st.p50_ns / 1e3);
    prof_summary_print(stdout);
    return 0;
}
