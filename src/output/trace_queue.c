/* trace_queue.c - the trace's queue of batches (see trace_out.h for who
 * calls what): the formatter's batches queued in order, bounded (drops
 * counted, and said by the file before the next batch written), written
 * by the output writer thread's service (trace_service) through the file
 * (trace_file.h), and the waits on it: prof_flush's for what was queued,
 * a program's thread's for room in a full queue, both bounded (writer.h).
 *
 * Lock order: write_lock (one writer at the file: the service, the open),
 * then queue_lock (the queue, taken around fork). */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "log.h"
#include "runtime.h"
#include "trace_file.h"
#include "trace_out.h"
#include "writer.h"

/* Queued JSON past which the collector's batches are dropped: 256
 * batches, a quarter of a second of the collector's formatting at full
 * speed. A 4 MB bound dropped events on a loaded 2-core machine with a
 * disk that was only late (trace_valid's final drain), not stuck. */
#define QUEUE_MAX (64u << 20)
/* Written batches kept for their memory: as many as the queue holds, so a
 * steady run allocates none (a fresh 256 KB buffer is a fresh mapping,
 * page faults and all). */
#define SPARES_MAX 16

struct batch {
    struct batch *next;
    struct prof_buf text;
    uint64_t text_at;            /* JSON offset of the batch's first byte, as
                                    the formatter counted (dropped text in) */
    uint64_t dropped_events;     /* events dropped just before this batch */
};

/* The threads that must never wait on the trace's descriptor: the
 * collector, and a summary handler on any thread (as collector.c's
 * prof_collector_is_self, which this floor does not call). */
static int on_collector(void)
{
    return prof_rt_on_collector() || prof_writer_in_handler();
}

/* Held by the writer (trace_service) and the open: what trace_file.h
 * declares runs under it. */
static pthread_mutex_t write_lock = PTHREAD_MUTEX_INITIALIZER;
static struct batch *writing;    /* the batch being written, out of the
                                    queue meanwhile */

/* The queue (queue_lock held). */
static pthread_mutex_t queue_lock = PTHREAD_MUTEX_INITIALIZER;
static struct batch *head, **tail = &head;
static struct batch *spare;      /* written batches kept for their memory */
static unsigned nspare;
static size_t queued;            /* JSON bytes in the queue */
static uint64_t text_total;      /* JSON bytes given to the queue, dropped too */
static uint64_t drop_unsaid;     /* events dropped since the last batch queued */
static uint64_t drop_total;      /* events dropped since the file was opened */
static int end_wanted;           /* prof_trace_out_close: write the end */
static int abandon_wanted;       /* prof_trace_out_abandon */
static uint64_t queued_end;      /* JSON offset of the end of the last batch
                                    queued: what a flush waits for */
static uint64_t text_done;       /* JSON offset the writer has gone past
                                    (batches written, or not, the file failed) */

static int trace_service(void);
static void trace_end(void);

int prof_trace_out_open(char *p, struct prof_buf *opening)
{
    int err, left;

    pthread_mutex_lock(&write_lock);
    if ((err = prof_trace_file_open(p, opening)) != 0) {
        pthread_mutex_unlock(&write_lock);
        return err;
    }
    pthread_mutex_lock(&queue_lock);
    text_total = queued_end = text_done = opening->len;
    drop_unsaid = drop_total = 0;
    end_wanted = abandon_wanted = 0;
    pthread_mutex_unlock(&queue_lock);
    opening->len = 0;
    /* Only once the opening is out may the signal path write the end. */
    left = prof_trace_file_publish();
    pthread_mutex_unlock(&write_lock);
    if (left)
        prof_writer_kick(trace_service);
    return 0;
}

/* Events in a batch of whole lines: each but the file's first begins on a
 * new line, and a newline inside an event is escaped. */
static uint64_t batch_events(const struct prof_buf *b)
{
    uint64_t n = 0;

    for (const char *p = b->data, *end = b->data + b->len;
         (p = memchr(p, '\n', (size_t)(end - p))) != NULL; p++)
        n++;
    return n;
}

/* prof_writer_wait's test for a program's thread that found the queue
 * full: room for `need` more bytes (or the file is ending). */
static int queue_room(uint64_t need)
{
    int room;

    pthread_mutex_lock(&queue_lock);
    room = queued + need <= QUEUE_MAX || end_wanted;
    pthread_mutex_unlock(&queue_lock);
    return room;
}

