// header_ranks.cpp - header_ranks.c as C++11: prof_ranks.h first, on and
// compiled out.
#include "header_ranks.c"
