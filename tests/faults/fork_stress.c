/* fork_stress.c - fork while other threads are inside zones and the
 * collector is draining, many times (driven by fork_check.py).
 *
 *     fork_stress DIR FORKS
 *
 * Three threads record zones for main's forks: before each fork main
 * raises a generation; each worker opens a zone, records BURST zones inside
 * it (records the collector is draining, with PROF_TRACE trace lines to
 * write, with PROF_SUMMARY_EVERY summaries to format) and holds the zone
 * open; main forks from inside a zone of its own once every worker is
 * there, then lets them close it. So every fork lands with every worker
 * inside a zone and fresh records in its ring, the seam this test exists
 * for, and what the workers record is bounded per fork (3 x 257 zones) and
 * not by how long a loaded machine takes: free-running workers wrote a
 * parent trace of ~650 MB for 200 forks on a quiet machine and more on a
 * busy one, where the run took 408 s. The children take turns:
 *   0  record 10 zones, check prof_stats() sees exactly those (the parent's
 *      statistics are gone), exit() normally: final summary, trace closed;
 *   1  record zones and _exit(0): no atexit, no final summary;
 *   2  exec this program ("exec-child"): a fresh runtime records 5 zones;
 *   3  record nothing and exit(): prints nothing (docs/CONFIG.md).
 * A child that does not exit within 20 s is a deadlock: it is killed and
 * the run fails. Main writes DIR/children.txt ("pid mode" lines) for the
 * driver, which checks every child's files. At the end the parent checks
 * that its own zones are all accounted for: recorded + dropped == issued. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <prof.h>

#include "../unit/check.h"

#define WORKERS 3
#define BURST 256

static int stop;
static unsigned gen;            /* raised by main before each fork */
static unsigned forked;         /* == gen once that fork is done */
static int ready;               /* workers inside their zone for gen */
static uint64_t issued[WORKERS];

static void nap_us(long us)
{
    struct timespec t = {0, us * 1000};
    nanosleep(&t, NULL);
}

static void *worker(void *arg)
{
    int id = (int)(long)arg;
    unsigned seen = 0;
    uint64_t n = 0;

    for (;;) {
        unsigned g;

        while ((g = __atomic_load_n(&gen, __ATOMIC_ACQUIRE)) == seen &&
               !__atomic_load_n(&stop, __ATOMIC_RELAXED))
            nap_us(50);
        if (g == seen)
            break;
        seen = g;
        {
            PROF_ZONE("work");
            for (int i = 0; i < BURST; i++) {
                PROF_ZONE("inner");
            }
            __atomic_add_fetch(&ready, 1, __ATOMIC_ACQ_REL);
            /* Inside "work" until main has forked. */
            while (__atomic_load_n(&forked, __ATOMIC_ACQUIRE) != g &&
                   !__atomic_load_n(&stop, __ATOMIC_RELAXED))
                nap_us(50);
        }
        n += 1 + BURST;
    }
    __atomic_store_n(&issued[id], n, __ATOMIC_RELEASE);
    return NULL;
}

/* Main, before a fork: every worker inside its zone with a fresh burst
 * recorded. 20 s is a hang (a worker stuck in prof), not load. */
static int workers_ready(unsigned g)
{
    uint64_t deadline = test_now_ns() + 20000000000ull;

    __atomic_store_n(&ready, 0, __ATOMIC_RELEASE);
    __atomic_store_n(&gen, g, __ATOMIC_RELEASE);
    while (__atomic_load_n(&ready, __ATOMIC_ACQUIRE) < WORKERS) {
        if (test_now_ns() > deadline) {
            fprintf(stderr, "fork %u: workers not inside their zones after 20 s\n", g);
            return -1;
        }
        nap_us(50);
    }
    return 0;
}

static int exec_child(void)
{
    for (int i = 0; i < 5; i++) {
        PROF_ZONE("exec");
    }
    CHECK_EQ(test_count("exec"), 5);
    CHECK_EQ(test_count("work"), 0);
    return 0;
}

