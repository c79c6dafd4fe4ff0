/* prog.c - the program the integration drivers (*.py) run under different
 * environments. One mode per behaviour, chosen by argv[1]; it prints what
 * the driver needs to know on stdout as key=value lines and exits 0 unless
 * something it checks itself failed (then 1, with the reason on stderr).
 *
 *   basic [steps]       a small training loop: two threads with names,
 *                       nested zones, a counter, marks, steps
 *   names               hostile stage, counter, mark and thread names
 *   forever             basic's loop without end; prints ready=1 once both
 *                       threads' first events were flushed (signal tests)
 *   steps N [US]        N iterations of about US microseconds (250), zone
 *                       "iter <i>" (+ "inner") each, prof_step() after each
 *   many N              N zones, flushing every 5000 (trace size cap)
 *   refit N             a thread records N outer zones, each around 8
 *                       back-to-back inner ones, while the main thread
 *                       flushes without pause (each drain re-fits the
 *                       clock rate): 25 flushes at least, interleaved
 *   fork N              N children each recording zones, waited for
 *   fork_threads N      two threads record without pause while the main
 *                       thread forks N times; each child records, flushes
 *                       and exits (exit or _exit, alternately)
 *   exit_thread         threads inside zones; one of them calls exit(0)
 *   main_returns        main returns while threads are inside zones
 *   env [enable]        for the environment matrix: reports what the
 *                       configuration did (enabled, drops of a burst,
 *                       counts, periodic summaries seen by steps)
 *   periodic_time       runs until two timed periodic summaries arrived
 *   stages N            N steps of 32 stages ("stage_00".."stage_31"), each
 *                       run 4 times a step for 1 to 97 us (spread
 *                       durations: full histograms) (summary size)
 *   fork_periodic N     N children record while the parent records until
 *                       two timed periodic summaries of its own arrived;
 *                       each child then prints child_periodic=K, the
 *                       timed periodic summaries it made itself
 *   sanitizer           prints sanitizer=none|address|thread
 */
#include <prof.h>

#include <errno.h>
#include <sched.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define FAIL(...)                                                             \
    do {                                                                      \
        fprintf(stderr, "prog: %s:%d: ", __FILE__, __LINE__);                 \
        fprintf(stderr, __VA_ARGS__);                                         \
        fputc('\n', stderr);                                                  \
        exit(1);                                                              \
    } while (0)

static uint64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void spin_ns(uint64_t ns)
{
    uint64_t end = now_ns() + ns;

    while (now_ns() < end) {
    }
}

/* ------------------------------------------------------------------------ */

static int stop_workers;
static long worker_batches;     /* load_batch zones the worker has ended */

static void *worker(void *arg)
{
    long n = (long)(intptr_t)arg;

    prof_thread_name("worker");
    for (long i = 0; n < 0 || i < n; i++) {
        if (__atomic_load_n(&stop_workers, __ATOMIC_RELAXED))
            break;
        {
            PROF_ZONE("load_batch");
            {
                PROF_ZONE("read");
                spin_ns(20000);
            }
        }
        __atomic_fetch_add(&worker_batches, 1, __ATOMIC_RELEASE);
    }
    return NULL;
}

static void one_step(long i)
{
    PROF_ZONE("train_step");
    {
        PROF_ZONE("forward");
        spin_ns(30000);
        {
            PROF_ZONE("attention");
            spin_ns(20000);
        }
    }
    {
        PROF_ZONE("backward");
        spin_ns(40000);
    }
    PROF_COUNTER("loss", 1.0 / (double)(i + 1));
}

static int mode_basic(long steps)
{
    pthread_t t;

    prof_thread_name("main-loop");
    if (pthread_create(&t, NULL, worker, (void *)(intptr_t)steps) != 0)
        FAIL("pthread_create");
    for (long i = 0; i < steps; i++) {
        one_step(i);
        if (i == steps / 2)
            PROF_MARK("epoch");
        prof_step();
    }
    pthread_join(t, NULL);
    printf("pid=%d\n", (int)getpid());
    return 0;
}

static int mode_forever(void)
{
    pthread_t t;

    prof_thread_name("main-loop");
    if (pthread_create(&t, NULL, worker, (void *)(intptr_t)-1) != 0)
        FAIL("pthread_create");
    for (long i = 0;; i++) {
        one_step(i);
        prof_step();
        /* A signal test expects both threads in the trace: on a loaded
         * machine (a sanitizer, 2 cores) the worker may not have run yet
         * after 20 steps, and a signal then finds nothing of it. */
        if (i == 20) {
            while (__atomic_load_n(&worker_batches, __ATOMIC_ACQUIRE) == 0)
                sched_yield();
            prof_flush();
            printf("ready=1\npid=%d\n", (int)getpid());
            fflush(stdout);
        }
    }
}

