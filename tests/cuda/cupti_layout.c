/* cupti_layout.c - prof declares the CUPTI records it reads by hand
 * (src/capture/cupti.h), and the fake CUPTI writes them with the same
 * declarations, so a wrong offset there would pass every fake test and
 * read garbage on a GPU. Where the toolkit's own header is at hand
 * (built only then), this checks each field prof reads against it, and
 * the kinds' numbers. CUDA 13's CONCURRENT_KERNEL records are
 * CUpti_ActivityKernel10; 12's are Kernel9: both are checked. */
#include <stddef.h>
#include <stdio.h>

#include <cupti_activity.h>
#include <cupti_version.h>

/* prof's, by path: the toolkit has a cupti.h of its own. */
#include "../../src/capture/cupti.h"

#define SAME(ours, field, theirs, tfield) \
    _Static_assert(offsetof(struct ours, field) == offsetof(theirs, tfield), \
                   #ours "." #field " is not at " #theirs "." #tfield "'s offset")

#define KERNEL(T) \
    SAME(cupti_rec_kernel, kind, T, kind); \
    SAME(cupti_rec_kernel, start, T, start); \
    SAME(cupti_rec_kernel, end, T, end); \
    SAME(cupti_rec_kernel, device, T, deviceId); \
    SAME(cupti_rec_kernel, context, T, contextId); \
    SAME(cupti_rec_kernel, stream, T, streamId); \
    SAME(cupti_rec_kernel, correlation, T, correlationId); \
    SAME(cupti_rec_kernel, grid_id, T, gridId); \
    SAME(cupti_rec_kernel, name, T, name)

KERNEL(CUpti_ActivityKernel10);
KERNEL(CUpti_ActivityKernel9);

SAME(cupti_rec_memcpy, kind, CUpti_ActivityMemcpy6, kind);
SAME(cupti_rec_memcpy, bytes, CUpti_ActivityMemcpy6, bytes);
SAME(cupti_rec_memcpy, start, CUpti_ActivityMemcpy6, start);
SAME(cupti_rec_memcpy, end, CUpti_ActivityMemcpy6, end);
SAME(cupti_rec_memcpy, device, CUpti_ActivityMemcpy6, deviceId);
SAME(cupti_rec_memcpy, stream, CUpti_ActivityMemcpy6, streamId);
SAME(cupti_rec_memcpy, correlation, CUpti_ActivityMemcpy6, correlationId);

SAME(cupti_rec_memset, kind, CUpti_ActivityMemset4, kind);
SAME(cupti_rec_memset, bytes, CUpti_ActivityMemset4, bytes);
SAME(cupti_rec_memset, start, CUpti_ActivityMemset4, start);
SAME(cupti_rec_memset, end, CUpti_ActivityMemset4, end);
SAME(cupti_rec_memset, device, CUpti_ActivityMemset4, deviceId);
SAME(cupti_rec_memset, stream, CUpti_ActivityMemset4, streamId);
SAME(cupti_rec_memset, correlation, CUpti_ActivityMemset4, correlationId);

SAME(cupti_rec_api, kind, CUpti_ActivityAPI, kind);
SAME(cupti_rec_api, cbid, CUpti_ActivityAPI, cbid);
SAME(cupti_rec_api, start, CUpti_ActivityAPI, start);
SAME(cupti_rec_api, end, CUpti_ActivityAPI, end);
SAME(cupti_rec_api, thread, CUpti_ActivityAPI, threadId);
SAME(cupti_rec_api, correlation, CUpti_ActivityAPI, correlationId);

_Static_assert((int)CUPTI_KIND_MEMCPY == (int)CUPTI_ACTIVITY_KIND_MEMCPY, "memcpy kind");
_Static_assert((int)CUPTI_KIND_MEMSET == (int)CUPTI_ACTIVITY_KIND_MEMSET, "memset kind");
_Static_assert((int)CUPTI_KIND_DRIVER == (int)CUPTI_ACTIVITY_KIND_DRIVER, "driver kind");
_Static_assert((int)CUPTI_KIND_RUNTIME == (int)CUPTI_ACTIVITY_KIND_RUNTIME, "runtime kind");
_Static_assert((int)CUPTI_KIND_CONCURRENT_KERNEL == (int)CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
               "concurrent kernel kind");

int main(void)
{
    /* Everything is checked when this compiles; running says so. */
    printf("CUPTI %d: the records' fields prof reads are where the header puts them\n",
           CUPTI_API_VERSION);
    return 0;
}
