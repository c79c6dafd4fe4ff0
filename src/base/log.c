/* log.c - every message the runtime prints goes through here, so that a
 * program can route them (prof_set_logger) and the library itself decides
 * nothing about where text goes. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "prof.h"
#include "log.h"

/* The function and its user pointer change together: a seqlock, so that
 * a message never goes to one logger with the other's pointer. Writers
 * take the mutex; readers (any thread, the collector) never wait, they
 * retry while a change is under way (seq odd) or happened meanwhile. */
static struct {
    uint32_t seq;
    prof_log_fn fn;
    void *user;
} logger;
static pthread_mutex_t logger_lock = PTHREAD_MUTEX_INITIALIZER;

PROF_API void prof_set_logger(prof_log_fn fn, void *user)
{
    pthread_mutex_lock(&logger_lock);
    __atomic_store_n(&logger.seq, logger.seq + 1, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_RELEASE);
    __atomic_store_n(&logger.fn, fn, __ATOMIC_RELAXED);
    __atomic_store_n(&logger.user, user, __ATOMIC_RELAXED);
    /* Release: a reader that sees the even seq sees both fields. */
    __atomic_store_n(&logger.seq, logger.seq + 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&logger_lock);
}

/* Messages raised while this thread holds one of the runtime's locks
 * wait here, so that no user code (a logger may call the API) runs under
 * them. A bounded queue: past QUEUED messages, the rest are counted and
 * said with the next one delivered. The queue has its own lock, never held
 * while a logger runs. */
#define QUEUED 32
static __thread int held __attribute__((tls_model("initial-exec")));
static struct {
    pthread_mutex_t lock;
    unsigned head, tail;
    unsigned long lost;
    char msg[QUEUED][1024];
} queue = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void deliver(const char *msg);
static void stderr_write(const char *line, size_t n);

void prof_log_hold(void)
{
    held++;
}

void prof_log_release(void)
{
    char msg[1024];
    unsigned long lost;

    if (--held > 0)
        return;
    for (;;) {
        pthread_mutex_lock(&queue.lock);
        if (queue.head == queue.tail && queue.lost == 0) {
            pthread_mutex_unlock(&queue.lock);
            return;
        }
        lost = queue.lost;
        queue.lost = 0;
        if (queue.head != queue.tail) {
            memcpy(msg, queue.msg[queue.tail % QUEUED], sizeof msg);
            queue.tail++;
        } else {
            msg[0] = '\0';
        }
        pthread_mutex_unlock(&queue.lock);
        if (lost != 0) {
            char note[96];
            snprintf(note, sizeof note, "%lu messages were lost (more than %d at once)", lost,
                     QUEUED);
            deliver(note);
        }
        if (msg[0] != '\0')
            deliver(msg);
    }
}

void prof_log_atfork_child(void)
{
    pthread_mutex_init(&queue.lock, NULL);
    /* What is queued is the parent's: another of its threads queued it
     * under the runtime lock and delivers it after releasing that lock,
     * which a fork can come between. Delivered here too, it was said twice
     * on the stderr both share (a worker named twice in fork_stress). */
    queue.tail = queue.head;
    queue.lost = 0;
}

static void log_message(const char *msg)
{
    if (held > 0) {
        pthread_mutex_lock(&queue.lock);
        if (queue.head - queue.tail < QUEUED)
            snprintf(queue.msg[queue.head++ % QUEUED], sizeof queue.msg[0], "%s", msg);
        else
            queue.lost++;
        pthread_mutex_unlock(&queue.lock);
        return;
    }
    deliver(msg);
}

static void deliver(const char *msg)
{
    prof_log_fn fn;
    void *user;
    uint32_t seq;
    char line[1100];
    size_t n;

    do {
        seq = __atomic_load_n(&logger.seq, __ATOMIC_ACQUIRE);
        fn = __atomic_load_n(&logger.fn, __ATOMIC_RELAXED);
        user = __atomic_load_n(&logger.user, __ATOMIC_RELAXED);
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
    } while ((seq & 1) || seq != __atomic_load_n(&logger.seq, __ATOMIC_RELAXED));
    if (fn != NULL) {
        fn(user, msg);
        return;
    }
    /* One write(2) per line so that messages from several threads or
     * processes do not interleave mid-line, and no stdio lock is taken
     * (a forked child may inherit it locked). */
    n = (size_t)snprintf(line, sizeof line, "prof: %s\n", msg);
    if (n >= sizeof line) {
        n = sizeof line - 1;
        line[n - 1] = '\n';
    }
    stderr_write(line, n);
}

/* stderr may be a pipe that nobody reads (a paused `| less`): a thread of
 * the program must not wait on it without a bound. A line is written only
 * once poll says there is room (a pipe with room takes a write of up to
 * PIPE_BUF bytes whole, without blocking); the first line that finds no
 * room waits STDERR_WAIT_MS for it, the lines after it none until one goes
 * through again, and the lines left out are counted and said with the
 * next one written. Not bounded: another writer filling the pipe between
 * the poll and the write. */
