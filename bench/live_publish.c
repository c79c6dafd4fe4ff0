/* live_publish.c - what the live table costs the collector per publish
 * (once a second) at 10, 1k and 100k stages (issue 23), with the live file
 * only and with PROF_METRICS serving /metrics too.
 *
 *     build/bench/live_publish            all six runs
 *     build/bench/live_publish N [PORT]   one run (PORT: with metrics)
 *
 * Each run is a process of its own (the environment is read once): N
 * stages are made under "model", then for 6 s (or until three publishes
 * are seen) a thousand of them are recorded every 100 ms while a thread
 * scrapes /metrics every 300 ms. The costs are the runtime's own figures,
 * read from the process's live file header: snap_ns, the snapshot, what
 * the collector spends with the runtime lock held; publish_ns, what it
 * spends writing the live file, lock released; metrics_ns, formatting the
 * metrics, on their own thread. The scrape is timed by the client
 * (connect to last byte: the server thread's work).
 *
 * One line per run, for scripts:
 * prof-bench live_publish: stages=<N> metrics=<0|1> rows=<published>
 *   snapshot_us=<median>/<max> publish_us=<median>/<max> metrics_us=<median>/<max>
 *   scrape_ms=<median> metrics_kb=<scrape size> file_kb=<live file size> */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include "bench.h"
#include "../src/output/live.h"

static int port;
static int stop;
static double scrape_ms[64];
static int nscrape;
static size_t scrape_bytes;

static void *scraper(void *arg)
{
    (void)arg;
    while (!__atomic_load_n(&stop, __ATOMIC_ACQUIRE)) {
        struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                                  .sin_addr.s_addr = htonl(0x7f000001u) };
        static const char req[] = "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";
        char buf[65536];
        uint64_t t0 = bench_now_ns();
        size_t got = 0;
        ssize_t n;
        int fd = socket(AF_INET, SOCK_STREAM, 0);

        if (connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0 &&
            write(fd, req, sizeof req - 1) == (ssize_t)(sizeof req - 1)) {
            while ((n = read(fd, buf, sizeof buf)) > 0)
                got += (size_t)n;
            if (got > 1000 && nscrape < 64) {
                scrape_ms[nscrape++] = (double)(bench_now_ns() - t0) / 1e6;
                scrape_bytes = got;
            }
        }
        close(fd);
        usleep(300000);
    }
    return NULL;
}

/* Where src/output/live_dir.c puts this process's file (prof_live_dir, prof_live_name). */
static void live_path(char *buf, size_t size)
{
    const char *dir = getenv("XDG_RUNTIME_DIR");
    struct stat st;

    if (dir != NULL && dir[0] == '/' && stat(dir, &st) == 0 && S_ISDIR(st.st_mode) &&
        st.st_uid == geteuid() && access(dir, W_OK) == 0)
        snprintf(buf, size, "%s/prof/" PROF_LIVE_PREFIX "%d", dir, (int)getpid());
    else
        snprintf(buf, size, "/dev/shm/prof-%u/" PROF_LIVE_PREFIX "%d", (unsigned)geteuid(),
                 (int)getpid());
}