/* ------------------------------------------------------------------------ */

static int mode_names(void)
{
    static const char *const names[] = {
        "plain",
        "",
        "with \"quotes\"",
        "back\\slash",
        "new\nline",
        "tab\there",
        "ctrl \x01\x02\x1f\x7f",
        "esc \x1b[31mred\x1b[0m \x1b]0;title\x07",
        "fmt %s%n%x%p%%",
        "json \"},{\"ph\":\"X\",\"name\":\"injected",
        "utf8 caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x9a\x80",
        "bad utf8 \xff\xfe end",
        "overlong \xc0\x80 and \xe0\x80\x80",
        "surrogate \xed\xa0\x80",
        "truncated \xe6\x97",
        "lone continuation \x80\xbf",
        "above max \xf4\x90\x80\x80",
        "\xe2\x80\xae right-to-left override",
    };
    static char every_byte[256];
    size_t big_len = 1024 * 1024;
    char *big = malloc(big_len + 1);
    const char *big_name, *every;

    if (big == NULL)
        FAIL("malloc");
    for (size_t i = 0; i < big_len; i++)
        big[i] = (char)('a' + i % 26);
    big[big_len] = '\0';
    big_name = prof_intern(big);
    free(big);
    for (int i = 1; i < 256; i++)
        every_byte[i - 1] = (char)i;
    every = prof_intern(every_byte);
    if (big_name == NULL || every == NULL)
        FAIL("prof_intern");

    prof_thread_name("thread \x1b[2J \"name\" \xff");
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        PROF_ZONE(names[i]);
        {
            PROF_ZONE("child");
        }
        PROF_COUNTER(names[i], (double)i);
        PROF_MARK(names[i]);
    }
    {
        PROF_ZONE(big_name);
    }
    {
        PROF_ZONE(every);
    }
    {
        PROF_ZONE(NULL);
    }
    PROF_MARK(NULL);
    PROF_COUNTER(NULL, 1);
    if (prof_thread_name(NULL) != -EINVAL)
        FAIL("prof_thread_name(NULL)");
    prof_step();
    return 0;
}

/* ------------------------------------------------------------------------ */

static int mode_steps(long n, long us)
{
    for (long i = 0; i < n; i++) {
        char name[32];
        snprintf(name, sizeof name, "iter %ld", i);
        {
            PROF_ZONE(prof_intern(name));
            spin_ns((uint64_t)us * 800);
            {
                PROF_ZONE("inner");
                spin_ns((uint64_t)us * 200);
            }
        }
        prof_step();
    }
    return 0;
}

static int mode_many(long n)
{
    for (long i = 0; i < n; i++) {
        {
            PROF_ZONE("many");
        }
        if (i % 5000 == 0) {
            PROF_COUNTER("progress", (double)i);
            prof_flush();
        }
    }
    return 0;
}

static int refit_done;
static long refit_flushes;

/* Records in 25 parts and waits, after each, for one more flush by the main
 * thread: however the machine schedules the two, recording and at least 25
 * drains (each re-fits the clock) interleave. */
static void *refit_worker(void *arg)
{
    long n = *(const long *)arg;

    prof_thread_name("refit");
    for (long part = 0; part < 25; part++) {
        for (long i = part * n / 25; i < (part + 1) * n / 25; i++) {
            PROF_ZONE("outer");
            for (int j = 0; j < 8; j++) {
                PROF_ZONE("inner");
            }
        }
        while (__atomic_load_n(&refit_flushes, __ATOMIC_ACQUIRE) <= part)
            sched_yield();
    }
    __atomic_store_n(&refit_done, 1, __ATOMIC_RELEASE);
    return NULL;
}

static int mode_refit(long n)
{
    pthread_t t;

    if (pthread_create(&t, NULL, refit_worker, &n) != 0)
        FAIL("pthread_create");
    while (!__atomic_load_n(&refit_done, __ATOMIC_ACQUIRE)) {
        prof_flush();
        __atomic_fetch_add(&refit_flushes, 1, __ATOMIC_RELEASE);
    }
    pthread_join(t, NULL);
    printf("flushes=%ld\n", refit_flushes);
    return 0;
}

/* ------------------------------------------------------------------------ */

