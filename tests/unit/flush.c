/* flush.c - every zone that ended (on any thread) before prof_flush()
 * returns is counted:
 *   - three threads that live through the test record a burst, meet the
 *     main thread at a barrier, and the main thread flushes: the count is
 *     the exact running total, round after round;
 *   - threads that record and exit (joined) before the flush: their rings
 *     are drained before they are freed;
 *   - with PROF_TRACE set (argv[1]), after prof_flush() the trace file on
 *     disk already holds every one of those zones. */
#include <prof.h>

#include <fcntl.h>
#include <unistd.h>

#include "check.h"

#define NTHREADS 3

static struct test_barrier start, done;
static long rounds, per_round;
static int stop;

static void *persistent(void *arg)
{
    (void)arg;
    for (;;) {
        test_barrier_wait(&start);
        if (__atomic_load_n(&stop, __ATOMIC_RELAXED))
            return NULL;
        for (long i = 0; i < per_round; i++) {
            PROF_ZONE("flushed");
        }
        test_barrier_wait(&done);
    }
}

static void *once(void *arg)
{
    (void)arg;
    for (long i = 0; i < per_round; i++) {
        PROF_ZONE("exited");
    }
    return NULL;
}

/* Occurrences of needle in the file (read whole). */
static long count_in_file(const char *path, const char *needle)
{
    FILE *f = fopen(path, "rb");
    char *data;
    long size, n = 0;

    CHECK(f != NULL);
    CHECK_EQ(fseek(f, 0, SEEK_END), 0);
    size = ftell(f);
    rewind(f);
    data = malloc((size_t)size + 1);
    CHECK(data != NULL);
    CHECK_EQ(fread(data, 1, (size_t)size, f), size);
    data[size] = '\0';
    fclose(f);
    /* A plain scan: sanitizers' strstr() checks the whole haystack on
     * every call, which makes a loop of them quadratic. */
    for (long i = 0, k = (long)strlen(needle); i + k <= size; i++)
        if (data[i] == needle[0] && memcmp(data + i, needle, (size_t)k) == 0)
            n++;
    free(data);
    return n;
}

int main(int argc, char **argv)
{
    const char *trace = argc > 1 ? argv[1] : NULL;
    pthread_t t[NTHREADS];
    long expect = 0;

    rounds = test_scale(300);
    per_round = 100;
    CHECK_EQ(prof_enable(1), 0);
    test_barrier_init(&start, NTHREADS + 1);
    test_barrier_init(&done, NTHREADS + 1);
    for (int i = 0; i < NTHREADS; i++)
        CHECK_EQ(pthread_create(&t[i], NULL, persistent, NULL), 0);
    for (long r = 0; r < rounds; r++) {
        test_barrier_wait(&start);
        {
            PROF_ZONE("flushed");   /* the main thread's own, just ended */
        }
        test_barrier_wait(&done);
        CHECK_EQ(prof_flush(), 0);
        expect += NTHREADS * per_round + 1;
        if (trace != NULL && r % 50 == 0)
            CHECK_EQ(count_in_file(trace, "\"name\":\"flushed\""), expect);
        CHECK_EQ(test_count("flushed"), expect);
    }
    __atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
    test_barrier_wait(&start);
    for (int i = 0; i < NTHREADS; i++)
        CHECK_EQ(pthread_join(t[i], NULL), 0);

    expect = 0;
    for (long r = 0; r < rounds / 3 + 1; r++) {
        for (int i = 0; i < 2; i++)
            CHECK_EQ(pthread_create(&t[i], NULL, once, NULL), 0);
        for (int i = 0; i < 2; i++)
            CHECK_EQ(pthread_join(t[i], NULL), 0);
        CHECK_EQ(prof_flush(), 0);
        expect += 2 * per_round;
        if (trace != NULL && r % 20 == 0)
            CHECK_EQ(count_in_file(trace, "\"name\":\"exited\""), expect);
        CHECK_EQ(test_count("exited"), expect);
    }
    CHECK_EQ(test_dropped(), 0);
    test_barrier_destroy(&start);
    test_barrier_destroy(&done);
    return 0;
}
