/* train_loop.c - a simulated training loop instrumented with prof.
 *
 * A loader thread prepares batches and hands them over through a bounded
 * queue; the main thread runs forward, backward and the optimizer step with
 * durations that vary like real ones. The data stage is deliberately slow
 * now and then (a cold cache), so the summary has something to show.
 *
 *     PROF=1 PROF_SUMMARY_EVERY=100steps PROF_TRACE=train.json ./train_loop
 *
 * Options: --steps N (default 300), --scale X (multiplies every duration),
 * --fast-data (removes the slow data stage: try it with prof-diff),
 * --slow STAGE[=X] (the own work of one stage, e.g. attention, X times longer,
 * default 1.2: a known regression for prof-diff to find). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <prof.h>

#define QUEUE_CAP 4

struct queue {
    pthread_mutex_t lock;
    pthread_cond_t not_empty, not_full;
    int items[QUEUE_CAP];
    int head, len, closed;
};

static struct queue q = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER,
                         PTHREAD_COND_INITIALIZER, {0}, 0, 0, 0};
static int steps = 300;
static double scale = 1.0;
static int fast_data;
static const char *slow_stage = "";
static double slow_factor = 1.0;

/* Spin for about us microseconds of CPU work: sleeping would not look like
 * compute in a profile. */
static void work(double us)
{
    struct timespec t0, t;
    volatile double x = 1.0;

    clock_gettime(CLOCK_MONOTONIC, &t0);
    do {
        for (int i = 0; i < 200; i++)
            x = x * 1.0000001 + 1e-9;
        clock_gettime(CLOCK_MONOTONIC, &t);
    } while ((double)(t.tv_sec - t0.tv_sec) * 1e6 + (double)(t.tv_nsec - t0.tv_nsec) / 1e3 <
             us * scale);
}

/* The --slow factor of a stage's own work (1 for every other stage). */
static double slow(const char *stage)
{
    return strcmp(stage, slow_stage) == 0 ? slow_factor : 1.0;
}

/* Deterministic jitter in [0.8, 1.2]. */
static double jitter(unsigned *seed)
{
    return 0.8 + 0.4 * (double)rand_r(seed) / RAND_MAX;
}

static void *loader(void *arg)
{
    unsigned seed = 7;

    (void)arg;
    prof_thread_name("loader");
    for (int i = 0; i < steps; i++) {
        {
            PROF_ZONE("load_batch");
            {
                PROF_ZONE("read");
                /* Every 25th batch misses the cache and takes longer than
                 * the queue can hide: the training step waits for it. */
                work((!fast_data && i % 25 == 0 ? 30000.0 : 300.0) * slow("read") *
                     jitter(&seed));
            }
            {
                PROF_ZONE("decode");
                work(400.0 * slow("decode") * jitter(&seed));
            }
        }
        pthread_mutex_lock(&q.lock);
        while (q.len == QUEUE_CAP)
            pthread_cond_wait(&q.not_full, &q.lock);
        q.items[(q.head + q.len++) % QUEUE_CAP] = i;
        pthread_cond_signal(&q.not_empty);
        pthread_mutex_unlock(&q.lock);
    }
    pthread_mutex_lock(&q.lock);
    q.closed = 1;
    pthread_cond_signal(&q.not_empty);
    pthread_mutex_unlock(&q.lock);
    return NULL;
}

static int next_batch(void)
{
    int item = -1;

    pthread_mutex_lock(&q.lock);
    while (q.len == 0 && !q.closed)
        pthread_cond_wait(&q.not_empty, &q.lock);
    if (q.len > 0) {
        item = q.items[q.head];
        q.head = (q.head + 1) % QUEUE_CAP;
        q.len--;
        pthread_cond_signal(&q.not_full);
    }
    pthread_mutex_unlock(&q.lock);
    return item;
}

static void layer(const char *name, double us, unsigned *seed)
{
    PROF_ZONE(name);
    work(us * slow(name) * jitter(seed));
}

int main(int argc, char **argv)
{
    pthread_t th;
    unsigned seed = 42;
    double loss = 2.5;

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--steps") == 0 && i + 1 < argc)
            steps = atoi(argv[++i]);
        else if (strcmp(argv[i], "--scale") == 0 && i + 1 < argc)
            scale = atof(argv[++i]);
        else if (strcmp(argv[i], "--fast-data") == 0)
            fast_data = 1;
        else if (strcmp(argv[i], "--slow") == 0 && i + 1 < argc) {
            char *eq = strchr(argv[++i], '=');
            slow_stage = argv[i];
            slow_factor = 1.2;
            if (eq != NULL) {
                *eq = '\0';
                slow_factor = atof(eq + 1);
            }
        } else {
            fprintf(stderr, "usage: %s [--steps N] [--scale X] [--fast-data] [--slow STAGE[=X]]\n",
                    argv[0]);
            return 2;
        }
    }
    if (!prof_enabled())
        fprintf(stderr, "train_loop: prof is off; run with PROF=1 to see the summary\n");

    pthread_create(&th, NULL, loader, NULL);
    for (int step = 0; step < steps; step++) {
        PROF_ZONE("train_step");
        int batch;
        {
            PROF_ZONE("data_wait");
            batch = next_batch();
        }
        if (batch < 0)
            break;
        {
            PROF_ZONE("forward");
            layer("embedding", 150, &seed);
            layer("attention", 900, &seed);
            layer("mlp", 600, &seed);
        }
        {
            PROF_ZONE("backward");
            work(2600 * slow("backward") * jitter(&seed));
        }
        {
            PROF_ZONE("optimizer_step");
            work(300 * slow("optimizer_step") * jitter(&seed));
        }
        loss = loss * 0.99 + 0.01 * jitter(&seed) * 0.3;
        PROF_COUNTER("loss", loss);
        if (step > 0 && step % 100 == 0)
            PROF_MARK("checkpoint");
        prof_step();
    }
    pthread_join(th, NULL);
    return 0;
}
