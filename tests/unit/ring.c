/* ring.c - the per-thread ring on its own (no runtime): a producer that
 * pushes with prof_impl.h's prof_ring_push_() and a consumer that reads with
 * src/capture/ring.h, the reader the collector's drain() uses (prof_ring_read,
 * prof_ring_next, prof_ring_release, prof_ring_dropped), on a ring set
 * up by prof_ring_init as registry.c sets up a thread's.
 *
 *   wrap:   small capacity, indices run many times around it; every record
 *           comes out once, in order, intact.
 *   full:   a full ring keeps what it has, refuses and counts the rest;
 *           the first record after a loss follows a GAP record.
 *   warm:   a consumer that keeps up: the producer never writes past the
 *           warm slots (one SKIP record at their end), and loses nothing.
 *   fast:   a producer faster than the warm lap allows stays in the warm
 *           slots while the consumer keeps up; once it has fallen behind,
 *           the producer runs through all the slots, skipping none.
 *   burst:  a consumer that falls behind: the producer goes on into the
 *           cold slots and drops only when the whole ring is full; once
 *           the consumer catches up it returns to the warm slots.
 *   stress: a producer and a consumer thread at full speed; closed form
 *           received + dropped == pushed, received in order with no
 *           duplicate and no torn record, with and without cold slots.
 *           Run under TSan by the sanitizer build, which checks the
 *           acquire/release pairs. */
#include <prof.h>

#include <stdlib.h>

#include "check.h"
#include "ring.h"

static const char *const names[4] = {"a", "b", "c", "d"};

#define UNTOUCHED 0xa5

static struct prof_thread_ *ring_new(uint64_t cap, uint64_t warm)
{
    struct prof_thread_ *t = aligned_alloc(64, sizeof *t);
    prof_record_ *records = malloc(cap * sizeof *records);

    CHECK(t != NULL && records != NULL);
    memset(t, 0, sizeof *t);
    memset(records, UNTOUCHED, cap * sizeof *records);
    prof_ring_init(t, records, cap, warm);
    return t;
}

/* Slots from `from` on that the producer never wrote. */
static int untouched_from(const struct prof_thread_ *t, uint64_t from)
{
    const unsigned char *p = (const unsigned char *)&t->ring[from];
    const unsigned char *end = (const unsigned char *)&t->ring[t->mask + 1];

    for (; p < end; p++)
        if (*p != UNTOUCHED)
            return 0;
    return 1;
}

static void ring_free(struct prof_thread_ *t)
{
    free(t->ring);
    free(t);
}

static void push_seq(struct prof_thread_ *t, uint64_t seq)
{
    prof_ring_push_(t, seq, seq * 3, names[seq & 3], (uint32_t)(seq ^ 0x55555555u), (uint32_t)(seq & 63),
                    (uint32_t)(seq % 6));
}

static void check_record(const prof_record_ *r, uint64_t seq)
{
    CHECK_EQ_U64(r->start, seq);
    CHECK_EQ_U64(r->end, seq * 3);
    CHECK(r->name == names[seq & 3]);
    CHECK_EQ_U64(r->parent, (uint32_t)(seq ^ 0x55555555u));
    CHECK_EQ(r->depth, seq & 63);
    CHECK_EQ(r->kind, seq % 6);
}

/* GAP records the consumer has read (one reader at a time), and whether
 * the last record read was one. */
static uint64_t gaps;
static int after_gap;

/* Consume every published record; returns how many, GAP records apart:
 * each loss is marked by one, just before the first record after it. */
static uint64_t drain(struct prof_thread_ *t, uint64_t *next_seq, int exact)
{
    struct prof_ring_reader rd;
    const prof_record_ *r;
    uint64_t n = 0;

    prof_ring_read(t, &rd);
    for (; (r = prof_ring_next(&rd)) != NULL; n++) {
        if (r->kind == PROF_RECORD_GAP_) {
            CHECK_MSG(!after_gap, "two GAP records in a row");
            CHECK(r->end > 0 && r->end <= prof_ring_dropped(t));
            gaps++;
            after_gap = 1;
            n--;
            continue;
        }
        CHECK_MSG(after_gap == (r->start > *next_seq && *next_seq > 1) || exact,
                  "record %" PRIu64 " after %" PRIu64 " %s a GAP record", r->start, *next_seq - 1,
                  after_gap ? "with" : "without");
        after_gap = 0;
        if (exact) {
            check_record(r, *next_seq);
        } else {
            /* Drops leave gaps, never reorderings or duplicates. */
            CHECK_MSG(r->start >= *next_seq, "record %" PRIu64 " after %" PRIu64, r->start,
                      *next_seq);
            check_record(r, r->start);
        }
        *next_seq = r->start + 1;
    }
    prof_ring_release(t, rd.tail);
    return n;
}

