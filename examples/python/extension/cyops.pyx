# cython: language_level=3, boundscheck=False, wraparound=False
"""A Cython module timing its own stages with prof, without the GIL.

`cimport prof` reads prof/__init__.pxd from the installed package (or from
the directory prof.get_pxd_dir() names); the zones go to the same runtime,
summary and trace as the Python and C zones of the process.
"""

cimport prof


def count_primes(int n, int blocks=8):
    """Primes below n by trial division, in `blocks` stages run in nogil."""
    cdef prof.prof_zone outer, block
    cdef int b, i, d, lo, hi, count = 0
    cdef bint is_prime
    if blocks < 1:
        raise ValueError("blocks must be >= 1")
    with nogil:
        # prof_zone_begin/_end: the runtime's exported functions.
        outer = prof.prof_zone_begin("cy.count_primes")
        for b in range(blocks):
            # The inline fast path compiled into this module: same contract.
            block = prof.prof_zone_begin_inline("cy.block")
            lo = <int>((<long long>n * b) // blocks)
            hi = <int>((<long long>n * (b + 1)) // blocks)
            if lo < 2:
                lo = 2
            for i in range(lo, hi):
                is_prime = True
                d = 2
                while d * d <= i:
                    if i % d == 0:
                        is_prime = False
                        break
                    d += 1
                if is_prime:
                    count += 1
            prof.prof_zone_end_inline(&block)
        prof.prof_zone_end(&outer)
        prof.prof_counter("cy.primes_found", count)
    return count
