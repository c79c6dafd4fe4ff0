/* summary_json.h - a summary's model written as one JSON line
 * (summary_json.c). */
#ifndef PROF_SUMMARY_JSON_H
#define PROF_SUMMARY_JSON_H

#include "json.h"
#include "summary_model.h"

/* Append m (a JSON model, prof_summary_model_get) to b as one line. */
void prof_summary_json(struct prof_buf *b, const struct prof_summary_model *m);

#endif
