/* nvtx.c - PROF_NVTX=1: every zone also becomes an NVTX range, so that
 * prof's stage names show up in Nsight Systems timelines.
 *
 * NVTX v3 is a header-only library: each module that uses it carries its
 * own copy of a small loader, which on the first NVTX call looks for a tool
 * ("injection library") and lets the tool fill in the module's function
 * pointers. The tool is found through the environment: Nsight Systems sets
 * NVTX_INJECTION64_PATH to its injection library when it runs a program.
 * The handshake, from nvtx3/nvtxDetail/nvtxInit.h and nvtxImpl.h:
 *
 *   1. dlopen(getenv("NVTX_INJECTION64_PATH")) and find its exported
 *      int InitializeInjectionNvtx2(const void *(*getExportTable)(uint32_t)).
 *   2. Call it with our getExportTable. The tool asks for export table
 *      NVTX_ETID_CALLBACKS (1), whose GetModuleFunctionTable(module, &table,
 *      &size) hands it, per module (core, CUDA, OpenCL, CUDA runtime, core2,
 *      sync), an array of pointers to our function-pointer slots; it writes
 *      its implementations into the slots it supports. It may also ask for
 *      NVTX_ETID_VERSIONINFO (3).
 *   3. A nonzero return means the tool attached. Slots it left NULL are
 *      no-ops.
 *
 * We implement that handshake here, for the core module's RangePushA and
 * RangePop, instead of compiling the NVTX headers in: no build-time
 * dependency, and nothing is loaded unless PROF_NVTX=1. Without a tool
 * (the variable unset, the library missing or refusing) NVTX calls would
 * be no-ops anyway; we say so once and stay a no-op. The tool's statically
 * linked form (InitializeInjectionNvtx2_fnptr) is not supported: Nsight
 * Systems uses the environment.
 *
 * The hot path reads one function pointer, published with release once the
 * tool attached; prof only calls prof_nvtx_push/pop on the hooked path
 * (PROF_ON_HOOKS_), so with PROF_NVTX unset they cost nothing at all. */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "log.h"
#include "nvtx.h"

/* ABI types, as in nvtx3/nvtxDetail/nvtxTypes.h. */
typedef void (*nvtx_fn)(void);
typedef nvtx_fn **nvtx_table;

enum {
    NVTX_CB_MODULE_CORE = 1,
    NVTX_CB_MODULE_CUDA = 2,
    NVTX_CB_MODULE_OPENCL = 3,
    NVTX_CB_MODULE_CUDART = 4,
    NVTX_CB_MODULE_CORE2 = 5,
    NVTX_CB_MODULE_SYNC = 6,
};

enum { NVTX_ETID_CALLBACKS = 1, NVTX_ETID_VERSIONINFO = 3 };
enum { NVTX_CBID_CORE_RangePushA = 9, NVTX_CBID_CORE_RangePop = 11 };
#define NVTX_ABI_VERSION 3u

/* Number of callback ids per module, including the invalid id 0
 * (NVTX_CBID_*_SIZE). */
#define NVTX_CORE_SIZE 16
#define NVTX_CUDA_SIZE 9
#define NVTX_OPENCL_SIZE 15
#define NVTX_CUDART_SIZE 7
#define NVTX_CORE2_SIZE 16
#define NVTX_SYNC_SIZE 7

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

typedef int (*nvtx_init_fn)(const void *(*get_export_table)(uint32_t id));
typedef int (*nvtx_push_fn)(const char *message);
typedef int (*nvtx_pop_fn)(void);

/* The slots the tool fills, and per module the table of pointers to them:
 * entry 0 (the invalid id) and one past the end are NULL, so that a tool
 * reading off the end crashes instead of corrupting memory. */
static nvtx_fn core[NVTX_CORE_SIZE], cuda[NVTX_CUDA_SIZE], opencl[NVTX_OPENCL_SIZE],
    cudart[NVTX_CUDART_SIZE], core2[NVTX_CORE2_SIZE], sync_[NVTX_SYNC_SIZE];
static nvtx_fn *core_t[NVTX_CORE_SIZE + 1], *cuda_t[NVTX_CUDA_SIZE + 1],
    *opencl_t[NVTX_OPENCL_SIZE + 1], *cudart_t[NVTX_CUDART_SIZE + 1],
    *core2_t[NVTX_CORE2_SIZE + 1], *sync_t[NVTX_SYNC_SIZE + 1];

static nvtx_push_fn push_fn;   /* atomic: NULL until a tool attached */
static nvtx_pop_fn pop_fn;
static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;
static int init_done, init_result;
static int note_nvtx;

static void fill(nvtx_fn **table, nvtx_fn *slots, unsigned n)
{
    unsigned i;

    table[0] = NULL;
    for (i = 1; i < n; i++)
        table[i] = &slots[i];
    table[n] = NULL;
}

