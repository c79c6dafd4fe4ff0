/* ranks.c - the cross-rank table as a reduction: snapshot one rank's
 * window, contribute to each round, combine contributions, format the
 * combined numbers. The only code that knows the layout: prof.distributed,
 * prof_mpi.h and bench/ranks_scale all go through it.
 *
 * Every round's buffer is [MIN part][MAX part][SUM part] of int64 words,
 * each part starting with the same magic word (round and version), so
 * that a plain all-reduce of three tensors (torch) or one user-defined op
 * (MPI, prof_ranks_combine) moves it, and a rank of another version shows
 * as a magic word that the MIN and MAX disagree on.
 *
 * Values that need the rank holding them (MPI_MINLOC/MAXLOC) are encoded
 * as value << RANKS_RANK_BITS | rank: MIN and MAX of the words are then
 * MINLOC and MAXLOC (ties go to the lower rank for MIN, the higher for
 * MAX). Values are whole nanoseconds, saturated at 2^43 (2.4 hours).
 *
 * Stages are matched by a 47-bit hash of their name. Round 0 places each
 * rank's stages in KEY_CHOICES (3) slots of a RANKS_KEY_SLOTS table (key = weight <<
 * 47 | hash, combined by MAX: the heavier stage wins a slot); a stage is in
 * the table when it holds one of its slots, and the
 * PROF_RANKS_MAX_STAGES heaviest of those are the rows, in the same order
 * on every rank. A stage that loses all its slots, or is beyond the cap, is
 * left out of the cross-rank view and counted.
 *
 * The medians across ranks come from round 2's histograms:
 * RANKS_HIST_BUCKETS buckets spaced evenly in log(1 + ns) between the min
 * and max that round 1 found, so the error is relative to the spread of
 * the stage, not to a fixed range.
 *
 * The straggler (one definition, shared with tools/prof-merge): for each
 * stage, each rank's self time per step in the window (a rank that did not
 * run the stage counts 0, ranks with no window are left out); the straggler
 * is the (rank, stage) with the largest excess of that value over the
 * median across ranks (the ceil(N/2)-th smallest value), or, with exactly
 * two ranks, over the other rank's value. Self time, so that a parent is
 * not blamed for its slow child; the median, so that the time the other
 * ranks spend waiting for the straggler in a collective is the
 * majority's, not an outlier. The largest excess of a stage is always its
 * maximum's, so MAXLOC and the median suffice. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ranks.h"
#include "summary.h"

_Static_assert(sizeof(struct ranks_state) <= PROF_RANKS_STATE_SIZE, "PROF_RANKS_STATE_SIZE");

int prof_ranks_muted;

#define HASH_MASK ((UINT64_C(1) << 47) - 1)
#define VAL_MAX ((INT64_C(1) << 43) - 1)
#define RANK_MASK ((INT64_C(1) << RANKS_RANK_BITS) - 1)
#define HIST_WORDS ((RANKS_HIST_BUCKETS + 2) / 3)
#define ABSENT_MIN INT64_MAX
#define ABSENT_MAX INT64_C(-1)

/* Words per part (MIN, MAX, SUM) of each round. */
enum {
    R0_MIN = 2, R0_MAX = 1 + RANKS_KEY_SLOTS, R0_SUM = 1,
    R1_GMIN = 3, R1_GMAX = 6, R1_GSUM = 5,
    R1_SMIN = 3, R1_SMAX = 4 + RANKS_NAME_WORDS, R1_SSUM = 4,
    R1_MIN = R1_GMIN + R1_SMIN * PROF_RANKS_MAX_STAGES,
    R1_MAX = R1_GMAX + R1_SMAX * PROF_RANKS_MAX_STAGES,
    R1_SUM = R1_GSUM + R1_SSUM * PROF_RANKS_MAX_STAGES,
    R2_MIN = 1, R2_MAX = 1, R2_SSUM = 1 + 3 * HIST_WORDS,
    R2_SUM = 1 + R2_SSUM * PROF_RANKS_MAX_STAGES,
};

static const size_t layout[PROF_RANKS_ROUNDS][3] = {
    {R0_MIN, R0_MAX, R0_SUM}, {R1_MIN, R1_MAX, R1_SUM}, {R2_MIN, R2_MAX, R2_SUM}};

_Static_assert((R1_MIN + R1_MAX + R1_SUM) * 8 <= PROF_RANKS_BUF_SIZE, "PROF_RANKS_BUF_SIZE");
_Static_assert((R2_MIN + R2_MAX + R2_SUM) * 8 <= PROF_RANKS_BUF_SIZE, "PROF_RANKS_BUF_SIZE");
_Static_assert((R0_MIN + R0_MAX + R0_SUM) * 8 <= PROF_RANKS_BUF_SIZE, "PROF_RANKS_BUF_SIZE");

static int64_t magic_word(int round)
{
    return (int64_t)((uint64_t)PROF_RANKS_MAGIC << 32 | (uint64_t)PROF_RANKS_VERSION << 16 |
                     (uint64_t)round);
}