static void child_work(const char *name, int n)
{
    for (int i = 0; i < n; i++) {
        PROF_ZONE(name);
        spin_ns(10000);
    }
}

static void wait_child(pid_t pid)
{
    int status;

    if (waitpid(pid, &status, 0) != pid)
        FAIL("waitpid: %s", strerror(errno));
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        FAIL("child %d: status %#x", (int)pid, status);
}

static int mode_fork(long n)
{
    pid_t pids[64];

    if (n > 64)
        n = 64;
    child_work("parent_zone", 100);
    for (long i = 0; i < n; i++) {
        pids[i] = fork();
        if (pids[i] < 0)
            FAIL("fork: %s", strerror(errno));
        if (pids[i] == 0) {
            child_work("child_zone", 100);
            printf("child=%d\n", (int)getpid());
            fflush(stdout);
            exit(0);
        }
    }
    for (long i = 0; i < n; i++)
        wait_child(pids[i]);
    child_work("parent_zone", 100);
    printf("pid=%d\n", (int)getpid());
    return 0;
}

static int workers_attached;

static void *recording_worker(void *arg)
{
    {
        PROF_ZONE("load_batch");
    }
    __atomic_add_fetch(&workers_attached, 1, __ATOMIC_RELEASE);
    return worker(arg);
}

static int mode_fork_threads(long n)
{
    pthread_t t[2];

    for (int i = 0; i < 2; i++)
        if (pthread_create(&t[i], NULL, recording_worker, (void *)(intptr_t)-1) != 0)
            FAIL("pthread_create");
    /* The subject is fork while threads record, not fork while they
     * allocate their rings: that leaves memory in the child that belongs
     * to threads it does not have (LeakSanitizer reports it), and under
     * ASan, whose allocator (GCC 12) is not fork-safe, can deadlock the
     * child. */
    while (__atomic_load_n(&workers_attached, __ATOMIC_ACQUIRE) < 2)
        sched_yield();
    for (long i = 0; i < n; i++) {
        pid_t pid;
        child_work("parent_zone", 10);
        pid = fork();
        if (pid < 0)
            FAIL("fork: %s", strerror(errno));
        if (pid == 0) {
            child_work("child_zone", 10);
            prof_flush();
            if (i % 2)
                _exit(0);
            exit(0);
        }
        wait_child(pid);
    }
    __atomic_store_n(&stop_workers, 1, __ATOMIC_RELAXED);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    printf("pid=%d\n", (int)getpid());
    return 0;
}

/* ------------------------------------------------------------------------ */

static int started;

static void *spinner(void *arg)
{
    (void)arg;
    for (;;) {
        PROF_ZONE("spinner");
        {
            PROF_ZONE("spinner_inner");
            __atomic_add_fetch(&started, 1, __ATOMIC_RELAXED);
            spin_ns(5000);
        }
    }
    return NULL;
}

static void start_spinners(int n)
{
    for (int i = 0; i < n; i++) {
        pthread_t t;
        if (pthread_create(&t, NULL, spinner, NULL) != 0)
            FAIL("pthread_create");
        pthread_detach(t);
    }
    /* Every spinner has been inside its zones at least once. */
    while (__atomic_load_n(&started, __ATOMIC_RELAXED) < 10 * n)
        sched_yield();
}

static void *exiter(void *arg)
{
    (void)arg;
    PROF_ZONE("exiter");
    child_work("before_exit", 10);
    exit(0);
}

static int mode_exit_thread(void)
{
    pthread_t t;

    start_spinners(3);
    if (pthread_create(&t, NULL, exiter, NULL) != 0)
        FAIL("pthread_create");
    for (;;) {
        PROF_ZONE("main_waiting");
        spin_ns(1000);
    }
}

static int mode_main_returns(void)
{
    start_spinners(3);
    child_work("main_work", 10);
    return 0;
}

/* ------------------------------------------------------------------------ */

static int periodic_seen;

static void count_periodic(void *user, const char *text, int kind)
{
    (void)user;
    (void)text;
    if (kind == PROF_SUMMARY_PERIODIC)
        __atomic_add_fetch(&periodic_seen, 1, __ATOMIC_RELAXED);
}

