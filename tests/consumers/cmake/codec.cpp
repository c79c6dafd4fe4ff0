// Two classes with a run() method each and a lambda inside one of them:
// with PROF_FUNC() they must be three stages, "codec::Encoder::run",
// "codec::Decoder::run" and "codec::Encoder::run::lambda", not one "run"
// and one "operator()". run.py reads the JSON summary.
#include <prof.h>

namespace codec {
struct Encoder {
    int run(int x)
    {
        PROF_FUNC();
        auto pack = [](int v) {
            PROF_FUNC();
            return v * 2;
        };
        return pack(x) + 1;
    }
};

struct Decoder {
    int run(int x)
    {
        PROF_FUNC();
        return x / 2;
    }
};
}  // namespace codec

int main()
{
    codec::Encoder enc;
    codec::Decoder dec;
    int acc = 0;
    for (int i = 0; i < 3; i++)
        acc += enc.run(i);
    for (int i = 0; i < 2; i++)
        acc += dec.run(i);
    return acc == 9 ? 0 : 1;   // 1 + 3 + 5 + 0 + 0
}