static size_t round_words(int round)
{
    return layout[round][0] + layout[round][1] + layout[round][2];
}

/* The caller's buffers need not be aligned: words go through memcpy. */
static int64_t ld(const void *p, size_t i)
{
    int64_t v;

    memcpy(&v, (const char *)p + i * 8, 8);
    return v;
}

static void st64(void *p, size_t i, int64_t v)
{
    memcpy((char *)p + i * 8, &v, 8);
}

static int64_t enc(double v, int rank)
{
    int64_t q = v <= 0 ? 0 : v >= (double)VAL_MAX ? VAL_MAX : (int64_t)(v + 0.5);

    return q << RANKS_RANK_BITS | rank;
}

static double dec_val(int64_t w)
{
    return (double)(w >> RANKS_RANK_BITS);
}

static int dec_rank(int64_t w)
{
    return (int)(w & RANK_MASK);
}

static uint64_t name_hash(const char *s)
{
    uint64_t h = 1469598103934665603ull;

    for (; *s != '\0'; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    /* FNV-1a spreads names that differ in their last bytes poorly over
     * its low bits; murmur3's finaliser mixes them into every bit. */
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 33;
    h &= HASH_MASK;
    return h ? h : 1;
}

#define KEY_CHOICES 3

/* The slots a key may take: KEY_CHOICES distinct ones. */
static void slots_of(uint64_t h, size_t *k)
{
    for (int i = 0; i < KEY_CHOICES; i++) {
        size_t v = (size_t)(h >> (10 * i)) % RANKS_KEY_SLOTS;
        for (int j = 0; j < i; j++)
            if (k[j] == v) {
                v = (v + 1) % RANKS_KEY_SLOTS;
                j = -1;
            }
        k[i] = v;
    }
}

/* Copy at most size - 1 bytes of s, never ending inside a UTF-8 sequence. */
static void copy_name(char *dst, size_t size, const char *s)
{
    size_t n = prof_utf8_cut(s, strlen(s), size - 1);

    memcpy(dst, s, n);
    memset(dst + n, 0, size - n);
}

static struct ranks_state *state_of(void *state, size_t size)
{
    struct ranks_state *s = state;

    if (s == NULL || size < PROF_RANKS_STATE_SIZE || ((uintptr_t)s % 8) != 0)
        return NULL;
    return s;
}

/* ------------------------------------------------------------------------ */
/* The snapshot. */

static int cmp_local_hash(const void *a, const void *b)
{
    const struct ranks_local *x = a, *y = b;

    return x->hash < y->hash ? -1 : x->hash > y->hash;
}

static int cmp_local_total(const void *a, const void *b)
{
    const struct ranks_local *x = a, *y = b;

    if (x->total_ns != y->total_ns)
        return x->total_ns > y->total_ns ? -1 : 1;
    return x->hash < y->hash ? -1 : x->hash > y->hash;
}

static int ranks_snapshot_rows(struct ranks_state *s, int rank, const prof_stage_stats *rows, size_t n,
                        uint64_t end_step, uint64_t steps, uint64_t wall_ns)
{
    struct ranks_local *all;
    size_t used = 0, merged = 0;

    if (rank < 0 || rank > RANK_MASK)
        return -ERANGE;
    memset(s, 0, sizeof *s);
    s->magic = PROF_RANKS_MAGIC;
    s->version = PROF_RANKS_VERSION;
    s->rank = rank;
    if (rows == NULL || end_step == 0)
        return 0;
    s->have_window = 1;
    s->end_step = end_step;
    s->steps = steps;
    s->wall_ns = wall_ns;
    if ((all = malloc((n ? n : 1) * sizeof *all)) == NULL) {
        /* Out of memory: an empty window, so that the rank still takes part. */
        s->folded = n;
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        const prof_stage_stats *r = &rows[i];
        struct ranks_local *l = &all[used];
        if (r->count == 0)
            continue;
        l->hash = name_hash(r->name);
        l->count = r->count;
        l->total_ns = r->total_ns;
        l->self_ns = r->self_ns;
        l->max_ns = r->max_ns;
        l->avg_ns = r->avg_ns;
        l->p95_ns = r->p95_ns;
        copy_name(l->name, sizeof l->name, r->name);
        used++;
    }
    /* One row per name: a name shown at two places of the tree is one
     * stage across ranks. */
    qsort(all, used, sizeof *all, cmp_local_hash);
    for (size_t i = 0; i < used; i++) {
        struct ranks_local *m = &all[merged];
        if (merged > 0 && all[merged - 1].hash == all[i].hash) {
            m = &all[merged - 1];
            m->count += all[i].count;
            m->total_ns += all[i].total_ns;
            m->self_ns += all[i].self_ns;
            if (all[i].max_ns > m->max_ns)
                m->max_ns = all[i].max_ns;
            if (all[i].p95_ns > m->p95_ns)
                m->p95_ns = all[i].p95_ns;
            m->avg_ns = (double)m->total_ns / (double)m->count;
            continue;
        }
        if (merged != i)
            *m = all[i];
        merged++;
    }
    qsort(all, merged, sizeof *all, cmp_local_total);
    if (merged > RANKS_LOCAL_CAP) {
        s->folded = merged - RANKS_LOCAL_CAP;
        merged = RANKS_LOCAL_CAP;
    }
    for (size_t i = 0; i < merged; i++) {
        all[i].self_per_step = steps ? (double)all[i].self_ns / (double)steps
                                     : (double)all[i].self_ns;
        s->local[i] = all[i];
    }
    s->nlocal = (int32_t)merged;
    free(all);
    return 0;
}

PROF_API int prof_ranks_snapshot_rows(void *state, size_t size, int rank,
                                      const prof_stage_stats *rows, size_t n,
                                      uint64_t end_step, uint64_t steps, uint64_t wall_ns)
{
    struct ranks_state *s = state_of(state, size);

    if (s == NULL)
        return -EINVAL;
    return ranks_snapshot_rows(s, rank, rows, n, end_step, steps, wall_ns);
}

/* ------------------------------------------------------------------------ */
/* Rounds. */

static int64_t key_weight(uint64_t total_ns)
{
    double w = log2((double)total_ns + 1) * 512;

    return w >= 65535 ? 65535 : (int64_t)w;
}

static void pack_name(int64_t *w, const char *name)
{
    for (int k = 0; k < RANKS_NAME_WORDS; k++) {
        uint64_t v = 0;
        for (int j = 0; j < 7; j++)
            v = v << 8 | (unsigned char)name[k * 7 + j];
        w[k] = (int64_t)v;
    }
}

static void unpack_name(char *name, const void *buf, size_t at)
{
    for (int k = 0; k < RANKS_NAME_WORDS; k++) {
        uint64_t v = (uint64_t)ld(buf, at + (size_t)k);
        for (int j = 6; j >= 0; j--) {
            name[k * 7 + j] = (char)(v & 0xff);
            v >>= 8;
        }
    }
    name[RANKS_NAME_WORDS * 7] = '\0';
}

static int hist_bucket(double v, double lo, double hi)
{
    double a = log1p(lo), span = log1p(hi) - a, x;
    int b;

    if (!(span > 0))
        return 0;
    x = (log1p(v) - a) / span * RANKS_HIST_BUCKETS;
    b = x <= 0 ? 0 : (int)x;
    return b >= RANKS_HIST_BUCKETS ? RANKS_HIST_BUCKETS - 1 : b;
}

static void contribute0(const struct ranks_state *s, void *buf)
{
    size_t mx = R0_MIN, sm = R0_MIN + R0_MAX;

    st64(buf, 0, magic_word(0));
    st64(buf, 1, s->have_window ? s->rank : ABSENT_MIN);
    st64(buf, mx, magic_word(0));
    for (size_t k = 0; k < RANKS_KEY_SLOTS; k++)
        st64(buf, mx + 1 + k, 0);
    for (int i = 0; i < s->nlocal; i++) {
        const struct ranks_local *l = &s->local[i];
        int64_t e = key_weight(l->total_ns) << 47 | (int64_t)l->hash;
        size_t k[KEY_CHOICES];
        slots_of(l->hash, k);
        for (int j = 0; j < KEY_CHOICES; j++)
            if (e > ld(buf, mx + 1 + k[j]))
                st64(buf, mx + 1 + k[j], e);
    }
    st64(buf, sm, 1);
}

static void contribute1(const struct ranks_state *s, void *buf)
{
    size_t mn = 0, mx = R1_MIN, sm = R1_MIN + R1_MAX;
    int64_t w[RANKS_NAME_WORDS];
    int hw = s->have_window;

    st64(buf, mn + 0, magic_word(1));
    st64(buf, mn + 1, hw ? enc((double)s->end_step, s->rank) : ABSENT_MIN);
    st64(buf, mn + 2, hw ? ABSENT_MIN : s->rank);
    st64(buf, mx + 0, magic_word(1));
    st64(buf, mx + 1, hw ? enc((double)s->end_step, s->rank) : ABSENT_MAX);
    st64(buf, mx + 2, hw ? ABSENT_MAX : s->rank);
    st64(buf, mx + 3, s->rank == s->r1.ref_rank ? (int64_t)s->end_step : 0);
    st64(buf, mx + 4, s->rank == s->r1.ref_rank ? (int64_t)s->steps : 0);
    st64(buf, mx + 5, s->rank == s->r1.ref_rank ? (int64_t)s->wall_ns : 0);
    st64(buf, sm + 0, 1);
    st64(buf, sm + 1, hw);
    st64(buf, sm + 2, !hw);
    st64(buf, sm + 3, (int64_t)s->folded);
    st64(buf, sm + 4, s->lost);
    for (int i = 0; i < PROF_RANKS_MAX_STAGES; i++) {
        size_t a = mn + R1_GMIN + (size_t)i * R1_SMIN, b = mx + R1_GMAX + (size_t)i * R1_SMAX,
               c = sm + R1_GSUM + (size_t)i * R1_SSUM;
        const struct ranks_local *l = i < s->nstages && s->at[i] >= 0 ? &s->local[s->at[i]]
                                                                       : NULL;
        if (l == NULL) {
            for (int q = 0; q < R1_SMIN; q++)
                st64(buf, a + (size_t)q, ABSENT_MIN);
            for (int q = 0; q < 4; q++)
                st64(buf, b + (size_t)q, ABSENT_MAX);
            for (int q = 0; q < RANKS_NAME_WORDS; q++)
                st64(buf, b + 4 + (size_t)q, 0);
            for (int q = 0; q < R1_SSUM; q++)
                st64(buf, c + (size_t)q, 0);
            continue;
        }
        st64(buf, a + 0, enc(l->avg_ns, s->rank));
        st64(buf, a + 1, enc(l->p95_ns, s->rank));
        st64(buf, a + 2, enc(l->self_per_step, s->rank));
        st64(buf, b + 0, enc(l->avg_ns, s->rank));
        st64(buf, b + 1, enc(l->p95_ns, s->rank));
        st64(buf, b + 2, enc(l->self_per_step, s->rank));
        st64(buf, b + 3, (int64_t)(l->max_ns > (uint64_t)VAL_MAX ? (uint64_t)VAL_MAX : l->max_ns));
        pack_name(w, l->name);
        for (int q = 0; q < RANKS_NAME_WORDS; q++)
            st64(buf, b + 4 + (size_t)q, w[q]);
        st64(buf, c + 0, 1);
        st64(buf, c + 1, (int64_t)l->count);
        st64(buf, c + 2, (int64_t)l->total_ns);
        st64(buf, c + 3, (int64_t)l->self_ns);
    }
}

static int other_steps(const struct ranks_state *s)
{
    return s->have_window && s->r1.ref_rank >= 0 && (int64_t)s->end_step != s->r1.ref_step;
}

static void contribute2(const struct ranks_state *s, void *buf)
{
    size_t sm = R2_MIN + R2_MAX;
    int off = other_steps(s);

    st64(buf, 0, magic_word(2));
    st64(buf, R2_MIN, magic_word(2));
    st64(buf, sm, off);
    for (int i = 0; i < PROF_RANKS_MAX_STAGES; i++) {
        size_t c = sm + 1 + (size_t)i * R2_SSUM;
        const struct ranks_local *l = i < s->nstages && s->at[i] >= 0 ? &s->local[s->at[i]]
                                                                       : NULL;
        for (int q = 0; q < R2_SSUM; q++)
            st64(buf, c + (size_t)q, 0);
        if (l == NULL)
            continue;
        st64(buf, c, off);
        {
            double v[3] = {l->avg_ns, l->p95_ns, l->self_per_step};
            for (int q = 0; q < 3; q++) {
                const struct ranks_stage *t = &s->st[i];
                int bk = hist_bucket(v[q], dec_val(t->min[q]), dec_val(t->max[q]));
                size_t wi = c + 1 + (size_t)q * HIST_WORDS + (size_t)bk / 3;
                st64(buf, wi, ld(buf, wi) + (INT64_C(1) << (bk % 3 * RANKS_COUNT_BITS)));
            }
        }
    }
}

PROF_API int prof_ranks_contribute(void *state, int round, void *buf, size_t size,
                                   size_t parts[3])
{
    struct ranks_state *s = state_of(state, PROF_RANKS_STATE_SIZE);

    if (s == NULL || s->magic != PROF_RANKS_MAGIC || round < 0 || round >= PROF_RANKS_ROUNDS ||
        round != s->done || buf == NULL || size < round_words(round) * 8)
        return -EINVAL;
    if (round == 0)
        contribute0(s, buf);
    else if (round == 1)
        contribute1(s, buf);
    else
        contribute2(s, buf);
    if (parts != NULL)
        memcpy(parts, layout[round], sizeof layout[round]);
    return (int)(round_words(round) * 8);
}

PROF_API int prof_ranks_combine(void *inout, const void *in, size_t size)
{
    int64_t m = inout != NULL && in != NULL && size >= 8 ? ld(inout, 0) : 0;
    size_t nmin, nmax, nsum;
    int round = (int)(m & 0xffff);

    if (inout == NULL || in == NULL || size % 8 != 0 || size < 8)
        return -EINVAL;
    if (round >= PROF_RANKS_ROUNDS || m != magic_word(round) || ld(in, 0) != m ||
        size != round_words(round) * 8) {
        st64(inout, 0, 0);   /* poisoned: prof_ranks_result says so */
        return 0;
    }
    nmin = layout[round][0];
    nmax = layout[round][1];
    nsum = layout[round][2];
    for (size_t i = 0; i < nmin; i++) {
        int64_t b = ld(in, i);
        if (b < ld(inout, i))
            st64(inout, i, b);
    }
    for (size_t i = nmin; i < nmin + nmax; i++) {
        int64_t b = ld(in, i);
        if (b > ld(inout, i))
            st64(inout, i, b);
    }
    for (size_t i = nmin + nmax; i < nmin + nmax + nsum; i++)
        st64(inout, i, (int64_t)((uint64_t)ld(inout, i) + (uint64_t)ld(in, i)));
    return 0;
}

struct cand {
    int64_t weight;
    uint64_t hash;
};

static int cmp_cand(const void *a, const void *b)
{
    const struct cand *x = a, *y = b;

    if (x->weight != y->weight)
        return x->weight > y->weight ? -1 : 1;
    return x->hash < y->hash ? -1 : x->hash > y->hash;
}

static int result0(struct ranks_state *s, const void *buf)
{
    size_t mx = R0_MIN, n = 0;
    struct cand *c = malloc(RANKS_KEY_SLOTS * sizeof *c);
    int64_t ref = ld(buf, 1);

    if (c == NULL)
        return -ENOMEM;
    for (size_t k = 0; k < RANKS_KEY_SLOTS; k++) {
        int64_t e = ld(buf, mx + 1 + k);
        uint64_t h;
        size_t sl[KEY_CHOICES];
        int first = 0;
        if (e <= 0)
            continue;
        h = (uint64_t)e & HASH_MASK;
        slots_of(h, sl);
        /* Once, at the first of its slots it holds. */
        while (((uint64_t)ld(buf, mx + 1 + sl[first]) & HASH_MASK) != h)
            first++;
        if (k != sl[first])
            continue;
        c[n].weight = e >> 47;
        c[n].hash = h;
        n++;
    }
    qsort(c, n, sizeof *c, cmp_cand);
    s->nstages = (int32_t)(n < PROF_RANKS_MAX_STAGES ? n : PROF_RANKS_MAX_STAGES);
    for (int i = 0; i < s->nstages; i++) {
        s->keys[i] = c[i].hash;
        s->at[i] = -1;
    }
    free(c);
    s->lost = 0;
    for (int j = 0; j < s->nlocal; j++) {
        int found = 0;
        for (int i = 0; i < s->nstages && !found; i++)
            if (s->keys[i] == s->local[j].hash) {
                s->at[i] = j;
                found = 1;
            }
        s->lost += !found;
    }
    s->r1.ref_rank = ref == ABSENT_MIN ? -1 : ref;
    s->r1.nranks = ld(buf, R0_MIN + R0_MAX);
    return 0;
}

static void result1(struct ranks_state *s, const void *buf)
{
    size_t mn = 0, mx = R1_MIN, sm = R1_MIN + R1_MAX;
    int64_t nw;

    s->r1.step_min = ld(buf, mn + 1);
    nw = ld(buf, mn + 2);
    s->r1.nowin_min = nw == ABSENT_MIN ? -1 : nw;
    s->r1.step_max = ld(buf, mx + 1);
    s->r1.nowin_max = ld(buf, mx + 2);
    s->r1.ref_step = ld(buf, mx + 3);
    s->r1.ref_steps = ld(buf, mx + 4);
    s->r1.ref_wall = ld(buf, mx + 5);
    s->r1.nranks = ld(buf, sm + 0);
    s->r1.ok = ld(buf, sm + 1);
    s->r1.no_window = ld(buf, sm + 2);
    s->r1.folded = ld(buf, sm + 3);
    s->r1.lost = ld(buf, sm + 4);
    for (int i = 0; i < s->nstages; i++) {
        struct ranks_stage *t = &s->st[i];
        size_t a = mn + R1_GMIN + (size_t)i * R1_SMIN, b = mx + R1_GMAX + (size_t)i * R1_SMAX,
               c = sm + R1_GSUM + (size_t)i * R1_SSUM;
        memset(t, 0, sizeof *t);
        t->hash = s->keys[i];
        for (int q = 0; q < 3; q++) {
            t->min[q] = ld(buf, a + (size_t)q);
            t->max[q] = ld(buf, b + (size_t)q);
        }
        t->max_ns = ld(buf, b + 3);
        unpack_name(t->name, buf, b + 4);
        t->ranks = ld(buf, c + 0);
        t->count = ld(buf, c + 1);
        t->total_ns = ld(buf, c + 2);
        t->self_ns = ld(buf, c + 3);
    }
}

static void result2(struct ranks_state *s, const void *buf)
{
    size_t sm = R2_MIN + R2_MAX;

    s->differ = ld(buf, sm);
    for (int i = 0; i < s->nstages; i++) {
        struct ranks_stage *t = &s->st[i];
        size_t c = sm + 1 + (size_t)i * R2_SSUM;
        t->off = ld(buf, c);
        for (int q = 0; q < 3; q++)
            for (int bk = 0; bk < RANKS_HIST_BUCKETS; bk++) {
                uint64_t w = (uint64_t)ld(buf, c + 1 + (size_t)q * HIST_WORDS + (size_t)bk / 3);
                t->hist[q][bk] = (uint32_t)(w >> (bk % 3 * RANKS_COUNT_BITS) &
                                            ((UINT64_C(1) << RANKS_COUNT_BITS) - 1));
            }
    }
}

PROF_API int prof_ranks_result(void *state, int round, const void *buf, size_t size)
{
    struct ranks_state *s = state_of(state, PROF_RANKS_STATE_SIZE);
    int err = 0;

    if (s == NULL || s->magic != PROF_RANKS_MAGIC || round < 0 || round >= PROF_RANKS_ROUNDS ||
        round != s->done || buf == NULL || size < round_words(round) * 8)
        return -EINVAL;
    if (ld(buf, 0) != magic_word(round) || ld(buf, layout[round][0]) != magic_word(round)) {
        /* Some rank sent another layout: nothing in the buffer can be
         * trusted, and the table says so. */
        s->bad = 1;
        s->done = PROF_RANKS_ROUNDS;
        return -EPROTO;
    }
    if (round == 0)
        err = result0(s, buf);
    else if (round == 1)
        result1(s, buf);
    else
        result2(s, buf);
    if (err == 0)
        s->done = round + 1;
    return err;
}

/* ------------------------------------------------------------------------ */
/* The formatter. */

/* The k-th smallest (1-based) of zeros zero values and the histogram's,
 * as the midpoint (in log(1 + ns)) of its bucket; the first and last
 * bucket give the exact min and max, where most ranks sit when one is an
 * outlier. */
static double hist_kth(const uint32_t *h, int64_t zeros, double lo, double hi, int64_t k)
{
    int64_t seen = zeros;
    double a = log1p(lo), span = log1p(hi) - a;

    if (k <= zeros)
        return 0;
    for (int b = 0; b < RANKS_HIST_BUCKETS; b++) {
        seen += h[b];
        if (seen >= k) {
            double v;
            if (b == 0 || !(span > 0))
                return lo;
            if (b == RANKS_HIST_BUCKETS - 1)
                return hi;
            v = expm1(a + span * (b + 0.5) / RANKS_HIST_BUCKETS);
            return v < lo ? lo : v > hi ? hi : v;
        }
    }
    return hi;
}

struct row {
    const struct ranks_stage *t;
    double avg_med, p95_med, spread, sps_med;
};

struct table {
    const struct ranks_state *s;
    struct row rows[PROF_RANKS_MAX_STAGES];
    int nrows;
    int s_rank, s_row;
    double s_excess, s_self, s_other;
};

static int cmp_row(const void *a, const void *b)
{
    const struct row *x = a, *y = b;

    if (x->t->total_ns != y->t->total_ns)
        return x->t->total_ns > y->t->total_ns ? -1 : 1;
    return strcmp(x->t->name, y->t->name);
}

static void table_build(struct table *tb, const struct ranks_state *s)
{
    int64_t ok = s->r1.ok;

    memset(tb, 0, sizeof *tb);
    tb->s = s;
    tb->s_rank = -1;
    for (int i = 0; i < s->nstages; i++) {
        const struct ranks_stage *t = &s->st[i];
        struct row *w = &tb->rows[tb->nrows];
        if (t->ranks <= 0)
            continue;
        w->t = t;
        w->avg_med = hist_kth(t->hist[0], 0, dec_val(t->min[0]), dec_val(t->max[0]),
                              (t->ranks + 1) / 2);
        w->p95_med = hist_kth(t->hist[1], 0, dec_val(t->min[1]), dec_val(t->max[1]),
                              (t->ranks + 1) / 2);
        w->sps_med = hist_kth(t->hist[2], ok - t->ranks, dec_val(t->min[2]), dec_val(t->max[2]),
                              (ok + 1) / 2);
        w->spread = w->avg_med > 0 ? dec_val(t->max[0]) / w->avg_med : 0;
        tb->nrows++;
    }
    qsort(tb->rows, (size_t)tb->nrows, sizeof *tb->rows, cmp_row);
    if (ok < 2)
        return;
    for (int k = 0; k < tb->nrows; k++) {
        const struct row *w = &tb->rows[k];
        double v = dec_val(w->t->max[2]), other;
        if (ok == 2)
            other = w->t->ranks == 2 ? dec_val(w->t->min[2]) : 0;
        else
            other = w->sps_med;
        if (v - other > tb->s_excess) {
            tb->s_excess = v - other;
            tb->s_rank = dec_rank(w->t->max[2]);
            tb->s_row = k;
            tb->s_self = v;
            tb->s_other = other;
        }
    }
}

static void named_steps(struct prof_buf *o, const struct ranks_state *s, int json)
{
    int64_t ends[2] = {s->r1.step_min, s->r1.step_max};
    int said = 0;

    for (int e = 0; e < 2; e++) {
        int64_t st = (int64_t)dec_val(ends[e]);
        if (ends[e] < 0 || ends[e] == ABSENT_MIN || st == s->r1.ref_step ||
            (e == 1 && ends[1] == ends[0]))
            continue;
        if (json)
            prof_buf_printf(o, "%s{\"rank\":%d,\"state\":\"other_steps\",\"step\":%lld}",
                            said ? "," : "", dec_rank(ends[e]), (long long)st);
        else
            prof_buf_printf(o, "%srank %d at step %lld", said ? ", " : "", dec_rank(ends[e]),
                            (long long)st);
        said = 1;
    }
}

static void notes_text(struct prof_buf *o, const struct table *tb)
{
    const struct ranks_state *s = tb->s;

    if (s->r1.no_window > 0) {
        prof_buf_printf(o, "%lld of %lld ranks: no window closed yet (rank %lld",
                        (long long)s->r1.no_window, (long long)s->r1.nranks,
                        (long long)s->r1.nowin_min);
        if (s->r1.nowin_max != s->r1.nowin_min)
            prof_buf_printf(o, "%s rank %lld", s->r1.no_window > 2 ? " ... " : " and",
                            (long long)s->r1.nowin_max);
        prof_buf_puts(o, ")\n");
    }
    if (s->differ > 0) {
        prof_buf_printf(o, "steps differ: %lld of %lld ranks ended this window at another step "
                           "than rank %lld (step %lld): ",
                        (long long)s->differ, (long long)s->r1.nranks, (long long)s->r1.ref_rank,
                        (long long)s->r1.ref_step);
        named_steps(o, s, 0);
        prof_buf_puts(o, "; rows marked ! hold their numbers\n");
    }
    if (s->r1.lost > 0 || s->r1.folded > 0)
        prof_buf_printf(o, "left out of the cross-rank view: %lld stages beyond the %d across "
                           "ranks (or a key collision), %lld beyond the %d heaviest of a rank "
                           "(summed over ranks)\n",
                        (long long)s->r1.lost, PROF_RANKS_MAX_STAGES, (long long)s->r1.folded,
                        RANKS_LOCAL_CAP);
}

static void format_text(struct prof_buf *o, const struct table *tb)
{
    static const char *cols[] = {"avg med", "avg min", "avg max", "p95 med", "p95 min",
                                 "p95 max"};
    const struct ranks_state *s = tb->s;
    char name[sizeof s->st[0].name * 4 + 8], wall[24];
    size_t width = 24;

    if (s->bad) {
        prof_buf_puts(o, "prof ranks: the ranks' numbers could not be combined (another prof "
                         "version or byte order on some rank)\n");
        return;
    }
    if (s->r1.ref_rank < 0) {
        prof_buf_printf(o, "prof ranks: %lld ranks, no window closed on any rank yet\n",
                        (long long)s->r1.nranks);
        return;
    }
    prof_fmt_dur(wall, sizeof wall, (double)s->r1.ref_wall);
    prof_buf_printf(o, "prof ranks: step %lld, last %lld steps, %lld ranks (window %s on rank "
                       "%lld)\n",
                    (long long)s->r1.ref_step, (long long)s->r1.ref_steps,
                    (long long)s->r1.nranks, wall, (long long)s->r1.ref_rank);
    for (int k = 0; k < tb->nrows; k++) {
        size_t w = prof_fmt_name(name, sizeof name, tb->rows[k].t->name, 1000);
        if (w > width)
            width = w;
    }
    prof_buf_printf(o, "%-*s %6s", (int)width, "stage", "ranks");
    for (int c = 0; c < 6; c++)
        prof_buf_printf(o, " %10s", cols[c]);
    prof_buf_printf(o, " %10s %7s\n", "slowest", "spread");
    for (int k = 0; k < tb->nrows; k++) {
        const struct row *w = &tb->rows[k];
        const struct ranks_stage *t = w->t;
        double v[6] = {w->avg_med, dec_val(t->min[0]), dec_val(t->max[0]),
                       w->p95_med, dec_val(t->min[1]), dec_val(t->max[1])};
        size_t cols_used = prof_fmt_name(name, sizeof name, t->name, 1000);
        char d[24], slow[24];

        prof_buf_printf(o, "%s%*s %5lld%s", name, (int)(width - cols_used), "",
                        (long long)t->ranks, t->off > 0 ? "!" : " ");
        for (int c = 0; c < 6; c++) {
            prof_fmt_dur(d, sizeof d, v[c]);
            prof_buf_printf(o, " %10s", d);
        }
        snprintf(slow, sizeof slow, "rank %d", dec_rank(t->max[0]));
        prof_buf_printf(o, " %10s %6.2fx\n", slow, w->spread);
    }
    if (tb->s_rank >= 0) {
        char ex[24], self[24], oth[24];
        prof_fmt_dur(ex, sizeof ex, tb->s_excess);
        prof_fmt_dur(self, sizeof self, tb->s_self);
        prof_fmt_dur(oth, sizeof oth, tb->s_other);
        /* The time no stage covers (uncovered.h) is where the rank is,
         * not a stage it is in. */
        if (strcmp(tb->rows[tb->s_row].t->name, "(no stage)") == 0)
            snprintf(name, sizeof name, "outside stages");
        else {
            memcpy(name, "in ", 3);
            prof_fmt_name(name + 3, sizeof name - 3, tb->rows[tb->s_row].t->name, 1000);
        }
        if (s->r1.ok == 2)
            prof_buf_printf(o, "straggler: rank %d %s, +%s per step (self %s per step, the "
                               "other rank %s; two ranks: against the other rank, not a "
                               "median)\n", tb->s_rank, name, ex, self, oth);
        else
            prof_buf_printf(o, "straggler: rank %d %s, +%s per step (self %s per step, "
                               "median rank %s)\n", tb->s_rank, name, ex, self, oth);
    } else {
        prof_buf_puts(o, "straggler: none (no rank spent more than the median rank in any "
                         "stage)\n");
    }
    notes_text(o, tb);
}

static void json_stat(struct prof_buf *o, const char *key, double med, int64_t min, int64_t max)
{
    prof_buf_printf(o, ",\"%s\":{\"median\":", key);
    prof_buf_double(o, med);
    prof_buf_puts(o, ",\"min\":");
    prof_buf_double(o, dec_val(min));
    prof_buf_printf(o, ",\"min_rank\":%d,\"max\":", dec_rank(min));
    prof_buf_double(o, dec_val(max));
    prof_buf_printf(o, ",\"max_rank\":%d}", dec_rank(max));
}

static void format_json(struct prof_buf *o, const struct table *tb)
{
    const struct ranks_state *s = tb->s;
    int first = 1;

    prof_buf_printf(o, "{\"prof\":\"ranks\",\"format\":2,\"version\":\"" PROF_VERSION_STRING
                       "\",\"step\":%lld,\"steps\":%lld,\"nranks\":%lld,\"ranks_ok\":%lld,"
                       "\"readable\":%s,\"ranks\":[",
                    (long long)s->r1.ref_step, (long long)s->r1.ref_steps,
                    (long long)s->r1.nranks, (long long)s->r1.ok, s->bad ? "false" : "true");
    if (!s->bad && s->r1.no_window > 0) {
        prof_buf_printf(o, "{\"rank\":%lld,\"state\":\"no_window\"}", (long long)s->r1.nowin_min);
        if (s->r1.nowin_max != s->r1.nowin_min)
            prof_buf_printf(o, ",{\"rank\":%lld,\"state\":\"no_window\"}",
                            (long long)s->r1.nowin_max);
        first = 0;
    }
    if (!s->bad && s->differ > 0) {
        if (!first)
            prof_buf_puts(o, ",");
        named_steps(o, s, 1);
    }
    prof_buf_printf(o, "],\"ranks_no_window\":%lld,\"ranks_other_steps\":%lld,"
                       "\"stages_left_out\":%lld,\"stages_folded\":%lld,\"stages\":[",
                    (long long)s->r1.no_window, (long long)s->differ, (long long)s->r1.lost,
                    (long long)s->r1.folded);
    for (int k = 0; k < tb->nrows; k++) {
        const struct row *w = &tb->rows[k];
        const struct ranks_stage *t = w->t;
        prof_buf_puts(o, k ? ",{\"name\":" : "{\"name\":");
        prof_buf_json_string(o, t->name);
        prof_buf_printf(o, ",\"ranks\":%lld,\"ranks_other_steps\":%lld,\"count\":%lld,"
                           "\"total_ns\":%lld,\"self_ns\":%lld,\"max_ns\":%lld",
                        (long long)t->ranks, (long long)t->off, (long long)t->count,
                        (long long)t->total_ns, (long long)t->self_ns, (long long)t->max_ns);
        json_stat(o, "avg_ns", w->avg_med, t->min[0], t->max[0]);
        json_stat(o, "p95_ns", w->p95_med, t->min[1], t->max[1]);
        json_stat(o, "self_ns_per_step", w->sps_med, t->min[2], t->max[2]);
        prof_buf_printf(o, ",\"slowest_rank\":%d,\"spread\":", dec_rank(t->max[0]));
        prof_buf_double(o, w->spread);
        prof_buf_puts(o, "}");
    }
    prof_buf_puts(o, "],\"straggler\":");
    if (tb->s_rank >= 0) {
        prof_buf_printf(o, "{\"rank\":%d,\"stage\":", tb->s_rank);
        prof_buf_json_string(o, tb->rows[tb->s_row].t->name);
        prof_buf_puts(o, ",\"excess_ns_per_step\":");
        prof_buf_double(o, tb->s_excess);
        prof_buf_puts(o, ",\"self_ns_per_step\":");
        prof_buf_double(o, tb->s_self);
        prof_buf_puts(o, ",\"median_self_ns_per_step\":");
        prof_buf_double(o, tb->s_other);
        prof_buf_printf(o, ",\"against\":\"%s\"}", s->r1.ok == 2 ? "other_rank" : "median");
    } else {
        prof_buf_puts(o, "null");
    }
    prof_buf_puts(o, "}\n");
}

int prof_ranks_format_state(struct prof_buf *out, const struct ranks_state *s, int format)
{
    struct table *tb;

    if (s->magic != PROF_RANKS_MAGIC || s->done != PROF_RANKS_ROUNDS)
        return -EINVAL;
    if ((tb = malloc(sizeof *tb)) == NULL)
        return -ENOMEM;
    table_build(tb, s);
    if (format == PROF_FORMAT_JSON)
        format_json(out, tb);
    else
        format_text(out, tb);
    free(tb);
    return out->failed ? -ENOMEM : 0;
}
