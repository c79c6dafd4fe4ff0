/* kstats.c - what each GPU stage ran (PROF_CUDA=kernels).
 *
 * A sink (sink.h) fed one kernel at a time by kernels.c through the
 * drain, already given to its stage. Per stage and per view (window,
 * run): the kernels' count, their busy time, and their time per name.
 *
 * Busy time is the union of the kernels' intervals (kernels of one stage
 * on two streams that overlap count once): KS_SPANS sorted disjoint spans
 * are kept, and when full the oldest is folded into a closed sum; a kernel
 * that arrives older than that (kernels arrive nearly in time order) is
 * added whole. Names: KS_NAMES per stage, the rest "(other kernels)".
 * kernels.c interns the names, so a pointer compare finds one. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "kstats.h"
#include "map.h"
#include "process.h"
#include "stats.h"

#define KS_SPANS 32
#define KS_NAMES 16
#define KS_TOP PROF_KSTATS_TOP
#define KS_PUB PROF_KSTATS_PUB      /* stages in the metrics, the busiest */

struct kname {
    const char *name;
    uint64_t ns;
};

struct kacc {
    uint64_t count, closed_ns, total_ns, other_ns;
    uint64_t sa[KS_SPANS], sb[KS_SPANS];
    unsigned nspans;
    struct kname names[KS_NAMES];
};

struct kstage {
    struct kacc win, run;
};

static struct prof_map stages;      /* stage -> struct kstage */

/* The metrics' copy, for the metrics thread (prof_kstats_metrics). */
static pthread_mutex_t pub_lock = PTHREAD_MUTEX_INITIALIZER;
static struct prof_kstats_pub pub[KS_PUB];
static int npub;
static int owner_pid;               /* the process the copy is of */

static void span_add(struct kacc *k, uint64_t a, uint64_t b)
{
    unsigned i, j;

    if (k->nspans > 0 && b < k->sa[0] && k->nspans == KS_SPANS) {
        k->closed_ns += b - a;  /* older than what is kept */
        return;
    }
    /* Merge every kept span that touches [a, b], then insert in order. */
    for (i = j = 0; i < k->nspans; i++) {
        if (k->sb[i] < a || k->sa[i] > b) {
            k->sa[j] = k->sa[i];
            k->sb[j] = k->sb[i];
            j++;
        } else {
            a = k->sa[i] < a ? k->sa[i] : a;
            b = k->sb[i] > b ? k->sb[i] : b;
        }
    }
    k->nspans = j;
    if (k->nspans == KS_SPANS) {
        k->closed_ns += k->sb[0] - k->sa[0];
        memmove(k->sa, k->sa + 1, (KS_SPANS - 1) * sizeof k->sa[0]);
        memmove(k->sb, k->sb + 1, (KS_SPANS - 1) * sizeof k->sb[0]);
        k->nspans--;
    }
    for (i = k->nspans; i > 0 && k->sa[i - 1] > a; i--) {
        k->sa[i] = k->sa[i - 1];
        k->sb[i] = k->sb[i - 1];
    }
    k->sa[i] = a;
    k->sb[i] = b;
    k->nspans++;
}

static uint64_t busy_of(const struct kacc *k)
{
    uint64_t ns = k->closed_ns;
    unsigned i;

    for (i = 0; i < k->nspans; i++)
        ns += k->sb[i] - k->sa[i];
    return ns;
}

static void acc_add(struct kacc *k, const char *name, uint64_t a, uint64_t b)
{
    unsigned i;

    k->count++;
    k->total_ns += b - a;
    span_add(k, a, b);
    for (i = 0; i < KS_NAMES && k->names[i].name != NULL && k->names[i].name != name; i++)
        ;
    if (i == KS_NAMES) {
        k->other_ns += b - a;
        return;
    }
    k->names[i].name = name;
    k->names[i].ns += b - a;
}

static void sink_gpu_kernel(struct prof_stage *gpu, int device, uint64_t stream,
                            const char *kname, uint64_t start_ns, uint64_t end_ns)
{
    struct kstage *k = prof_map_get(&stages, (uintptr_t)gpu);

    (void)device, (void)stream;
    if (k == NULL) {
        if ((k = calloc(1, sizeof *k)) == NULL)
            return;
        if (prof_map_put(&stages, (uintptr_t)gpu, k) != 0) {
            free(k);
            return;
        }
    }
    if (end_ns < start_ns)
        end_ns = start_ns;
    acc_add(&k->win, kname, start_ns, end_ns);
    acc_add(&k->run, kname, start_ns, end_ns);
}

static void sink_stage_gone(struct prof_stage *s)
{
    struct kstage *k = prof_map_get(&stages, (uintptr_t)s);

    if (k != NULL) {
        prof_map_put(&stages, (uintptr_t)s, NULL);
        free(k);
    }
}

