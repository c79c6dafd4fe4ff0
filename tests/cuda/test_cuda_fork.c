/* fork() after CUDA zones ran: the child (DataLoader worker style) cannot
 * use the parent's CUDA context; its CUDA zones time the CPU side only,
 * say so once, and nothing deadlocks. The parent carries on. */
#include <sys/wait.h>
#include <unistd.h>

#include "cuda_test.h"

#define N 10

#if defined(__SANITIZE_THREAD__)
#  define UNDER_TSAN 1
#elif defined(__has_feature)
#  if __has_feature(thread_sanitizer)
#    define UNDER_TSAN 1
#  endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#  define UNDER_ASAN 1
#endif

int main(void)
{
    struct fake f;
    CUstream s;
    pid_t pid;
    int status, i;

#ifdef UNDER_TSAN
    SKIP("ThreadSanitizer does not support threads in a child of a multi-threaded fork");
#endif
#ifdef UNDER_ASAN
    /* The collector may be inside malloc when we fork, and GCC 12's ASan
     * allocator is not fork-safe (fixed upstream, llvm-project #75290): the
     * child can hang in malloc. tests/faults/fork_stress covers fork under
     * ASan with the threads quiescent. */
    SKIP("GCC 12's AddressSanitizer allocator is not fork-safe with other threads running");
#endif
    s = fake_start(&f);
    /* Some delivered before the fork: the parent has a GPU line. */
    for (i = 0; i < N; i++) {
        PROF_CUDA_ZONE("warm", s);
        f.launch(s, 3000);
    }
    CHECK(wait_count("warm [gpu]", N, 20000) == N);
    f.set_delay_us(1000);
    for (i = 0; i < N; i++) {
        PROF_CUDA_ZONE("parent", s);
        f.launch(s, 3000);
    }
    /* Fork with zones still pending. */
    pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        alarm(20);
        for (i = 0; i < N; i++) {
            PROF_CUDA_ZONE("child", s);
        }
        if (stage_count("child") != N) {
            fprintf(stderr, "child: %llu CPU zones\n", (unsigned long long)stage_count("child"));
            _exit(1);
        }
        if (stage_count("child [gpu]") != 0 || log_matching("forked") != 1) {
            log_dump();
            _exit(1);
        }
        {
            /* The parent's GPUs are not the child's. */
            static char text[8192];

            if (prof_summary_snprint(text, sizeof text, PROF_FORMAT_TEXT) <= 0 ||
                strstr(text, "GPU 0 busy") != NULL) {
                fprintf(stderr, "child's summary:\n%s", text);
                _exit(1);
            }
        }
        prof_shutdown();
        _exit(0);
    }
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECKF(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d", status);
    for (i = 0; i < N; i++) {
        PROF_CUDA_ZONE("parent", s);
        f.launch(s, 3000);
    }
    CHECK(wait_count("parent [gpu]", 2 * N, 20000) == 2 * N);
    LOG_EXPECT_NONE();
    return 0;
}
