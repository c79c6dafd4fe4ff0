/* ranks.c - the cross-rank table as a reduction: snapshot one rank's
 * window, contribute to each round, combine contributions, decode the
 * combined numbers into the state (ranks_table.c makes the table of it).
 * The only code that knows the layout: prof.distributed, prof_mpi.h and
 * bench/ranks_scale all go through it.
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
 * the stage, not to a fixed range. Turning the combined numbers into the
 * table (medians, the straggler) and writing it is ranks_table.c's. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ranks.h"

_Static_assert(sizeof(struct ranks_state) <= PROF_RANKS_STATE_SIZE, "PROF_RANKS_STATE_SIZE");

int prof_ranks_muted;

#define HASH_MASK ((UINT64_C(1) << 47) - 1)
#define VAL_MAX ((INT64_C(1) << 43) - 1)
#define RANK_MASK ((INT64_C(1) << RANKS_RANK_BITS) - 1)
#define HIST_WORDS ((RANKS_HIST_BUCKETS + 2) / 3)

/* Words per part (MIN, MAX, SUM) of each round. */
enum {
    R0_MIN = 2, R0_MAX = 1 + RANKS_KEY_SLOTS, R0_SUM = 1,
    R1_GMIN = 3, R1_GMAX = 6, R1_GSUM = 5,
    R1_SMIN = 3, R1_SMAX = 4 + RANKS_NAME_WORDS, R1_SSUM = 6,
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
        /* The on-CPU share across ranks is over the self time of the
         * rows that have it (a rank with PROF_CPU=0 has none). */
        l->cpu_ns = (r->flags & PROF_STAGE_CPU) ? r->cpu_ns : 0;
        l->cpu_self_ns = (r->flags & PROF_STAGE_CPU) ? r->self_ns : 0;
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
            m->cpu_ns += all[i].cpu_ns;
            m->cpu_self_ns += all[i].cpu_self_ns;
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
    st64(buf, 1, s->have_window ? s->rank : RANKS_ABSENT_MIN);
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
    st64(buf, mn + 1, hw ? enc((double)s->end_step, s->rank) : RANKS_ABSENT_MIN);
    st64(buf, mn + 2, hw ? RANKS_ABSENT_MIN : s->rank);
    st64(buf, mx + 0, magic_word(1));
    st64(buf, mx + 1, hw ? enc((double)s->end_step, s->rank) : RANKS_ABSENT_MAX);
    st64(buf, mx + 2, hw ? RANKS_ABSENT_MAX : s->rank);
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
                st64(buf, a + (size_t)q, RANKS_ABSENT_MIN);
            for (int q = 0; q < 4; q++)
                st64(buf, b + (size_t)q, RANKS_ABSENT_MAX);
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
        st64(buf, c + 4, (int64_t)l->cpu_ns);
        st64(buf, c + 5, (int64_t)l->cpu_self_ns);
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
                int bk = hist_bucket(v[q], ranks_dec_val(t->min[q]), ranks_dec_val(t->max[q]));
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
    s->r1.ref_rank = ref == RANKS_ABSENT_MIN ? -1 : ref;
    s->r1.nranks = ld(buf, R0_MIN + R0_MAX);
    return 0;
}

static void result1(struct ranks_state *s, const void *buf)
{
    size_t mn = 0, mx = R1_MIN, sm = R1_MIN + R1_MAX;
    int64_t nw;

    s->r1.step_min = ld(buf, mn + 1);
    nw = ld(buf, mn + 2);
    s->r1.nowin_min = nw == RANKS_ABSENT_MIN ? -1 : nw;
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
        t->cpu_ns = ld(buf, c + 4);
        t->cpu_self_ns = ld(buf, c + 5);
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