static int mode_env(int enable)
{
    char buf[256];
    int n;

    if (enable)
        printf("enable=%d\n", prof_enable(1));
    printf("enabled=%d\n", prof_enabled());
    /* A burst that a 16-record ring cannot hold but the default can. */
    for (int i = 0; i < 20000; i++) {
        PROF_ZONE("burst");
    }
    printf("flush=%d\n", prof_flush());
    n = prof_summary_snprint(buf, sizeof buf, PROF_FORMAT_JSON);
    if (n > 0) {
        const char *d = strstr(buf, "\"dropped\":");
        prof_stage_stats st;
        printf("dropped=%llu\n", d ? strtoull(d + 10, NULL, 10) : 999999999ull);
        printf("burst=%llu\n", prof_stats("burst", &st) == 0 ? (unsigned long long)st.count : 0ull);
    } else {
        printf("summary=%d\n", n);
    }
    for (int i = 0; i < 30; i++) {
        PROF_ZONE("step_zone");
        spin_ns(100000);
        prof_step();
    }
    fflush(stdout);
    return 0;
}

static int mode_periodic_time(void)
{
    uint64_t deadline = now_ns() + 20000000000ull;

    prof_set_summary_handler(count_periodic, NULL);
    while (__atomic_load_n(&periodic_seen, __ATOMIC_RELAXED) < 2) {
        PROF_ZONE("timed");
        spin_ns(100000);
        if (now_ns() > deadline)
            break;
    }
    printf("periodic=%d\n", __atomic_load_n(&periodic_seen, __ATOMIC_RELAXED));
    return 0;
}

static int mode_stages(long n)
{
    static const char *names[32];
    char name[16];

    for (int k = 0; k < 32; k++) {
        snprintf(name, sizeof name, "stage_%02d", k);
        names[k] = prof_intern(name);
    }
    for (long step = 0; step < n; step++) {
        for (int k = 0; k < 32; k++)
            for (int i = 0; i < 4; i++) {
                PROF_ZONE(names[k]);
                spin_ns((uint64_t)(1 + (step * 7 + k * 13 + i * 31) % 97) * 1000);
            }
        prof_step();
    }
    return 0;
}

/* Issue 39, the on-CPU sampler. cpu: a thread spins 300 ms in "spin",
 * sleeps 300 ms in "sleep", and exits; prints its tid and the share of
 * the spin's wall time it got a CPU (its own clock: the ground truth). */
static uint64_t thread_cpu_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void *cpu_worker(void *arg)
{
    uint64_t c0, w0;
    struct timespec sl = {0, 300000000};

    (void)arg;
    printf("cpu_tid=%ld\n", (long)syscall(SYS_gettid));
    {
        PROF_ZONE("spin");
        c0 = thread_cpu_ns();
        w0 = now_ns();
        spin_ns(300000000);
        printf("spin_truth=%.4f\n", (double)(thread_cpu_ns() - c0) / (double)(now_ns() - w0));
    }
    {
        PROF_ZONE("sleep");
        nanosleep(&sl, NULL);
    }
    return NULL;
}

static int mode_cpu(void)
{
    pthread_t th;

    prof_enable(1);
    if (pthread_create(&th, NULL, cpu_worker, NULL) != 0)
        return 1;
    pthread_join(th, NULL);
    prof_flush();
    return 0;
}

/* cpu_fork: the thread that forks records on in the child, where timers
 * are not inherited: its stage there is sampled all the same.
 * cpu_threads: 40 threads record and exit one after another; each one's
 * timer goes with it (the process's POSIX timers, /proc/self/timers). */
