/* signals.h - how a run ends on SIGINT and SIGTERM (signals.c). */
#ifndef PROF_SIGNALS_H
#define PROF_SIGNALS_H

/* Handle SIGINT and SIGTERM where the program left them at their default
 * action, and own the chain that torch's worker handler joins
 * (sigchain.h). Once per process, at the runtime's start. */
void prof_signals_install(void);

#endif