void prof_trace_out_queue(struct prof_buf *b)
{
    struct batch *q;
    static int logged;
    uint64_t lost;
    int may_wait, waited = 0;

    if (b->len == 0)
        return;
    /* Only the collector (and the writer) must never wait: on another
     * thread (prof_flush, prof_shutdown's final drain) a full queue is
     * waited for, bounded (writer.h: a writer that is only late makes
     * room; a stuck one costs that thread the bound once), and then the
     * batch is dropped as the collector's would be. */
    may_wait = !on_collector() && !prof_writer_is_self();
    pthread_mutex_lock(&queue_lock);
    while (!end_wanted && queued + b->len > QUEUE_MAX && may_wait && !waited) {
        pthread_mutex_unlock(&queue_lock);
        prof_writer_kick(trace_service);
        prof_writer_wait(queue_room, b->len);
        waited = 1;
        pthread_mutex_lock(&queue_lock);
    }
    if (end_wanted || queued + b->len > QUEUE_MAX) {
        /* The writer is behind (a reader that does not read, a slow disk):
         * the batch is dropped, counted, and said in the file before the
         * next batch written (trace_file.c). Never the opening: it is
         * written at open. The text keeps its offset in the count, so
         * that the writer can put the file back on the formatter's page
         * placement. */
        lost = end_wanted ? 0 : batch_events(b);
        drop_unsaid += lost;
        drop_total += lost;
        text_total += b->len;
        pthread_mutex_unlock(&queue_lock);
        b->len = 0;
        b->failed = 0;
        if (lost != 0) {
            char shown[PROF_LOG_VALUE_SIZE];

            prof_log_once(&logged, "trace %s: its writer is behind (is the file's reader "
                          "stopped?); trace events are dropped while it is, and the trace says "
                          "how many", prof_trace_file_path_said(shown));
        }
        return;
    }
    if ((q = spare) != NULL) {
        spare = q->next;
        nspare--;
    }
    pthread_mutex_unlock(&queue_lock);
    if (q == NULL && (q = calloc(1, sizeof *q)) == NULL) {
        /* No memory for the queue: the batch is left out, as a full queue
         * leaves it. */
        pthread_mutex_lock(&queue_lock);
        drop_unsaid += batch_events(b);
        drop_total += batch_events(b);
        text_total += b->len;
        pthread_mutex_unlock(&queue_lock);
        b->len = 0;
        b->failed = 0;
        return;
    }
    {
        struct prof_buf empty = q->text;   /* the spare's room */
        q->text = *b;
        *b = empty;
        b->len = 0;
        b->failed = 0;
        if (b->data != NULL)
            b->data[0] = '\0';
    }
    q->next = NULL;
    pthread_mutex_lock(&queue_lock);
    q->text_at = text_total;
    text_total += q->text.len;
    queued_end = text_total;
    q->dropped_events = drop_unsaid;
    drop_unsaid = 0;
    *tail = q;
    tail = &q->next;
    queued += q->text.len;
    pthread_mutex_unlock(&queue_lock);
    prof_writer_kick(trace_service);
}

/* Write every queued batch, then the end or the abandon when asked: the
 * writer thread's service (writer.h), also run by prof_flush's thread
 * (prof_trace_out_write). */
static int trace_service(void)
{
    int any = 0, end, abandon;

    pthread_mutex_lock(&write_lock);
    if (prof_trace_file_write_carry())
        any = 1;
    for (;;) {
        struct batch *q;
        uint64_t past;

        /* The batch moves between the queue, `writing` and the spares
         * under the queue's lock, which fork takes: a forked child finds
         * it in one of them (and LeakSanitizer in none of the others). */
        pthread_mutex_lock(&queue_lock);
        if ((q = head) != NULL && (head = q->next) == NULL)
            tail = &head;
        if (q != NULL)
            queued -= q->text.len;
        writing = q;
        pthread_mutex_unlock(&queue_lock);
        if (q == NULL)
            break;
        any = 1;
        prof_trace_file_write(q->text.data, q->text.len, q->dropped_events, q->text_at);
        past = q->text_at + q->text.len;
        q->text.len = 0;
        pthread_mutex_lock(&queue_lock);
        if (past > text_done)
            text_done = past;
        if (nspare < SPARES_MAX) {
            q->next = spare;
            spare = q;
            nspare++;
        } else {
            prof_buf_free(&q->text);
            free(q);
        }
        writing = NULL;
        pthread_mutex_unlock(&queue_lock);
        /* Once text_done is moved: a prof_flush waiting for this batch
         * (prof_writer_wait) is woken only now, and sees it written. */
        prof_writer_progress();
    }
    pthread_mutex_lock(&queue_lock);
    end = end_wanted && head == NULL;
    abandon = abandon_wanted;
    abandon_wanted = 0;
    pthread_mutex_unlock(&queue_lock);
    if (abandon)
        prof_trace_file_abandon();
    if (end) {
        trace_end();
        any = 1;
    }
    pthread_mutex_unlock(&write_lock);
    return any;
}

