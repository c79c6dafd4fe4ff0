/* fakenvtx.c - a stand-in NVTX tool (what Nsight Systems names in
 * NVTX_INJECTION64_PATH). It attaches through the NVTX v3 handshake, takes
 * RangePushA and RangePop, and lets tests read what it saw through
 * fakenvtx_* functions. FAKENVTX_REFUSE=1 makes it decline to attach. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FAKE_API __attribute__((visibility("default")))

typedef void (*nvtx_fn)(void);
typedef nvtx_fn **nvtx_table;

struct nvtx_export_callbacks {
    size_t struct_size;
    int (*get_module_function_table)(int module, nvtx_table *out_table, unsigned *out_size);
};

struct nvtx_export_version {
    size_t struct_size;
    uint32_t version;
    uint32_t reserved0;
    void (*set_injection_version)(uint32_t version);
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t pushes, pops, unbalanced, attaches;
static uint32_t max_depth;
static char names[4096];
static __thread uint32_t depth;

static int range_push(const char *message)
{
    pthread_mutex_lock(&lock);
    pushes++;
    if (++depth > max_depth)
        max_depth = depth;
    if (strlen(names) + strlen(message) + 2 < sizeof names) {
        strcat(names, message);
        strcat(names, ";");
    }
    pthread_mutex_unlock(&lock);
    return (int)depth - 1;
}

static int range_pop(void)
{
    int d;

    pthread_mutex_lock(&lock);
    pops++;
    if (depth == 0)
        unbalanced++;
    else
        depth--;
    d = (int)depth;
    pthread_mutex_unlock(&lock);
    return d;
}

FAKE_API int InitializeInjectionNvtx2(const void *(*get_export_table)(uint32_t id))
{
    const struct nvtx_export_callbacks *cb;
    const struct nvtx_export_version *ver;
    nvtx_table core;
    unsigned n = 0;
    const char *refuse = getenv("FAKENVTX_REFUSE");

    if (refuse != NULL && strcmp(refuse, "1") == 0)
        return 0;
    cb = get_export_table(1);
    ver = get_export_table(3);
    if (cb == NULL || cb->struct_size < sizeof *cb || ver == NULL || ver->version < 2)
        return 0;
    if (!cb->get_module_function_table(1, &core, &n) || n < 12)
        return 0;
    /* A real tool fills every module; check the others exist too. */
    for (int m = 2; m <= 6; m++) {
        nvtx_table t;
        unsigned k;

        if (!cb->get_module_function_table(m, &t, &k) || t[0] != NULL || t[k] != NULL)
            return 0;
    }
    if (core[0] != NULL || core[n] != NULL)
        return 0;
    *core[9] = (nvtx_fn)range_push;
    *core[11] = (nvtx_fn)range_pop;
    ver->set_injection_version(3);
    pthread_mutex_lock(&lock);
    attaches++;
    pthread_mutex_unlock(&lock);
    return 1;
}

/* What the tool saw: returns the number of pushes; the others through the
 * pointers (any may be NULL). names gets "a;b;c;" in push order. */
FAKE_API uint64_t fakenvtx_counts(uint64_t *pops_out, uint64_t *unbalanced_out,
                                  uint32_t *max_depth_out, uint64_t *attaches_out,
                                  char *names_out, size_t size)
{
    uint64_t n;

    pthread_mutex_lock(&lock);
    n = pushes;
    if (pops_out != NULL)
        *pops_out = pops;
    if (unbalanced_out != NULL)
        *unbalanced_out = unbalanced;
    if (max_depth_out != NULL)
        *max_depth_out = max_depth;
    if (attaches_out != NULL)
        *attaches_out = attaches;
    if (names_out != NULL && size > 0)
        snprintf(names_out, size, "%s", names);
    pthread_mutex_unlock(&lock);
    return n;
}