#define STDERR_WAIT_MS 250
static int stderr_stuck;
static unsigned long stderr_lost;

static int stderr_room(int wait_ms)
{
    struct pollfd p = {.fd = STDERR_FILENO, .events = POLLOUT};
    int r;

    while ((r = poll(&p, 1, wait_ms)) < 0 && errno == EINTR) {
    }
    return r > 0 && (p.revents & POLLOUT) && !(p.revents & POLLNVAL);
}

static void stderr_write(const char *line, size_t n)
{
    unsigned long lost;
    char note[128];
    int k;

    if (!stderr_room(__atomic_load_n(&stderr_stuck, __ATOMIC_RELAXED) ? 0 : STDERR_WAIT_MS)) {
        __atomic_store_n(&stderr_stuck, 1, __ATOMIC_RELAXED);
        __atomic_add_fetch(&stderr_lost, 1, __ATOMIC_RELAXED);
        return;
    }
    __atomic_store_n(&stderr_stuck, 0, __ATOMIC_RELAXED);
    lost = __atomic_exchange_n(&stderr_lost, 0, __ATOMIC_RELAXED);
    if (lost != 0) {
        k = snprintf(note, sizeof note, "prof: %lu messages were not written: stderr had no "
                     "room (its reader was not reading)\n", lost);
        if (write(STDERR_FILENO, note, (size_t)k) < 0 || !stderr_room(0))
            return;
    }
    if (write(STDERR_FILENO, line, n) < 0) {
        /* Nowhere left to report it. */
    }
}

static size_t quote_width(unsigned char c)
{
    return c >= 0x20 && c < 0x7f && c != '"' && c != '\\' ? 1 : 4;
}

static size_t quote_byte(char *out, unsigned char c)
{
    if (quote_width(c) == 1) {
        *out = (char)c;
        return 1;
    }
    snprintf(out, 5, "\\x%02x", c);
    return 4;
}

const char *prof_log_quote(char *buf, size_t size, const char *v)
{
    const unsigned char *s = (const unsigned char *)(v != NULL ? v : "(null)");
    size_t len = strlen((const char *)s), need = 0, room = size - 1, head = room, from = len;
    size_t n = 0;

    for (size_t i = 0; i < len; i++)
        need += quote_width(s[i]);
    if (need > room) {
        /* About 3/5 of the room for the head, the rest for the tail. */
        size_t tail;

        head = (room - 3) * 3 / 5;
        tail = room - 3 - head;
        while (from > 0 && quote_width(s[from - 1]) <= tail)
            tail -= quote_width(s[--from]);
    }
    for (size_t i = 0; i < len && n + quote_width(s[i]) <= head; i++)
        n += quote_byte(buf + n, s[i]);
    if (need > room) {
        memcpy(buf + n, "...", 3);
        n += 3;
        for (size_t i = from; i < len; i++)
            n += quote_byte(buf + n, s[i]);
    }
    buf[n] = '\0';
    return buf;
}

const char *prof_log_value(char *buf, size_t size, const char *name, const char *value)
{
    char q[PROF_LOG_QUOTE_SIZE];

    snprintf(buf, size, "%s=\"%s\"", name, prof_log_quote(q, sizeof q, value));
    return buf;
}

const char *prof_log_dlerror(char *buf, size_t size, const char *lib, const char *err)
{
    size_t n = lib != NULL ? strlen(lib) : 0;

    if (err == NULL)
        err = "cannot load it";
    else if (n > 0 && strncmp(err, lib, n) == 0 && strncmp(err + n, ": ", 2) == 0)
        err += n + 2;
    return prof_log_quote(buf, size < PROF_LOG_QUOTE_SIZE ? size : PROF_LOG_QUOTE_SIZE, err);
}

/* Whatever a message echoes, no control byte reaches the terminal or a
 * log: a value that missed prof_log_quote still shows as \xNN. */
__attribute__((format(printf, 1, 0))) static void log_va(const char *fmt, va_list ap)
{
    char raw[1024], msg[1024];
    size_t n = 0;

    vsnprintf(raw, sizeof raw, fmt, ap);
    for (const unsigned char *p = (const unsigned char *)raw; *p != '\0'; p++) {
        if (*p >= 0x20 && *p != 0x7f) {
            if (n + 1 >= sizeof msg)
                break;
            msg[n++] = (char)*p;
        } else {
            if (n + 4 >= sizeof msg)
                break;
            snprintf(msg + n, 5, "\\x%02x", *p);
            n += 4;
        }
    }
    msg[n] = '\0';
    log_message(msg);
}

void prof_log(const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    log_va(fmt, ap);
    va_end(ap);
}

void prof_log_once(int *flag, const char *fmt, ...)
{
    va_list ap;

    if (__atomic_exchange_n(flag, 1, __ATOMIC_RELAXED))
        return;
    va_start(ap, fmt);
    log_va(fmt, ap);
    va_end(ap);
}