/* prof_writer_wait's test: the writer has gone past JSON offset target. */
static int trace_written(uint64_t target)
{
    int past;

    pthread_mutex_lock(&queue_lock);
    past = text_done >= target;
    pthread_mutex_unlock(&queue_lock);
    return past;
}

/* Wake the writer if anything is queued or asked for. */
static void trace_kick(void)
{
    int work;

    pthread_mutex_lock(&queue_lock);
    work = head != NULL || abandon_wanted || end_wanted;
    pthread_mutex_unlock(&queue_lock);
    if (work)
        prof_writer_kick(trace_service);
}

int prof_trace_out_write(void)
{
    uint64_t target;

    trace_kick();
    /* The collector hands the queue to the writer thread and goes on; a
     * program's thread (prof_flush: the trace holds its events when it
     * returns) waits for the writer to write what is queued now, bounded
     * (writer.h). */
    if (on_collector() || prof_writer_is_self())
        return 0;
    pthread_mutex_lock(&queue_lock);
    target = queued_end;
    pthread_mutex_unlock(&queue_lock);
    return prof_writer_wait(trace_written, target);
}

int prof_trace_out_pending(void)
{
    int any;

    pthread_mutex_lock(&queue_lock);
    any = head != NULL;
    pthread_mutex_unlock(&queue_lock);
    return any;
}

void prof_trace_out_abandon(void)
{
    pthread_mutex_lock(&queue_lock);
    abandon_wanted = 1;
    pthread_mutex_unlock(&queue_lock);
    /* Under the runtime lock, maybe on a program's thread: never waited
     * for. */
    trace_kick();
}

/* The file's end, after the last batch (write_lock held). */
static void trace_end(void)
{
    uint64_t unsaid, total;
    struct batch *q;

    pthread_mutex_lock(&queue_lock);
    unsaid = drop_unsaid;
    total = drop_total;
    drop_unsaid = 0;
    pthread_mutex_unlock(&queue_lock);
    prof_trace_file_end(unsaid, total);
    pthread_mutex_lock(&queue_lock);
    while ((q = spare) != NULL) {
        spare = q->next;
        prof_buf_free(&q->text);
        free(q);
    }
    nspare = 0;
    end_wanted = 0;
    drop_total = 0;
    /* Closed only now: until here, a new file must not be opened over
     * this one (prof_trace_out_is_open). */
    prof_trace_file_closed();
    pthread_mutex_unlock(&queue_lock);
}

void prof_trace_out_close(void)
{
    pthread_mutex_lock(&queue_lock);
    end_wanted = 1;
    pthread_mutex_unlock(&queue_lock);
    /* Written by the writer thread; the run's end waits for it, bounded
     * (prof_summary_out_close). */
    prof_writer_kick(trace_service);
}

void prof_trace_out_atfork_prepare(void)
{
    pthread_mutex_lock(&queue_lock);
}

void prof_trace_out_atfork_parent(void)
{
    pthread_mutex_unlock(&queue_lock);
}

void prof_trace_out_atfork_child(void)
{
    /* The writer may have been in the middle of a batch in the parent:
     * its lock is made anew. */
    pthread_mutex_init(&write_lock, NULL);
    pthread_mutex_unlock(&queue_lock);
}

void prof_trace_out_forget(void)
{
    struct batch *q, *next;

    prof_trace_file_forget();
    /* The parent's batches, the one its writer had in hand included, become
     * this process's spares, unwritten and untouched: freeing them would
     * copy every page (fork shares them). */
    if (writing != NULL) {
        writing->next = head;
        head = writing;
        writing = NULL;
    }
    for (q = head; q != NULL; q = next) {
        next = q->next;
        q->text.len = 0;
        q->next = spare;
        spare = q;
        nspare++;
    }
    head = NULL;
    tail = &head;
    queued = 0;
    text_total = queued_end = text_done = drop_unsaid = drop_total = 0;
    end_wanted = abandon_wanted = 0;
}