static void test_wrap(void)
{
    struct prof_thread_ *t = ring_new(16, 16);
    uint64_t seq = 1, next = 1, got = 0;

    for (int round = 0; round < 5000; round++) {
        int k = 1 + round % 16;             /* up to exactly the capacity */
        for (int i = 0; i < k; i++)
            push_seq(t, seq++);
        got += drain(t, &next, 1);
        CHECK_EQ_U64(t->head, t->tail);
    }
    CHECK_EQ_U64(got, seq - 1);
    CHECK_EQ_U64(t->head, seq - 1);         /* free-running: far past the capacity */
    CHECK_GT(t->head, 1000 * 16);
    CHECK_EQ_U64(prof_ring_dropped(t), 0);
    ring_free(t);
}

static void test_full(void)
{
    struct prof_thread_ *t = ring_new(16, 16);
    struct prof_ring_reader rd;

    for (uint64_t s = 1; s <= 16; s++)
        push_seq(t, s);
    CHECK_EQ_U64(prof_ring_dropped(t), 0);
    for (uint64_t s = 17; s <= 26; s++)     /* 10 more: all refused */
        push_seq(t, s);
    CHECK_EQ_U64(prof_ring_dropped(t), 10);
    CHECK_EQ_U64(t->head, 16);
    /* The kept records are the first 16, untouched by the refused ones. */
    prof_ring_read(t, &rd);
    CHECK_EQ_U64(rd.head - rd.tail, 16);
    for (uint64_t s = 1; s <= 16; s++)
        check_record(prof_ring_next(&rd), s);
    CHECK(prof_ring_next(&rd) == NULL);

    /* Hand back 5 slots: the GAP record that marks the loss and exactly
     * 4 more fit. */
    prof_ring_release(t, 5);
    for (uint64_t s = 27; s <= 32; s++)
        push_seq(t, s);
    CHECK_EQ_U64(t->head, 21);
    CHECK_EQ_U64(prof_ring_dropped(t), 12);
    /* Wrapped: after 6..16 come the GAP (10 lost before it) and 27..30,
     * from slots 0..4. */
    prof_ring_read(t, &rd);
    CHECK_EQ_U64(rd.tail, 5);
    CHECK_EQ_U64(rd.head, 21);
    for (uint64_t s = 6; s <= 16; s++)
        check_record(prof_ring_next(&rd), s);
    {
        const prof_record_ *gap = prof_ring_next(&rd);
        CHECK_EQ(gap->kind, PROF_RECORD_GAP_);
        CHECK_EQ_U64(gap->end, 10);
    }
    for (uint64_t s = 27; s <= 30; s++)
        check_record(prof_ring_next(&rd), s);
    CHECK(prof_ring_next(&rd) == NULL);
    CHECK_EQ_U64(rd.tail, 21);
    ring_free(t);
}

static void test_warm(void)
{
    struct prof_thread_ *t = ring_new(256, 32);
    uint64_t seq = 1, next = 1, got = 0;

    t->warm_lap_ns = 0;                     /* any rate counts as slow */
    /* Up to half of the warm slots between drains: the consumer keeps up. */
    for (int round = 0; round < 5000; round++) {
        int k = 1 + round % 16;
        for (int i = 0; i < k; i++)
            push_seq(t, seq++);
        got += drain(t, &next, 1);
    }
    CHECK_EQ_U64(got, seq - 1);
    CHECK_EQ_U64(prof_ring_dropped(t), 0);
    CHECK_GT(t->head, 100 * 256);           /* many laps, each one skipped */
    /* Slot 32 held the SKIP records; nothing past it was ever written. */
    CHECK_EQ(t->ring[32].kind, PROF_RECORD_SKIP_);
    CHECK(untouched_from(t, 33));
    ring_free(t);
}

