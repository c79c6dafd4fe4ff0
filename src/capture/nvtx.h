/* nvtx.h - PROF_NVTX=1: every zone also becomes an NVTX range. */
#ifndef PROF_NVTX_H
#define PROF_NVTX_H

/* Load NVTX at run time. Returns 0 when ranges can be emitted, or a
 * negative errno (one notice logged). */
int prof_nvtx_init(void);
void prof_nvtx_push(const char *name);   /* application thread */
void prof_nvtx_pop(void);

#endif
