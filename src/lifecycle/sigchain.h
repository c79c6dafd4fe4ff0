/* sigchain.h - the runtime's SIGINT/SIGTERM handler put in front of one a
 * library installed after it (PyTorch's DataLoader worker handler), so
 * that the final report is written before that handler ends the process. */
#ifndef PROF_SIGCHAIN_H
#define PROF_SIGCHAIN_H

/* The API layer's own handler (signals.c), which needs no chaining. */
void prof_sigchain_own(void (*handler)(int));

/* After the final report for sig: hand it on, with the siginfo it came
 * with, to the handler it was chained in front of; else die by it (its
 * default action). Collector thread. */
void prof_signal_resend(int sig);

#endif
