/* cpu_eintr.c - the on-CPU sampler is safe to leave on: stages that spin
 * and then block (a pipe read, poll, nanosleep, waitpid, a condition
 * wait) are sampled (their stages have an on-CPU figure) and no call
 * returns EINTR. The sampler's timer runs on the thread's CPU time, so it
 * fires only while the thread runs, never inside a call that waits; its
 * handler has SA_RESTART for the calls that restart. Each stage spins
 * 2 ms before it blocks, so that timers fire right before the calls.
 *
 *     cpu_eintr            the calls above, 25 rounds, on two threads
 *     cpu_eintr held       the program holds the sampler's signal before prof
 *                          starts: prof leaves it, says so, no cpu% column
 *     cpu_eintr takeover   the program installs its own handler for the
 *                          sampler's signal: sampling stops, said once
 *     cpu_eintr off        recording switched off: no signal from the
 *                          sampler until it is back on
 *     cpu_eintr sigprof    the program's own profiler (ITIMER_PROF and a
 *                          SIGPROF handler) gets its signals while the
 *                          sampler runs beside it */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <prof.h>

#include "check.h"

#define ROUNDS 25

static int eintr[5];
static const char *names[5] = {"read", "poll", "nanosleep", "waitpid", "cond_wait"};
/* What a poster thread does 1 ms after it starts: write a byte to fd, or
 * (fd < 0) signal the condition. One per round and thread. */
struct post {
    int fd;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int signalled;
};

static void *poster(void *arg)
{
    struct post *p = arg;
    struct timespec ms = {0, 1000000};

    nanosleep(&ms, NULL);
    if (p->fd >= 0) {
        CHECK_EQ(write(p->fd, "x", 1), 1);
    } else {
        pthread_mutex_lock(&p->mu);
        p->signalled = 1;
        pthread_cond_signal(&p->cv);
        pthread_mutex_unlock(&p->mu);
    }
    return NULL;
}

static void count(int k, int rc)
{
    if (rc < 0 && errno == EINTR)
        __atomic_fetch_add(&eintr[k], 1, __ATOMIC_RELAXED);
}

static void *rounds(void *arg)
{
    (void)arg;
    for (int i = 0; i < ROUNDS; i++) {
        int p[2];
        pthread_t th;
        char c;
        struct post post = {-1, PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};

        CHECK_EQ(pipe(p), 0);
        post.fd = p[1];
        {
            PROF_ZONE("read");
            CHECK_EQ(pthread_create(&th, NULL, poster, &post), 0);
            test_spin_ns(2000000);
            count(0, (int)read(p[0], &c, 1));
        }
        pthread_join(th, NULL);
        close(p[0]);
        close(p[1]);
        {
            PROF_ZONE("poll");
            struct pollfd none = {-1, 0, 0};
            test_spin_ns(2000000);
            count(1, poll(&none, 1, 1));
        }
        {
            PROF_ZONE("nanosleep");
            struct timespec ms = {0, 1000000};
            test_spin_ns(2000000);
            count(2, nanosleep(&ms, NULL));
        }
        {
            PROF_ZONE("waitpid");
            pid_t pid = fork();
            CHECK(pid >= 0);
            if (pid == 0) {
                struct timespec ms = {0, 1000000};
                nanosleep(&ms, NULL);
                _exit(0);
            }
            test_spin_ns(2000000);
            count(3, (int)waitpid(pid, NULL, 0));
        }
        {
            PROF_ZONE("cond_wait");
            post.fd = -1;
            CHECK_EQ(pthread_create(&th, NULL, poster, &post), 0);
            test_spin_ns(2000000);
            pthread_mutex_lock(&post.mu);
            while (!post.signalled)   /* never EINTR by POSIX: counted anyway */
                count(4, -pthread_cond_wait(&post.cv, &post.mu));
            pthread_mutex_unlock(&post.mu);
            pthread_join(th, NULL);
        }
    }
    return NULL;
}

static volatile sig_atomic_t theirs;

static void their_handler(int sig)
{
    (void)sig;
    theirs++;
}

static int held_said;

static void held_logger(void *user, const char *msg)
{
    (void)user;
    held_said += strstr(msg, "already has a handler") != NULL;
}