static int one(long n)
{
    struct prof_live_file_header h;
    double snap_us[64], pub_us[64], met_us[64];
    int nsamp = 0;
    uint64_t last_pub = 0, start;
    char path[512], **names = malloc((size_t)n * sizeof *names);
    pthread_t th;
    FILE *f;

    prof_enable(1);
    for (long i = 0; i < n; i++) {
        names[i] = malloc(32);
        snprintf(names[i], 32, "layer.%06ld", i);
    }
    {
        PROF_ZONE("model");
        for (long i = 0; i < n; i++) {
            PROF_ZONE(names[i]);
            if (i % 5000 == 4999)
                prof_flush();
        }
    }
    prof_flush();
    if (port)
        pthread_create(&th, NULL, scraper, NULL);
    live_path(path, sizeof path);
    /* 6 s, or longer (to 60 s) until three publishes are seen: with many
     * stages the collector publishes less often (src/output/live.h). */
    start = bench_now_ns();
    for (long k = 0; bench_now_ns() < start + 6000000000ull ||
                     (nsamp < 3 && bench_now_ns() < start + 60000000000ull); k++) {
        {
            PROF_ZONE("model");
            for (long i = 0; i < 1000; i++) {
                PROF_ZONE(names[(k * 1000 + i) % n]);
            }
        }
        usleep(100000);
        if ((f = fopen(path, "rb")) != NULL) {
            if (fread(&h, sizeof h, 1, f) == 1 && !(h.seq & 1) && h.publishes != last_pub &&
                h.publishes > 2 && nsamp < 64) {
                snap_us[nsamp] = (double)h.snap_ns / 1e3;
                met_us[nsamp] = (double)h.metrics_ns / 1e3;
                pub_us[nsamp++] = (double)h.publish_ns / 1e3;
            }
            last_pub = h.publishes;
            fclose(f);
        }
    }
    __atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
    if (port)
        pthread_join(th, NULL);
    if (nsamp == 0) {
        printf("prof-bench live_publish: stages=%ld no publish seen in %s\n", n, path);
        return 1;
    }
    {
        double smax = 0, pmax = 0, mmax = 0;

        for (int i = 0; i < nsamp; i++) {
            smax = snap_us[i] > smax ? snap_us[i] : smax;
            pmax = pub_us[i] > pmax ? pub_us[i] : pmax;
            mmax = met_us[i] > mmax ? met_us[i] : mmax;
        }
        printf("prof-bench live_publish: stages=%ld metrics=%d rows=%u snapshot_us=%.0f/%.0f "
               "publish_us=%.0f/%.0f metrics_us=%.0f/%.0f scrape_ms=%.1f metrics_kb=%.0f "
               "file_kb=%.0f\n",
               n, port != 0, h.nrows, bench_median(snap_us, nsamp), smax,
               bench_median(pub_us, nsamp), pmax, bench_median(met_us, nsamp), mmax,
               nscrape ? bench_median(scrape_ms, nscrape) : 0, (double)scrape_bytes / 1024,
               (double)h.size / 1024);
    }
    fflush(stdout);
    return 0;
}

static int free_port(void)
{
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(0x7f000001u) };
    socklen_t len = sizeof sa;
    int fd = socket(AF_INET, SOCK_STREAM, 0), p = 0;

    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0 &&
        getsockname(fd, (struct sockaddr *)&sa, &len) == 0)
        p = ntohs(sa.sin_port);
    close(fd);
    return p;
}

int main(int argc, char **argv)
{
    static const long sizes[] = { 10, 1000, 100000 };
    int rc = 0;

    if (argc > 1) {
        port = argc > 2 ? atoi(argv[2]) : 0;
        return one(atol(argv[1]));
    }
    setenv("PROF", "1", 1);
    setenv("PROF_SUMMARY", "off", 1);
    setenv("PROF_LIVE", "1", 1);
    for (int m = 0; m < 2; m++) {
        for (int i = 0; i < 3; i++) {
            char n[32], p[32], addr[64];
            pid_t pid;
            int st;

            snprintf(n, sizeof n, "%ld", sizes[i]);
            snprintf(p, sizeof p, "%d", m ? free_port() : 0);
            snprintf(addr, sizeof addr, "127.0.0.1:%s", p);
            if (m)
                setenv("PROF_METRICS", addr, 1);
            else
                unsetenv("PROF_METRICS");
            fflush(stdout);
            if ((pid = fork()) == 0) {
                execl("/proc/self/exe", argv[0], n, p, (char *)NULL);
                _exit(127);
            }
            waitpid(pid, &st, 0);
            rc |= !WIFEXITED(st) || WEXITSTATUS(st) != 0;
        }
    }
    return rc;
}