void prof_kstats_window_close(void)
{
    size_t i;

    for (i = 0; i < stages.cap; i++) {
        struct kstage *k = stages.slots[i].value;

        if (stages.slots[i].key != 0 && k != NULL)
            memset(&k->win, 0, sizeof k->win);
    }
}

/* The top KS_TOP names of k by time, into top; how many. */
static unsigned top_of(const struct kacc *k, struct kname *top)
{
    unsigned char used[KS_NAMES] = {0};
    unsigned i, n;

    for (n = 0; n < KS_TOP; n++) {
        int best = -1;

        for (i = 0; i < KS_NAMES && k->names[i].name != NULL; i++)
            if (!used[i] && (best < 0 || k->names[i].ns > k->names[best].ns))
                best = (int)i;
        if (best < 0)
            break;
        used[best] = 1;
        top[n] = k->names[best];
    }
    return n;
}

static const struct kacc *view_of(const struct prof_stage *s, int window)
{
    const struct kstage *k = prof_map_get(&stages, (uintptr_t)s);
    const struct kacc *a = k == NULL ? NULL : window ? &k->win : &k->run;

    return a != NULL && a->count > 0 ? a : NULL;
}

int prof_kstats_figures(const struct prof_stage *s, int window, struct prof_kstats_figures *out)
{
    const struct kacc *a = view_of(s, window);
    struct kname top[KS_TOP];
    unsigned i;

    memset(out, 0, sizeof *out);
    if (a == NULL)
        return 0;
    out->busy_ns = busy_of(a);
    out->count = a->count;
    out->total_ns = a->total_ns;
    out->ntop = top_of(a, top);
    for (i = 0; i < out->ntop; i++) {
        out->top[i].name = top[i].name;
        out->top[i].ns = top[i].ns;
    }
    return 1;
}

int prof_kstats_live_locked(const struct prof_stage *s, struct prof_kstats_live *out)
{
    const struct kacc *w = view_of(s, 1), *r = view_of(s, 0), *t = w != NULL ? w : r;
    struct kname top[KS_TOP];

    memset(out, 0, sizeof *out);
    if (r == NULL)
        return 0;
    if (w != NULL) {
        out->win_busy_ns = busy_of(w);
        out->win_count = w->count;
    }
    out->run_busy_ns = busy_of(r);
    out->run_count = r->count;
    if (top_of(t, top) > 0) {
        out->top = top[0].name;
        out->top_share = t->total_ns ? (double)top[0].ns / (double)t->total_ns : 0.0;
    }
    return 1;
}

/* Once per collector wake: the run's figures of the busiest stages. */
static void sink_tick(uint64_t now_ns)
{
    struct {
        const struct prof_stage *s;
        uint64_t busy, count;
    } top[KS_PUB];
    int n = 0, i, j;
    size_t k;

    (void)now_ns;
    if (prof_process_get()->pid != owner_pid) {
        /* A forked child, as gpu_busy.c finds it: the lock may have been
         * held by a thread of the parent's. The first tick of a process
         * only notes its pid. */
        if (owner_pid != 0) {
            pthread_mutex_init(&pub_lock, NULL);
            npub = 0;
        }
        owner_pid = prof_process_get()->pid;
    }
    if (stages.len == 0)
        return;
    for (k = 0; k < stages.cap; k++) {
        const struct kstage *ks = stages.slots[k].value;
        uint64_t busy;

        if (stages.slots[k].key == 0 || ks == NULL || ks->run.count == 0)
            continue;
        busy = busy_of(&ks->run);
        if (n == KS_PUB && busy <= top[n - 1].busy)
            continue;
        for (i = n < KS_PUB ? n++ : KS_PUB - 1; i > 0 && top[i - 1].busy < busy; i--)
            top[i] = top[i - 1];
        top[i].s = (const struct prof_stage *)(uintptr_t)stages.slots[k].key;
        top[i].busy = busy;
        top[i].count = ks->run.count;
    }
    pthread_mutex_lock(&pub_lock);
    for (j = 0; j < n; j++) {
        /* The name itself, not a copy: interned, it outlives the stage,
         * and a copy cut to a room could end inside a UTF-8 sequence. */
        pub[j].stage = top[j].s->name;
        pub[j].busy_ns = top[j].busy;
        pub[j].count = top[j].count;
    }
    npub = n;
    pthread_mutex_unlock(&pub_lock);
}

int prof_kstats_published(struct prof_kstats_pub *out, int cap)
{
    int i;

    pthread_mutex_lock(&pub_lock);
    for (i = 0; i < npub && i < cap; i++)
        out[i] = pub[i];
    pthread_mutex_unlock(&pub_lock);
    return i;
}

const struct prof_sink prof_kstats_sink = {
    .name = "kernels",
    .tick = sink_tick,
    .gpu_kernel = sink_gpu_kernel,
    .stage_gone = sink_stage_gone,
};
