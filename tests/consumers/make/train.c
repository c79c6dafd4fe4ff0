/* A training loop instrumented with prof: 4 steps of "make_step" with a
 * nested "make_forward". run.py checks the counts in the JSON summary. */
#include <prof.h>

static volatile double sink;

static void forward(int step)
{
    PROF_ZONE("make_forward");
    for (int i = 0; i < 1000; i++)
        sink += i * step;
}

int main(void)
{
    for (int step = 0; step < 4; step++) {
        PROF_ZONE("make_step");
        forward(step);
        prof_step();
    }
    return 0;
}