static int get_module_function_table(int module, nvtx_table *out_table, unsigned *out_size)
{
    nvtx_table t;
    unsigned n;

    switch (module) {
    case NVTX_CB_MODULE_CORE: t = core_t; n = NVTX_CORE_SIZE; break;
    case NVTX_CB_MODULE_CUDA: t = cuda_t; n = NVTX_CUDA_SIZE; break;
    case NVTX_CB_MODULE_OPENCL: t = opencl_t; n = NVTX_OPENCL_SIZE; break;
    case NVTX_CB_MODULE_CUDART: t = cudart_t; n = NVTX_CUDART_SIZE; break;
    case NVTX_CB_MODULE_CORE2: t = core2_t; n = NVTX_CORE2_SIZE; break;
    case NVTX_CB_MODULE_SYNC: t = sync_t; n = NVTX_SYNC_SIZE; break;
    default: return 0;
    }
    /* The size counts the entries before the trailing NULL, as NVTX does. */
    if (out_size != NULL)
        *out_size = n;
    if (out_table != NULL)
        *out_table = t;
    return 1;
}

static void set_injection_version(uint32_t version)
{
    (void)version;
}

static const struct nvtx_export_callbacks export_callbacks = {
    sizeof(struct nvtx_export_callbacks), get_module_function_table
};
static const struct nvtx_export_version export_version = {
    sizeof(struct nvtx_export_version), NVTX_ABI_VERSION, 0, set_injection_version
};

static const void *get_export_table(uint32_t id)
{
    switch (id) {
    case NVTX_ETID_CALLBACKS: return &export_callbacks;
    case NVTX_ETID_VERSIONINFO: return &export_version;
    default: return NULL;
    }
}

static int nvtx_attach(void)
{
    const char *var = sizeof(void *) == 4 ? "NVTX_INJECTION32_PATH" : "NVTX_INJECTION64_PATH";
    const char *path = getenv(var);
    char q[PROF_LOG_VALUE_SIZE], r[PROF_LOG_QUOTE_SIZE];
    nvtx_init_fn init;
    void *h;

    if (path == NULL || path[0] == '\0') {
        prof_log_once(&note_nvtx, "PROF_NVTX=1 but no NVTX tool is attached (%s is unset; run "
                      "under nsys profile); zones are not emitted as NVTX ranges", var);
        return -ENOENT;
    }
    if ((h = dlopen(path, RTLD_LAZY | RTLD_LOCAL)) == NULL) {
        const char *err = dlerror();

        prof_log_once(&note_nvtx, "PROF_NVTX=1 but the NVTX tool could not be loaded (%s: %s); "
                      "zones are not emitted as NVTX ranges", prof_log_value(q, sizeof q, var, path),
                      prof_log_dlerror(r, sizeof r, path, err));
        return -ENOENT;
    }
    *(void **)&init = dlsym(h, "InitializeInjectionNvtx2");
    if (init == NULL) {
        prof_log_once(&note_nvtx, "PROF_NVTX=1 but %s has no InitializeInjectionNvtx2; "
                      "zones are not emitted as NVTX ranges", prof_log_value(q, sizeof q, var, path));
        dlclose(h);
        return -ENOENT;
    }
    fill(core_t, core, NVTX_CORE_SIZE);
    fill(cuda_t, cuda, NVTX_CUDA_SIZE);
    fill(opencl_t, opencl, NVTX_OPENCL_SIZE);
    fill(cudart_t, cudart, NVTX_CUDART_SIZE);
    fill(core2_t, core2, NVTX_CORE2_SIZE);
    fill(sync_t, sync_, NVTX_SYNC_SIZE);
    if (init(get_export_table) == 0) {
        prof_log_once(&note_nvtx, "PROF_NVTX=1 but the NVTX tool %s refused to attach; "
                      "zones are not emitted as NVTX ranges", prof_log_value(q, sizeof q, var, path));
        /* Not unloaded: the tool may have kept pointers into itself. */
        return -EIO;
    }
    if (core[NVTX_CBID_CORE_RangePushA] == NULL || core[NVTX_CBID_CORE_RangePop] == NULL) {
        prof_log_once(&note_nvtx, "PROF_NVTX=1 but the NVTX tool %s does not record ranges",
                      prof_log_value(q, sizeof q, var, path));
        return -ENOTSUP;
    }
    /* Release: the tool's own initialization, done inside init(), is
     * visible to every thread that sees the pointers. */
    __atomic_store_n(&pop_fn, (nvtx_pop_fn)core[NVTX_CBID_CORE_RangePop], __ATOMIC_RELEASE);
    __atomic_store_n(&push_fn, (nvtx_push_fn)core[NVTX_CBID_CORE_RangePushA], __ATOMIC_RELEASE);
    return 0;
}

int prof_nvtx_init(void)
{
    int rc;

    pthread_mutex_lock(&init_lock);
    if (!init_done) {
        init_result = nvtx_attach();
        init_done = 1;
    }
    rc = init_result;
    pthread_mutex_unlock(&init_lock);
    return rc;
}

void prof_nvtx_push(const char *name)
{
    /* Acquire: pairs with the release in nvtx_attach. */
    nvtx_push_fn fn = __atomic_load_n(&push_fn, __ATOMIC_ACQUIRE);

    if (fn != NULL)
        fn(name);
}

void prof_nvtx_pop(void)
{
    nvtx_pop_fn fn = __atomic_load_n(&pop_fn, __ATOMIC_ACQUIRE);

    if (fn != NULL)
        fn();
}