static void test_fast(void)
{
    struct prof_thread_ *t = ring_new(256, 32);
    uint64_t seq = 1, next = 1, got = 0;

    /* A thread that fills its warm slots in less than an hour is fast:
     * it runs through all the slots from its first lap, though the
     * consumer keeps up, so that a stall of the consumer finds the whole
     * ring free, not what a warm lap has left (issue 20: a thread at
     * 1 M zones/s lost records to a 32 ms stall when it stayed in its
     * warm slots until the first stall had cost it records). */
    t->warm_lap_ns = 3600000000000u;
    for (int round = 0; round < 100; round++) {
        for (int i = 0; i < 8; i++)
            push_seq(t, seq++);
        got += drain(t, &next, 1);
    }
    CHECK(!untouched_from(t, 255));
    {
        uint64_t head = t->head;
        for (int round = 0; round < 200; round++) {
            for (int i = 0; i < 8; i++)
                push_seq(t, seq++);
            got += drain(t, &next, 1);
        }
        CHECK_EQ_U64(t->head - head, 1600);    /* no slot skipped */
    }
    CHECK_EQ_U64(got, seq - 1);
    CHECK_EQ_U64(prof_ring_dropped(t), 0);
    CHECK(!untouched_from(t, 255));
    ring_free(t);
}

static void test_burst(void)
{
    struct prof_thread_ *t = ring_new(256, 32);
    uint64_t seq = 1, next = 1, got = 0;

    t->warm_lap_ns = 0;
    /* The consumer is away: the whole ring fills, warm and cold. */
    for (int i = 0; i < 300; i++)
        push_seq(t, seq++);
    CHECK_EQ_U64(prof_ring_dropped(t), 300 - 256);
    CHECK(!untouched_from(t, 255));
    got += drain(t, &next, 1);
    CHECK_EQ_U64(got, 256);
    /* The drops were the newest records: the kept ones are 1..256. */
    CHECK_EQ_U64(next, 257);

    /* Caught up: the next laps keep to the warm slots again. */
    memset(&t->ring[33], UNTOUCHED, (256 - 33) * sizeof *t->ring);
    next = seq;
    for (int round = 0; round < 200; round++) {
        for (int i = 0; i < 8; i++)
            push_seq(t, seq++);
        got += drain(t, &next, 1);
    }
    CHECK_EQ_U64(got, 256 + 1600);
    CHECK_EQ_U64(prof_ring_dropped(t), 300 - 256);
    CHECK(untouched_from(t, 33));
    ring_free(t);
}

struct stress {
    struct prof_thread_ *t;
    uint64_t n;
    int producer_done;
    uint64_t received;
    int exact;
};

static void *consumer(void *arg)
{
    struct stress *s = arg;
    uint64_t next = 1;

    for (;;) {
        int done = __atomic_load_n(&s->producer_done, __ATOMIC_ACQUIRE);
        s->received += drain(s->t, &next, s->exact);
        if (done)
            break;
    }
    s->received += drain(s->t, &next, s->exact);
    return NULL;
}

static void test_stress(uint64_t cap, uint64_t warm, uint64_t n, int exact)
{
    struct stress s = {ring_new(cap, warm), n, 0, 0, exact};
    pthread_t c;

    gaps = 0;
    after_gap = 0;
    s.t->warm_lap_ns = 0;                   /* wrap early whenever it may */

    CHECK_EQ(pthread_create(&c, NULL, consumer, &s), 0);
    for (uint64_t seq = 1; seq <= n; seq++)
        push_seq(s.t, seq);
    __atomic_store_n(&s.producer_done, 1, __ATOMIC_RELEASE);
    CHECK_EQ(pthread_join(c, NULL), 0);
    CHECK_EQ_U64(s.received + prof_ring_dropped(s.t), n);
    if (warm == cap)
        CHECK_EQ_U64(s.received + gaps, s.t->head);   /* no slot skipped */
    if (exact)
        CHECK_EQ_U64(prof_ring_dropped(s.t), 0);
    fprintf(stderr, "stress cap %" PRIu64 " warm %" PRIu64 ": %" PRIu64 " pushed, %" PRIu64 " received, %" PRIu64
            " dropped (%" PRIu64 " losses marked)\n", cap, warm, n, s.received,
            prof_ring_dropped(s.t), gaps);
    ring_free(s.t);
}

int main(void)
{
    uint64_t n = (uint64_t)test_scale(1000000);

    test_wrap();
    test_full();
    test_warm();
    test_fast();
    test_burst();
    /* A ring as large as the run: nothing may be lost. */
    test_stress(1u << 20, 1u << 20, n < (1u << 20) ? n : (1u << 20), 1);
    /* Tiny rings: drops, each one counted. */
    test_stress(16, 16, n, 0);
    test_stress(1024, 1024, n, 0);
    /* Early wraps racing the consumer. */
    test_stress(1024, 64, n, 0);
    test_stress(1u << 20, 1024, n, 0);
    return 0;
}
