/* ranks_table.h - the cross-rank table, text or JSON (ranks_table.c). */
#ifndef PROF_RANKS_TABLE_H
#define PROF_RANKS_TABLE_H

#include "json.h"
#include "ranks.h"

/* Format the table of a state whose rounds are all in (PROF_FORMAT_TEXT
 * or PROF_FORMAT_JSON) into out. 0; -EINVAL for a state whose rounds are
 * not all in; -ENOMEM. */
int prof_ranks_format_state(struct prof_buf *out, const struct ranks_state *s, int format);

#endif
