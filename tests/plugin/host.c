/* host.c - a program that loads a plugin which links libprof, then
 * unloads it, and ends in one of the ways a run ends:
 *
 *     plugin_host PLUGIN MODE [N]
 *
 *   exit         the plugin's zones on the main thread; dlclose; return
 *   thread-exit  the plugin's zones on a host thread, which exits only
 *                after the dlclose (libprof's thread-exit destructor runs)
 *   sigterm      the plugin's zones; dlclose; SIGTERM to the process
 *   reexec       built with -DHOST_LINKS_PROF: the host records a zone, then
 *                execs itself (same pid, new image) in mode exit
 *
 * Built with -DHOST_LINKS_PROF the host records a zone of its own first:
 * with a plugin that carries its own runtime, two copies.
 *
 * Prints "unloaded=1" when the plugin is gone from the process after the
 * dlclose (a plugin that carries the runtime itself stays: it is pinned),
 * then "done". Exit 0 (or death by SIGTERM in that mode); 1 on a setup
 * error. */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef HOST_LINKS_PROF
#include <prof.h>
#endif

static void (*plugin_work)(int n);
static int (*plugin_stop)(void);
static int zones = 1000;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static int worked, may_exit;

static void *worker(void *arg)
{
    (void)arg;
    plugin_work(zones);
    pthread_mutex_lock(&lock);
    worked = 1;
    pthread_cond_broadcast(&cond);
    while (!may_exit)
        pthread_cond_wait(&cond, &lock);
    pthread_mutex_unlock(&lock);
    return NULL;    /* libprof's pthread key destructor runs now */
}

static void unload(void *h, const char *path)
{
    int err = plugin_stop();

    if (err != 0) {
        fprintf(stderr, "host: plugin_stop (prof_flush) = %d\n", err);
        exit(1);
    }
    if (dlclose(h) != 0) {
        fprintf(stderr, "host: dlclose: %s\n", dlerror());
        exit(1);
    }
    h = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
    printf("unloaded=%d\n", h == NULL);
    fflush(stdout);
    if (h != NULL)
        dlclose(h);
}

int main(int argc, char **argv)
{
    const char *mode;
    pthread_t tid;
    void *h;

    if (argc < 3) {
        fprintf(stderr, "usage: %s PLUGIN MODE [N]\n", argv[0]);
        return 1;
    }
    mode = argv[2];
    if (argc > 3)
        zones = atoi(argv[3]);
#ifdef HOST_LINKS_PROF
    {
        PROF_ZONE("host zone");
    }
    if (strcmp(mode, "reexec") == 0) {
        char *args[] = {argv[0], argv[1], "exit", argc > 3 ? argv[3] : "1000", NULL};
        execv("/proc/self/exe", args);
        fprintf(stderr, "host: exec: %s\n", strerror(errno));
        return 1;
    }
#endif
    if ((h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL)) == NULL) {
        fprintf(stderr, "host: dlopen: %s\n", dlerror());
        return 1;
    }
    *(void **)&plugin_work = dlsym(h, "plugin_work");
    *(void **)&plugin_stop = dlsym(h, "plugin_stop");
    if (plugin_work == NULL || plugin_stop == NULL) {
        fprintf(stderr, "host: plugin without plugin_work / plugin_stop\n");
        return 1;
    }
    if (strcmp(mode, "thread-exit") == 0) {
        if (pthread_create(&tid, NULL, worker, NULL) != 0)
            return 1;
        pthread_mutex_lock(&lock);
        while (!worked)
            pthread_cond_wait(&cond, &lock);
        pthread_mutex_unlock(&lock);
        unload(h, argv[1]);
        pthread_mutex_lock(&lock);
        may_exit = 1;
        pthread_cond_broadcast(&cond);
        pthread_mutex_unlock(&lock);
        pthread_join(tid, NULL);
    } else {
        plugin_work(zones);
        unload(h, argv[1]);
    }
    if (strcmp(mode, "sigterm") == 0) {
        printf("done\n");
        fflush(stdout);
        kill(getpid(), SIGTERM);
        for (;;)
            pause();    /* prof's handler drains, reports, re-raises */
    }
    printf("done\n");
    return 0;
}
