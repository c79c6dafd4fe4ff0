/* PROF_NVTX=1: every zone, CPU and CUDA, is also an NVTX range, pushed and
 * popped on the application thread, as an NVTX tool (the fake one named by
 * NVTX_INJECTION64_PATH) sees it. Without a tool: one message, zones still
 * recorded.
 *
 *   test_cuda_nvtx attached | absent | refused
 *
 * NVTX is set up when recording starts, which PROF=1 does before main: to
 * see that message, the test runs itself again with stderr on a pipe. */
#include <sys/wait.h>
#include <unistd.h>

#include "cuda_test.h"

#define N 10

typedef uint64_t (*counts_fn)(uint64_t *pops, uint64_t *unbalanced, uint32_t *max_depth,
                              uint64_t *attaches, char *names, size_t size);

static void run(CUstream s)
{
    int i;

    for (i = 0; i < N; i++) {
        PROF_ZONE("outer");
        {
            PROF_CUDA_ZONE("inner", s);
        }
    }
}

/* Run this program again with stderr captured; return how many lines
 * contain needle, and the child's exit status in *status. */
static int stderr_of_child(char **argv, const char *needle, int *status)
{
    static char out[65536];
    size_t len = 0;
    ssize_t r;
    int fd[2], n = 0;
    char *line, *save = NULL;
    pid_t pid;

    CHECK(pipe(fd) == 0);
    pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        dup2(fd[1], 2);
        close(fd[0]);
        close(fd[1]);
        setenv("PROF_TEST_CHILD", "1", 1);
        execv("/proc/self/exe", argv);
        _exit(127);
    }
    close(fd[1]);
    while ((r = read(fd[0], out + len, sizeof out - 1 - len)) > 0)
        len += (size_t)r;
    out[len] = '\0';
    close(fd[0]);
    CHECK(waitpid(pid, status, 0) == pid);
    fputs(out, stderr);
    for (line = strtok_r(out, "\n", &save); line != NULL; line = strtok_r(NULL, "\n", &save))
        n += strstr(line, needle) != NULL;
    return n;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    const char *tool = getenv("NVTX_INJECTION64_PATH");
    uint64_t pushes, pops, unbalanced, attaches;
    uint32_t depth;
    char names[256];
    counts_fn counts;
    void *h;

    if (strcmp(mode, "absent") == 0 || strcmp(mode, "refused") == 0) {
        const char *needle = strcmp(mode, "absent") == 0 ? "no NVTX tool" : "refused";
        int status, n;

        if (getenv("PROF_TEST_CHILD") != NULL) {
            prof_enable(1);
            run(NULL);
            CHECK(stage_count("outer") == N);
            CHECK(stage_count("inner") == N);
            return 0;
        }
        n = stderr_of_child(argv, needle, &status);
        CHECKF(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d", status);
        CHECKF(n == 1, "%d messages containing \"%s\"", n, needle);
        return 0;
    }

    CHECK(strcmp(mode, "attached") == 0);
    log_capture();
    prof_enable(1);
    run(NULL);
    CHECK(stage_count("outer") == N);
    CHECK(stage_count("inner") == N);
    CHECK(tool != NULL);
    h = dlopen(tool, RTLD_NOW | RTLD_NOLOAD);
    CHECKF(h != NULL, "prof did not load the NVTX tool %s", tool);
    *(void **)&counts = dlsym(h, "fakenvtx_counts");
    CHECK(counts != NULL);
    pushes = counts(&pops, &unbalanced, &depth, &attaches, names, sizeof names);
    CHECKF(pushes == 2 * N && pops == 2 * N, "%llu pushes, %llu pops", (unsigned long long)pushes,
           (unsigned long long)pops);
    CHECK(unbalanced == 0 && depth == 2 && attaches == 1);
    CHECKF(strncmp(names, "outer;inner;outer;inner;", 24) == 0, "names: %s", names);
    return 0;
}
