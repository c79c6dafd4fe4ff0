/* units.h - durations and byte sizes as prof's tables say them (units.c):
 * three significant figures and a unit, whatever the program's locale.
 * The summary, the cross-rank table and loss.c's line all write their
 * durations and sizes with these. */
#ifndef PROF_UNITS_H
#define PROF_UNITS_H

#include <stddef.h>
#include <stdint.h>

/* A duration in ns: "812 ns", "1.50 us", "4.57 ms", "1.234 s". */
void prof_fmt_dur(char *buf, size_t size, double ns);

/* Bytes: "512 B", "512 KiB", "205.3 MiB", "1.23 GiB". */
void prof_fmt_bytes(char *buf, size_t size, uint64_t bytes);

#endif