/* In the child, right after fork. */
static void child(int mode, const char *self)
{
    switch (mode) {
    case 0:
        for (int i = 0; i < 10; i++) {
            PROF_ZONE("child");
        }
        if (test_count("child") != 10 || test_count("work") != 0 || test_count("inner") != 0) {
            fprintf(stderr, "child %d: counts child %llu work %llu inner %llu\n", (int)getpid(),
                    (unsigned long long)test_count("child"),
                    (unsigned long long)test_count("work"),
                    (unsigned long long)test_count("inner"));
            _exit(3);
        }
        exit(0);
    case 1:
        for (int i = 0; i < 10; i++) {
            PROF_ZONE("child");
        }
        _exit(0);
    case 2:
        execl(self, self, "exec-child", (char *)NULL);
        _exit(4);
    default:
        exit(0);
    }
}

static int wait_child(pid_t pid, int i)
{
    uint64_t deadline = test_now_ns() + 20000000000ull;
    int status;

    for (;;) {
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid)
            break;
        if (r < 0 && errno != EINTR) {
            perror("waitpid");
            return -1;
        }
        if (test_now_ns() > deadline) {
            fprintf(stderr, "child %d (fork %d, mode %d) did not exit in 20 s: deadlock\n",
                    (int)pid, i, i % 4);
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            return -1;
        }
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "child %d (fork %d, mode %d): %s %d\n", (int)pid, i, i % 4,
                WIFEXITED(status) ? "exit status" : "killed by signal",
                WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    pthread_t t[WORKERS];
    char path[4096];
    FILE *manifest;
    int forks, failed = 0;
    uint64_t total = 0, recorded, dropped;

    /* Each child starts its own collector thread, and ThreadSanitizer does
     * not support new threads after a multi-threaded fork. */
    if (TEST_TSAN)
        SKIP("ThreadSanitizer does not support threads in a child of a multi-threaded fork");
#if defined(__SANITIZE_ADDRESS__)
    /* This test forks while other threads allocate, and GCC 12's ASan
     * allocator is not fork-safe (fixed upstream, llvm-project #75290): a
     * child can hang in malloc. The release and TSan builds run it. */
    SKIP("GCC 12's AddressSanitizer allocator is not fork-safe with other threads running");
#endif

    if (argc > 1 && strcmp(argv[1], "exec-child") == 0)
        return exec_child();
    if (argc < 3)
        SKIP("usage: fork_stress DIR FORKS");
    forks = atoi(argv[2]);
    snprintf(path, sizeof path, "%s/children.txt", argv[1]);
    manifest = fopen(path, "w");
    CHECK(manifest != NULL);
    CHECK(prof_enabled());

    for (int i = 0; i < WORKERS; i++)
        CHECK(pthread_create(&t[i], NULL, worker, (void *)(long)i) == 0);
    for (int i = 0; i < forks; i++) {
        pid_t pid;
        PROF_ZONE("fork");

        fflush(manifest);
        if (workers_ready((unsigned)i + 1) != 0) {
            failed++;
            break;
        }
        pid = fork();
        CHECK(pid >= 0);
        if (pid == 0)
            child(i % 4, argv[0]);
        __atomic_store_n(&forked, (unsigned)i + 1, __ATOMIC_RELEASE);
        fprintf(manifest, "%d %d\n", (int)pid, i % 4);
        if (wait_child(pid, i) != 0)
            failed++;
    }
    fclose(manifest);
    __atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
    for (int i = 0; i < WORKERS; i++) {
        pthread_join(t[i], NULL);
        total += __atomic_load_n(&issued[i], __ATOMIC_ACQUIRE);
    }
    CHECK_EQ(prof_flush(), 0);
    recorded = test_count("work") + test_count("inner");
    dropped = test_dropped();
    printf("%d forks, %d failed; workers issued %llu zones: %llu recorded + %llu dropped\n",
           forks, failed, (unsigned long long)total, (unsigned long long)recorded,
           (unsigned long long)dropped);
    CHECK_EQ(failed, 0);
    CHECK_EQ(test_count("fork"), forks);
    CHECK_EQ_U64(recorded + dropped, total);
    return 0;
}
