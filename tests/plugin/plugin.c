/* plugin.c - a plugin that links libprof (shared, or libprof_static with
 * its symbols hidden) and is loaded by a host that may not (host.c).
 *
 * Its zone names are literals in this object: once it is unloaded they
 * are unmapped, so whatever the collector still holds of them must have
 * been taken (prof_flush) before the host's dlclose. */
#include <prof.h>

#define PLUGIN_API __attribute__((visibility("default")))

PLUGIN_API void plugin_work(int n);
PLUGIN_API int plugin_stop(void);

PLUGIN_API void plugin_work(int n)
{
    for (int i = 0; i < n; i++) {
        PROF_ZONE("plugin outer");
        {
            PROF_ZONE("plugin inner");
        }
    }
}

/* What a plugin must do before it is unloaded (docs/RELIABILITY.md): every
 * record that points at its names is taken by the collector on return. */
PLUGIN_API int plugin_stop(void)
{
    return prof_flush();
}
