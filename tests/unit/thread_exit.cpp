/* thread_exit.cpp - thread_exit.c built as C++, where the zone left open
 * ends while pthread_exit unwinds the thread (see there). */
#include "thread_exit.c"
