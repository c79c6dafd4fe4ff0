/* hist_ref.c - the runtime's histogram (src/base/hist.c) as a filter, so that
 * the tools' Python copy (tools/prof_tools.py, Hist) is tested against it:
 * reads values (ns, one per line) on stdin, takes quantiles as arguments,
 * prints each non-empty bucket ("b lo hi count") and each quantile clamped
 * to the values' [min, max] ("q quantile value", %.17g) as
 * prof_hist_quantiles gives them. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "hist.h"

static void bucket(void *ctx, uint64_t lo, uint64_t hi, uint64_t count)
{
    (void)ctx;
    printf("b %" PRIu64 " %" PRIu64 " %" PRIu64 "\n", lo, hi, count);
}

int main(int argc, char **argv)
{
    struct prof_hist h = {0};
    uint64_t v, min = UINT64_MAX, max = 0;

    while (scanf("%" SCNu64, &v) == 1) {
        if (prof_hist_record(&h, v) != 0)
            return 1;
        min = v < min ? v : min;
        max = v > max ? v : max;
    }
    prof_hist_foreach(&h, bucket, NULL);
    for (int i = 1; i < argc; i++) {
        double q = strtod(argv[i], NULL), value;

        prof_hist_quantiles(&h, &q, &value, 1, min, max);
        printf("q %s %.17g\n", argv[i], value);
    }
    prof_hist_clear(&h);
    return 0;
}
