/* prof_version.h - the version of the prof headers, read by the build. */
#ifndef PROF_VERSION_H
#define PROF_VERSION_H

#define PROF_VERSION_MAJOR 0
#define PROF_VERSION_MINOR 1
#define PROF_VERSION_PATCH 0
#define PROF_VERSION_STRING "0.1.0"

/* One number that compares: PROF_VERSION >= PROF_VERSION_AT(0, 2, 0). */
#define PROF_VERSION_AT(major, minor, patch) (((major) << 16) | ((minor) << 8) | (patch))
#define PROF_VERSION PROF_VERSION_AT(PROF_VERSION_MAJOR, PROF_VERSION_MINOR, PROF_VERSION_PATCH)

#endif /* PROF_VERSION_H */
