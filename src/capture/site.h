/* site.h - telling a zone's call site (struct prof_site_, prof_impl.h) from a
 * plain name. Names reach the collector as raw pointers; a pointer is a
 * site when it is 8-aligned and begins with the magic and its own address.
 * The test reads byte by byte and stops at the first mismatch, and the
 * magic has no zero byte, so it never reads past a string's end. */
#ifndef PROF_SITE_H
#define PROF_SITE_H

#include "prof.h"

/* The site raw points to, or NULL when raw is a name (or NULL). */
const struct prof_site_ *prof_site_of(const char *raw);

/* The name a raw pointer stands for: the site's name, or raw itself. */
const char *prof_site_name(const char *raw);

#endif