int main(int argc, char **argv)
{
    pthread_t th[2];

    if (argc > 1 && strcmp(argv[1], "held") == 0) {
        /* The program holds the signal before prof starts: prof leaves it
         * (its handler stays, no timer sends it anything), says so, and
         * the table has no cpu% column. */
        struct sigaction sa, now;
        prof_stage_stats st;
        char *text;

        memset(&sa, 0, sizeof sa);
        sa.sa_handler = their_handler;
        sa.sa_flags = SA_RESTART;
        CHECK_EQ(sigaction(SIGRTMAX - 3, &sa, NULL), 0);
        prof_set_logger(held_logger, NULL);
        CHECK_EQ(prof_enable(1), 0);
        {
            PROF_ZONE("spin");
            test_spin_ns(100000000);
        }
        CHECK_EQ(prof_stats("spin", &st), 0);
        CHECK(!(st.flags & PROF_STAGE_CPU));
        CHECK_EQ(theirs, 0);
        CHECK_EQ(sigaction(SIGRTMAX - 3, NULL, &now), 0);
        CHECK(now.sa_handler == their_handler);
        CHECK_EQ(held_said, 1);
        text = test_summary(PROF_FORMAT_TEXT);
        CHECK(strstr(text, "cpu%") == NULL);
        free(text);
        return 0;
    }
    CHECK_EQ(prof_enable(1), 0);
    if (argc > 1 && strcmp(argv[1], "takeover") == 0) {
        struct sigaction sa;
        prof_stage_stats st;
        char *text;
        int before;

        {
            PROF_ZONE("before");
            test_spin_ns(100000000);
        }
        CHECK_EQ(prof_stats("before", &st), 0);
        CHECK(st.flags & PROF_STAGE_CPU);
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = their_handler;
        sa.sa_flags = SA_RESTART;
        CHECK_EQ(sigaction(SIGRTMAX - 3, &sa, NULL), 0);
        prof_flush();            /* a collector pass: it sees the new handler */
        prof_flush();
        before = theirs;
        {
            PROF_ZONE("after");
            test_spin_ns(100000000);
        }
        /* Every timer was deleted: the program's handler gets nothing more. */
        CHECK_EQ(theirs, before);
        text = test_summary(PROF_FORMAT_TEXT);
        CHECK_STR_CONTAINS(text, "cpu%");   /* what was sampled before */
        free(text);
        return 0;
    }
    if (argc > 1 && strcmp(argv[1], "off") == 0) {
        struct sigaction sa;
        prof_stage_stats st;

        {
            PROF_ZONE("on");
            test_spin_ns(50000000);
        }
        prof_enable(0);
        prof_flush();            /* a collector pass: it disarms the timers */
        prof_enable(1);
        prof_flush();            /* and arms them again */
        {
            PROF_ZONE("again");
            test_spin_ns(200000000);
        }
        CHECK_EQ(prof_stats("again", &st), 0);
        CHECK_MSG(st.cpu_ns > 0, "no sample once recording was back on");
        prof_enable(0);
        prof_flush();
        /* Their handler for the sampler's signal sees what prof sends
         * while it is off: nothing (the collector's pass that would find
         * the takeover only comes later). */
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = their_handler;
        sa.sa_flags = SA_RESTART;
        CHECK_EQ(sigaction(SIGRTMAX - 3, &sa, NULL), 0);
        test_spin_ns(200000000);
        CHECK_EQ(theirs, 0);
        return 0;
    }
    if (argc > 1 && strcmp(argv[1], "sigprof") == 0) {
        struct sigaction sa, cur;
        struct itimerval it = {{0, 5000}, {0, 5000}};
        prof_stage_stats st;
        uint64_t end;

        memset(&sa, 0, sizeof sa);
        sa.sa_handler = their_handler;
        sa.sa_flags = SA_RESTART;
        CHECK_EQ(sigaction(SIGPROF, &sa, NULL), 0);
        CHECK_EQ(setitimer(ITIMER_PROF, &it, NULL), 0);
        {
            PROF_ZONE("profiled");
            /* Until their profiler has fired a few times (its timer runs
             * on the process's CPU time: a busy machine stretches it). */
            end = test_now_ns() + 10000000000ull;
            while (theirs < 5 && test_now_ns() < end)
                test_spin_ns(1000000);
        }
        memset(&it, 0, sizeof it);
        setitimer(ITIMER_PROF, &it, NULL);
        CHECK(theirs >= 5);
        CHECK_EQ(sigaction(SIGPROF, NULL, &cur), 0);
        CHECK(cur.sa_handler == their_handler);   /* prof never touched it */
        CHECK_EQ(prof_stats("profiled", &st), 0);
        CHECK(st.flags & PROF_STAGE_CPU);
        return 0;
    }
    for (int i = 0; i < 2; i++)
        CHECK_EQ(pthread_create(&th[i], NULL, rounds, NULL), 0);
    for (int i = 0; i < 2; i++)
        CHECK_EQ(pthread_join(th[i], NULL), 0);
    for (int k = 0; k < 5; k++) {
        prof_stage_stats st;

        CHECK_EQ(prof_stats(names[k], &st), 0);
        fprintf(stderr, "%-10s %d EINTR, self %.1f ms, on CPU %.1f ms\n", names[k], eintr[k],
                st.self_ns / 1e6, st.cpu_ns / 1e6);
        CHECK_MSG(st.flags & PROF_STAGE_CPU, "%s: not sampled", names[k]);
        CHECK_EQ(eintr[k], 0);
    }
    return 0;
}
