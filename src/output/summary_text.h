/* summary_text.h - a summary's model written as the table (summary_text.c). */
#ifndef PROF_SUMMARY_TEXT_H
#define PROF_SUMMARY_TEXT_H

#include "json.h"
#include "summary_model.h"

/* Append m (a text model, prof_summary_model_get) to b as the table. */
void prof_summary_text(struct prof_buf *b, const struct prof_summary_model *m);

#endif