static int mode_cpu_fork(void)
{
    pid_t pid;
    int status;

    prof_enable(1);
    {
        PROF_ZONE("parent");
        spin_ns(50000000);
    }
    pid = fork();
    if (pid < 0)
        return 1;
    if (pid == 0) {
        prof_stage_stats st;
        {
            PROF_ZONE("child_spin");
            spin_ns(200000000);
        }
        if (prof_stats("child_spin", &st) != 0)
            _exit(2);
        printf("child_cpu=%d\n", (st.flags & PROF_STAGE_CPU) != 0 && st.cpu_ns > 0);
        exit(0);   /* its summary written (PROF_SUMMARY=off: none) */
    }
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

static void *cpu_short(void *arg)
{
    (void)arg;
    PROF_ZONE("short");
    spin_ns(5000000);
    return NULL;
}

static int mode_cpu_threads(void)
{
    char line[256];
    int timers = 0;
    prof_stage_stats st;
    FILE *f;

    prof_enable(1);
    {
        PROF_ZONE("main");
        spin_ns(1000000);
    }
    for (int i = 0; i < 40; i++) {
        pthread_t th;
        if (pthread_create(&th, NULL, cpu_short, NULL) != 0)
            return 1;
        pthread_join(th, NULL);
    }
    prof_flush();
    if (prof_stats("short", &st) != 0)
        return 1;
    printf("short_cpu=%d\n", (st.flags & PROF_STAGE_CPU) != 0);
    if ((f = fopen("/proc/self/timers", "r")) == NULL) {
        printf("timers=unknown\n");
        return 0;
    }
    while (fgets(line, sizeof line, f) != NULL)
        timers += strncmp(line, "ID:", 3) == 0;
    fclose(f);
    printf("timers=%d\n", timers);
    return 0;
}

static int mode_fork_periodic(long n)
{
    uint64_t deadline = now_ns() + 30000000000ull;
    pid_t pids[64];
    int done[2];

    if (n > 64)
        n = 64;
    if (pipe(done) != 0)
        FAIL("pipe: %s", strerror(errno));
    prof_set_summary_handler(count_periodic, NULL);
    child_work("parent_zone", 10);
    for (long i = 0; i < n; i++) {
        pids[i] = fork();
        if (pids[i] < 0)
            FAIL("fork: %s", strerror(errno));
        if (pids[i] == 0) {
            struct pollfd pfd = {.fd = done[0], .events = POLLIN};

            close(done[1]);
            __atomic_store_n(&periodic_seen, 0, __ATOMIC_RELAXED);
            /* Records for as long as the parent does: until it closes
             * the pipe (EOF). */
            while (poll(&pfd, 1, 0) == 0)
                child_work("child_zone", 10);
            prof_flush();
            printf("child_periodic=%d\n", __atomic_load_n(&periodic_seen, __ATOMIC_RELAXED));
            fflush(stdout);
            exit(0);
        }
    }
    close(done[0]);
    while (__atomic_load_n(&periodic_seen, __ATOMIC_RELAXED) < 2 && now_ns() < deadline)
        child_work("parent_zone", 10);
    close(done[1]);
    for (long i = 0; i < n; i++)
        wait_child(pids[i]);
    printf("periodic=%d\n", __atomic_load_n(&periodic_seen, __ATOMIC_RELAXED));
    return 0;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    long n = argc > 2 ? strtol(argv[2], NULL, 10) : 0;

    setvbuf(stdout, NULL, _IOLBF, 0);
    if (strcmp(mode, "basic") == 0)
        return mode_basic(n > 0 ? n : 20);
    if (strcmp(mode, "names") == 0)
        return mode_names();
    if (strcmp(mode, "forever") == 0)
        return mode_forever();
    if (strcmp(mode, "steps") == 0)
        return mode_steps(n, argc > 3 ? strtol(argv[3], NULL, 10) : 250);
    if (strcmp(mode, "many") == 0)
        return mode_many(n);
    if (strcmp(mode, "refit") == 0)
        return mode_refit(n);
    if (strcmp(mode, "fork") == 0)
        return mode_fork(n);
    if (strcmp(mode, "fork_threads") == 0)
        return mode_fork_threads(n);
    if (strcmp(mode, "exit_thread") == 0)
        return mode_exit_thread();
    if (strcmp(mode, "main_returns") == 0)
        return mode_main_returns();
    if (strcmp(mode, "env") == 0)
        return mode_env(argc > 2 && strcmp(argv[2], "enable") == 0);
    if (strcmp(mode, "periodic_time") == 0)
        return mode_periodic_time();
    if (strcmp(mode, "stages") == 0)
        return mode_stages(n);
    if (strcmp(mode, "fork_periodic") == 0)
        return mode_fork_periodic(n);
    if (strcmp(mode, "cpu") == 0)
        return mode_cpu();
    if (strcmp(mode, "cpu_fork") == 0)
        return mode_cpu_fork();
    if (strcmp(mode, "cpu_threads") == 0)
        return mode_cpu_threads();
    if (strcmp(mode, "sanitizer") == 0) {
        /* Which sanitizer this build runs under (the drivers adapt). */
#if defined(__SANITIZE_THREAD__)
        puts("sanitizer=thread");
#elif defined(__SANITIZE_ADDRESS__)
        puts("sanitizer=address");
#elif defined(__has_feature)
#  if __has_feature(thread_sanitizer)
        puts("sanitizer=thread");
#  elif __has_feature(address_sanitizer)
        puts("sanitizer=address");
#  else
        puts("sanitizer=none");
#  endif
#else
        puts("sanitizer=none");
#endif
        return 0;
    }
    fprintf(stderr, "usage: prog MODE [ARG] (see prog.c)\n");
    return 2;
}
