/* uncovered.c - the name of the time no zone of a thread covers
 * (uncovered.h): one definition, so that every output can tell the row by
 * its pointer as well as by its name. */
#include "uncovered.h"

const char prof_no_stage[] = "(no stage)";
