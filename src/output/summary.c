/* summary.c - the summary (summary.h): its figures gathered once
 * (summary_model.c), then written as the table (summary_text.c) or as one
 * JSON line (summary_json.c), docs/FORMATS.md. All of it runs off the hot
 * path: on the collector thread, or on the thread that asked for a
 * summary, with the runtime lock held. */
#include "prof.h"
#include "summary.h"
#include "summary_json.h"
#include "summary_model.h"
#include "summary_text.h"

static const struct prof_children_ended *(*children_check)(void);

void prof_summary_children_hook(const struct prof_children_ended *(*check_locked)(void))
{
    children_check = check_locked;
}

void prof_summary_format(struct prof_buf *b, int format, enum prof_summary_kind kind,
                         uint64_t step, uint64_t now, uint64_t windows)
{
    static const struct prof_children_ended none;
    const struct prof_summary_model *m;

    /* Workers found ended are logged here, and listed in the summary. */
    m = prof_summary_model_get(format, kind, step, now, windows,
                               children_check != NULL ? children_check() : &none);
    if (format == PROF_FORMAT_JSON)
        prof_summary_json(b, m);
    else
        prof_summary_text(b, m);
    prof_summary_model_free(m);
}
