/* cuda_poll.h - the collector side of CUDA zones (cuda_poll.c), beyond what
 * cuda.h gives the rest of src/. Private to the cuda*.c files
 * and fork.c. */
#ifndef PROF_CUDA_POLL_H
#define PROF_CUDA_POLL_H

/* In a forked child: nothing pending, the driver not known to be gone. */
void prof_cuda_poll_atfork_child(void);

#endif
