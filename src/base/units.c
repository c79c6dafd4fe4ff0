/* units.c - durations and byte sizes as prof's tables say them
 * (units.h), on json.c's locale-free fixed-point numbers. */
#include <stdio.h>

#include "json.h"
#include "units.h"

void prof_fmt_dur(char *buf, size_t size, double ns)
{
    static const struct { double below, scale; int decimals; const char *unit; } u[] = {
        {1e3, 1, 0, " ns"}, {1e6, 1e3, 2, " us"}, {1e9, 1e6, 2, " ms"}, {0, 1e9, 3, " s"},
    };
    size_t i = 0, n;

    while (i < 3 && !(ns < u[i].below))
        i++;
    n = prof_fmt_fixed(buf, size, ns / u[i].scale, u[i].decimals);
    snprintf(buf + n, size - n, "%s", u[i].unit);
}

void prof_fmt_bytes(char *buf, size_t size, uint64_t bytes)
{
    static const char *units[] = {"KiB", "MiB", "GiB", "TiB"};
    double v = (double)bytes;
    char num[24];
    int u = -1;

    if (bytes < 1024) {
        snprintf(buf, size, "%llu B", (unsigned long long)bytes);
        return;
    }
    while (v >= 1024.0 && u < 3) {
        v /= 1024.0;
        u++;
    }
    /* Three significant figures, as the durations: 1.23 GiB, 205 MiB. */
    prof_fmt_fixed(num, sizeof num, v, v < 10.0 ? 2 : v < 100.0 ? 1 : 0);
    snprintf(buf, size, "%s %s", num, units[u]);
}
