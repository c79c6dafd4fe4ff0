/* check.h - checks for the C test programs.
 *
 * Every check stays on under NDEBUG, prints file:line, the failing
 * expression and (for the comparisons) both values, and exits 1. SKIP()
 * exits 77, which meson reports as skipped. Header-only; a test includes it
 * after <prof.h> (which enables the test_summary/test_stats helpers).
 *
 *     CHECK(x != NULL);
 *     CHECK_EQ(st.count, 4000);          // integers or doubles; both printed
 *     CHECK_NEAR(p50, exact, 0.01);      // relative error
 *     CHECK_STR_CONTAINS(text, "wall%");
 *     if (!have_feature) SKIP("no feature");
 *
 * test_scale(n) shrinks iteration counts when PROF_TEST_QUICK is set (for
 * slow machines and builds): n / 10, at least 1.
 */
#ifndef PROF_TEST_CHECK_H
#define PROF_TEST_CHECK_H

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CHECK_FAIL_(...)                                                      \
    do {                                                                      \
        fprintf(stderr, "%s:%d: check failed: ", __FILE__, __LINE__);         \
        fprintf(stderr, __VA_ARGS__);                                         \
        fputc('\n', stderr);                                                  \
        fflush(stderr);                                                       \
        exit(1);                                                              \
    } while (0)

