#!/usr/bin/env python3
"""Python, C and Cython stages in one summary.

Build the two extension modules first (meson builds them into
build/examples/python/extension/; or run ./build.sh here), then:

    PROF=1 PYTHONPATH=build/python:build/examples/python/extension \
        python3 examples/python/extension/demo.py

The table shows py.* zones with the C (c.*) and Cython (cy.*) zones nested
under them: one runtime, whichever language opened the zone.
"""
import random
import sys

import prof

try:
    import cyops
    import fastops
except ImportError as e:
    sys.exit(f"demo: {e}; build the extension modules first (see this file's docstring)")


def main(steps=5):
    prof.enable()                       # as if PROF=1 (PROF=0 still wins)
    rng = random.Random(1)
    for _ in range(steps):
        with prof.zone("py.step"):
            with prof.zone("py.prepare"):
                a = [rng.random() for _ in range(20000)]
                b = [rng.random() for _ in range(20000)]
            with prof.zone("py.dot"):
                fastops.dot(a, b)
            with prof.zone("py.matmul"):
                fastops.matmul(64)
            with prof.zone("py.primes"):
                cyops.count_primes(30000, 4)
        prof.step()
    print(prof.summary(), end="")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5)
