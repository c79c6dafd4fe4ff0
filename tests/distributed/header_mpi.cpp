// header_mpi.c as C++11.
#include "header_mpi.c"