#define CHECK(expr)                                                           \
    do {                                                                      \
        if (!(expr))                                                          \
            CHECK_FAIL_("%s", #expr);                                         \
    } while (0)

/* Like CHECK, with a printf-style explanation. */
#define CHECK_MSG(expr, ...)                                                  \
    do {                                                                      \
        if (!(expr)) {                                                        \
            fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__,  \
                    #expr);                                                   \
            fprintf(stderr, __VA_ARGS__);                                     \
            fputc('\n', stderr);                                              \
            fflush(stderr);                                                   \
            exit(1);                                                          \
        }                                                                     \
    } while (0)

/* Integers and floating point alike: long double holds every 64-bit
 * integer exactly (x87 extended on x86-64, binary128 on arm64). */
#define CHECK_CMP_(a, op, b)                                                  \
    do {                                                                      \
        long double check_a_ = (long double)(a), check_b_ = (long double)(b); \
        if (!(check_a_ op check_b_))                                          \
            CHECK_FAIL_("%s %s %s (%.21Lg vs %.21Lg)", #a, #op, #b, check_a_, \
                        check_b_);                                            \
    } while (0)

#define CHECK_EQ(a, b) CHECK_CMP_(a, ==, b)
#define CHECK_NE(a, b) CHECK_CMP_(a, !=, b)
#define CHECK_LT(a, b) CHECK_CMP_(a, <, b)
#define CHECK_LE(a, b) CHECK_CMP_(a, <=, b)
#define CHECK_GT(a, b) CHECK_CMP_(a, >, b)
#define CHECK_GE(a, b) CHECK_CMP_(a, >=, b)

/* Unsigned 64-bit equality (values above LLONG_MAX). */
#define CHECK_EQ_U64(a, b)                                                    \
    do {                                                                      \
        uint64_t check_a_ = (uint64_t)(a), check_b_ = (uint64_t)(b);          \
        if (check_a_ != check_b_)                                             \
            CHECK_FAIL_("%s == %s (%" PRIu64 " vs %" PRIu64 ")", #a, #b,      \
                        check_a_, check_b_);                                  \
    } while (0)

/* |a - b| <= rel * |b| */
#define CHECK_NEAR(a, b, rel)                                                 \
    do {                                                                      \
        double check_a_ = (double)(a), check_b_ = (double)(b);                \
        if (!(fabs(check_a_ - check_b_) <= (rel) * fabs(check_b_)))          \
            CHECK_FAIL_("%s ~= %s within %g (%.17g vs %.17g)", #a, #b,        \
                        (double)(rel), check_a_, check_b_);                   \
    } while (0)

#define CHECK_STR_EQ(a, b)                                                    \
    do {                                                                      \
        const char *check_a_ = (a), *check_b_ = (b);                          \
        if (check_a_ == NULL || check_b_ == NULL ||                           \
            strcmp(check_a_, check_b_) != 0)                                  \
            CHECK_FAIL_("%s == %s (\"%s\" vs \"%s\")", #a, #b,                \
                        check_a_ ? check_a_ : "(null)",                       \
                        check_b_ ? check_b_ : "(null)");                      \
    } while (0)

#define CHECK_STR_CONTAINS(hay, needle)                                       \
    do {                                                                      \
        const char *check_h_ = (hay), *check_n_ = (needle);                   \
        if (check_h_ == NULL || strstr(check_h_, check_n_) == NULL)           \
            CHECK_FAIL_("%s contains \"%s\"; it is:\n%s", #hay, check_n_,    \
                        check_h_ ? check_h_ : "(null)");                      \
    } while (0)

#define SKIP(...)                                                             \
    do {                                                                      \
        fprintf(stderr, "SKIP: ");                                            \
        fprintf(stderr, __VA_ARGS__);                                         \
        fputc('\n', stderr);                                                  \
        exit(77);                                                             \
    } while (0)

/* Nonzero under ThreadSanitizer, which runs threads of its own (so that
 * counting a process's threads says nothing about the library's). */
#if defined(__SANITIZE_THREAD__)
#  define TEST_TSAN 1
#elif defined(__has_feature)
#  if __has_feature(thread_sanitizer)
#    define TEST_TSAN 1
#  endif
#endif
#ifndef TEST_TSAN
#  define TEST_TSAN 0
#endif

/* The process's threads now (/proc/self/task); skips the test without
 * /proc. */
static inline int test_threads_now(void)
{
    DIR *d = opendir("/proc/self/task");
    struct dirent *e;
    int n = 0;

    if (d == NULL)
        SKIP("no /proc/self/task");
    while ((e = readdir(d)) != NULL)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

/* The thread count, where it says something about the library. */
#define CHECK_THREADS(n)                                                      \
    do {                                                                      \
        if (!TEST_TSAN)                                                       \
            CHECK_EQ(test_threads_now(), (n));                                \
    } while (0)

static inline long test_scale(long n)
{
    const char *q = getenv("PROF_TEST_QUICK");

    if (q != NULL && *q != '\0' && strcmp(q, "0") != 0)
        n /= 10;
    return n > 0 ? n : 1;
}

/* A reproducible pseudo-random sequence (xorshift64*); *state must not
 * start at 0. */
static inline uint64_t test_rng(uint64_t *state)
{
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    return *state * 2685821657736338717ull;
}

/* CPU work of about ns nanoseconds, measured on CLOCK_MONOTONIC (never a
 * sleep: a test's timings must come from running code). */
static inline uint64_t test_now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline void test_spin_ns(uint64_t ns)
{
    uint64_t end = test_now_ns() + ns;

    while (test_now_ns() < end) {
    }
}

/* A reusable barrier (pthread_barrier_t is optional in POSIX; this one is
 * plain mutex + condition variable, which TSan understands). */
struct test_barrier {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    unsigned n, waiting;
    unsigned long generation;
};

static inline void test_barrier_init(struct test_barrier *b, unsigned n)
{
    pthread_mutex_init(&b->lock, NULL);
    pthread_cond_init(&b->cond, NULL);
    b->n = n;
    b->waiting = 0;
    b->generation = 0;
}

static inline void test_barrier_wait(struct test_barrier *b)
{
    unsigned long gen;

    pthread_mutex_lock(&b->lock);
    gen = b->generation;
    if (++b->waiting == b->n) {
        b->waiting = 0;
        b->generation++;
        pthread_cond_broadcast(&b->cond);
    } else {
        while (gen == b->generation)
            pthread_cond_wait(&b->cond, &b->lock);
    }
    pthread_mutex_unlock(&b->lock);
}

static inline void test_barrier_destroy(struct test_barrier *b)
{
    pthread_mutex_destroy(&b->lock);
    pthread_cond_destroy(&b->cond);
}

/* The number of a JSON summary's top-level integer field, e.g. "dropped"
 * (the first occurrence of "key": in text). Exits on a missing key. */
static inline uint64_t test_json_u64(const char *text, const char *key)
{
    char pat[128];
    const char *p;

    snprintf(pat, sizeof pat, "\"%s\":", key);
    p = strstr(text, pat);
    if (p == NULL)
        CHECK_FAIL_("no \"%s\" in the JSON summary: %.400s", key, text);
    return strtoull(p + strlen(pat), NULL, 10);
}

/* With prof.h: the summary now, whole, in a malloc'd string (free it). */
#ifdef PROF_H
static inline char *test_summary(int format)
{
    size_t cap = 4096;

    for (;;) {
        char *buf = (char *)malloc(cap);   /* cast: C++ includes this too */
        int n;

        if (buf == NULL)
            CHECK_FAIL_("out of memory");
        n = prof_summary_snprint(buf, cap, format);
        if (n < 0)
            CHECK_FAIL_("prof_summary_snprint: %d (%s)", n, strerror(-n));
        if ((size_t)n < cap)
            return buf;
        free(buf);
        cap = (size_t)n + 4096;
    }
}

/* Records lost so far, from the JSON summary's "dropped". */
static inline uint64_t test_dropped(void)
{
    char *s = test_summary(PROF_FORMAT_JSON);
    uint64_t d = test_json_u64(s, "dropped");

    free(s);
    return d;
}

/* count of a stage, or 0 when it has none (-ENOENT). */
static inline uint64_t test_count(const char *name)
{
    prof_stage_stats st;
    int err = prof_stats(name, &st);

    if (err == -ENOENT)
        return 0;
    if (err != 0)
        CHECK_FAIL_("prof_stats(\"%s\"): %d (%s)", name, err, strerror(-err));
    return st.count;
}

static inline prof_stage_stats test_stats(const char *name)
{
    prof_stage_stats st;
    int err = prof_stats(name, &st);

    if (err != 0)
        CHECK_FAIL_("prof_stats(\"%s\"): %d (%s)", name, err, strerror(-err));
    return st;
}
#endif

#endif
