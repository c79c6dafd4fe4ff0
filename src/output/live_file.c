/* live_file.c - this process's live file: the snapshot copied into a
 * table in shared memory (live_file.h; the layout is live.h's).
 *
 * The file is a mapping the writer updates in place under a sequence
 * number (odd while writing), so a reader in another process never takes
 * a torn table for a whole one; it is created 0600 in a directory of this
 * user's alone (live_dir.c), removed at exit, and readers remove the files
 * of processes that died without removing theirs, once provably dead: the
 * header names the process by its pid namespace and start time too, so a
 * reader in another pid namespace (a container sharing /dev/shm) never
 * takes a live process for a dead one. Every page of the mapping is
 * reserved in the file (posix_fallocate) before it is mapped: a full tmpfs
 * costs the live view, said once, never the program (a store into a page
 * tmpfs cannot back is a SIGBUS). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "env.h"
#include "live.h"
#include "live_dir.h"
#include "live_file.h"
#include "log.h"
#include "process.h"

/* The layout python/prof/live.py reads (docs/LIVE.md). */
_Static_assert(sizeof(struct prof_live_file_header) == 336, "the live file's header moved");
_Static_assert(sizeof(struct prof_live_file_row) == 96, "the live file's row changed");
_Static_assert(sizeof(struct prof_live_file_gpu) == 56, "the live file's GPU entry changed");
_Static_assert(sizeof(struct prof_live_file_kernels) == 80, "the live file's kernel entry changed");

/* The file: owned by the process that created it (a forked child makes
 * its own). */
static int file_fd = -1;
static int file_pid;
static int file_failed;
static char file_path[512];
/* Who this process is beyond its pid (the header's minor 3 fields), read
 * when its file is made. */
static uint32_t file_pid_ns, file_time_ns;
static uint64_t file_start_ticks;
static unsigned char *map;
static size_t map_size;
static uint64_t publishes;

static void file_forget(void)
{
    if (map != NULL)
        munmap(map, map_size);
    if (file_fd >= 0)
        close(file_fd);
    map = NULL;
    map_size = 0;
    file_fd = -1;
}

/* Room for size bytes, reserved in the file before the mapping covers it:
 * a store into a tmpfs page that has no room behind it raises SIGBUS and
 * kills the program, so every page the writer may touch is allocated
 * first (posix_fallocate), and where that fails nothing is mapped. The
 * mapping is grown, never shrunk: a reader may be between reading the size
 * and the rows. 0 or a negative errno. */
static int file_room(size_t size)
{
    size_t want = map_size ? map_size : 65536;
    void *m;
    int err;

    if (size <= map_size)
        return 0;
    while (want < size)
        want *= 2;
    if ((err = posix_fallocate(file_fd, 0, (off_t)want)) != 0)
        return -err;
    m = map ? mremap(map, map_size, want, MREMAP_MAYMOVE)
            : mmap(NULL, want, PROT_READ | PROT_WRITE, MAP_SHARED, file_fd, 0);
    if (m == MAP_FAILED)
        return -errno;
    map = m;
    map_size = want;
    return 0;
}

/* Publishing ends for this process: the file goes, and the reason is said
 * once (what the first reservation or a growth could not get). */
static void file_give_up(const char *what, int err)
{
    prof_log("live stats: %s %s (%s); prof-top does not see this process from now on", what,
             file_path, strerror(err));
    unlink(file_path);
    file_forget();
    file_failed = 1;
}

/* The inode of a namespace link of this process (/proc/self/ns/...), 0
 * where /proc cannot say. */
static uint32_t ns_inode(const char *link)
{
    struct stat st;

    return stat(link, &st) == 0 ? (uint32_t)st.st_ino : 0;
}

/* This process's start time, field 22 of /proc/self/stat (clock ticks
 * since boot), 0 where /proc cannot say. The command name (field 2) may
 * hold spaces and parentheses: fields are counted from its last ')'. */
static uint64_t start_ticks(void)
{
    char buf[2048], *p = NULL;
    ssize_t n;
    int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);

    if (fd < 0)
        return 0;
    n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    for (ssize_t i = n - 1; i >= 0 && p == NULL; i--)
        if (buf[i] == ')')
            p = buf + i + 1;
    /* p is at " S ppid ...": field 3 then 19 more to field 22. */
    for (int field = 3; p != NULL && field <= 22; field++) {
        while (*p == ' ')
            p++;
        if (field == 22)
            return strtoull(p, NULL, 10);
        p = strchr(p, ' ');
    }
    return 0;
}

/* The file made in this user's directory (file_path set): a
 * descriptor, or -1 with errno set. First (again 0), a file already there
 * by this name is a dead process's whose pid came round again (the name
 * says the pid namespace): replaced. Made again (again 1) after the file
 * was removed under this process, only where nothing took the name since
 * (a file the user put there is theirs), and nothing said. -2 where
 * no directory could be had (said by prof_live_dir_open). */
static int file_create(int pid, int again)
{
    char name[64], dirname[400];
    int dir, fd = -1, err;

    file_path[0] = '\0';
    if (prof_live_name(pid, file_pid_ns, name, sizeof name) != 0) {
        errno = ENAMETOOLONG;
        return -1;
    }
    if ((dir = prof_live_dir_open(dirname, sizeof dirname, again)) < 0)
        return -2;
    snprintf(file_path, sizeof file_path, "%s/%s", dirname, name);
    for (int tries = 0; tries < 2; tries++) {
        fd = openat(dir, name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd >= 0 || errno != EEXIST || again || unlinkat(dir, name, 0) != 0)
            break;
    }
    err = errno;
    close(dir);
    errno = err;
    return fd;
}

static int file_open(void)
{
    int pid = prof_process_get()->pid, err;
    struct stat st;

    if (file_pid != pid) {
        /* Forked: the mapping and the file are the parent's. */
        file_forget();
        file_failed = 0;
        file_pid = pid;
    }
    if (file_fd >= 0 && fstat(file_fd, &st) == 0 && st.st_nlink == 0) {
        /* Someone removed the file while this process runs (a reader
         * that took it for a dead process's): a file nobody can find is
         * no live view, so it is made again. */
        static int logged;
        char old[sizeof file_path];
        int fd;

        memcpy(old, file_path, sizeof old);
        if ((fd = file_create(pid, 1)) < 0) {
            memcpy(file_path, old, sizeof old);
            return file_fd;    /* the old mapping, until the name is free */
        }
        prof_log_once(&logged, "live stats: %s was removed by another process; made again",
                      file_path);
        file_forget();
        file_fd = fd;
        if ((err = file_room(1)) != 0) {
            file_give_up("no room for", -err);
            return -1;
        }
        return file_fd;
    }
    if (file_fd >= 0 || file_failed)
        return file_fd;
    file_failed = 1;
    file_pid_ns = ns_inode("/proc/self/ns/pid");
    file_time_ns = ns_inode("/proc/self/ns/time");
    file_start_ticks = start_ticks();
    if ((file_fd = file_create(pid, 0)) < 0) {
        err = errno;
        if (file_fd == -1)     /* -2: the directory's refusal is said already */
            prof_log("live stats: cannot create %s (%s); prof-top will not see this process",
                     file_path[0] ? file_path : "the live file", strerror(err));
        file_fd = -1;
        return -1;
    }
    /* The first room, reserved before anything is mapped: a full tmpfs
     * (a container's 64 MB /dev/shm filled by DataLoader workers) is one
     * line here, never a SIGBUS. */
    if ((err = file_room(1)) != 0) {
        file_give_up("no room for", -err);
        return -1;
    }
    file_failed = 0;
    return file_fd;
}

static void file_write(const struct prof_live_snap *s)
{
    struct prof_live_file_header *h;
    struct prof_live_file_row *fr;
    struct prof_live_file_gpu *fg;
    struct prof_live_file_kernels *fk;
    struct prof_live_file_memory *fm;
    size_t names = 0, names_at, size, off, gpu_off, kern_off, mem_off, cpu_off;
    uint64_t *fc;
    uint64_t seq;
    int err;

    if (file_open() < 0)
        return;
    for (size_t i = 0; i < s->table.len; i++)
        names += strlen(s->table.rows[i].name);
    names_at = sizeof *h + s->table.len * sizeof *fr;
    /* The memory entry between the names and the GPU entries: a reader
     * before minor 4 takes it for bytes past the last name. */
    mem_off = (names_at + names + 7) & ~(size_t)7;
    /* The rows' on-CPU times after it, then their peak rises, before the
     * GPU entries: a reader before minor 5 (6) takes them for bytes past
     * the last name too. */
    cpu_off = mem_off + (s->mem_known ? sizeof *fm : 0);
    gpu_off = cpu_off + 2 * s->table.len * sizeof *fc;
    kern_off = gpu_off + (size_t)s->ngpus * sizeof *fg;
    size = kern_off + (size_t)s->nkst * sizeof *fk;
    /* Odd before the file may grow: a reader of the old size retries.
     * The header is in the first room, reserved when the file was made. */
    h = (struct prof_live_file_header *)map;
    __atomic_store_n(&h->seq, h->seq | 1, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_RELEASE);
    if ((err = file_room(size)) != 0) {
        /* The table outgrew the room: publishing stops here, the stores
         * above were all into reserved pages. */
        file_give_up("the table outgrew the room it could reserve for", -err);
        return;
    }
    h = (struct prof_live_file_header *)map;
    seq = __atomic_load_n(&h->seq, __ATOMIC_RELAXED) | 1;
    __atomic_store_n(&h->seq, seq, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_RELEASE);

    memcpy(h->magic, PROF_LIVE_MAGIC, sizeof h->magic);
    h->version = PROF_LIVE_VERSION;
    h->header_size = sizeof *h;
    h->row_size = sizeof *fr;
    h->nrows = (uint32_t)s->table.len;
    h->size = size;
    h->pid = s->pid;
    h->rank = s->rank;
    memcpy(h->program, s->program, sizeof h->program);
    memcpy(h->host, s->host, sizeof h->host);
    h->real_ns = s->real_ns;
    h->run_ns = s->run_ns;
    h->win_ns = s->win_ns;
    h->win_start_step = s->win_start_step;
    h->steps = s->steps;
    h->dropped = s->dropped;
    h->threads = s->threads;
    h->gpu_stages = s->table.gpu_stages;
    h->stages = s->table.stages;
    h->folded = s->table.folded;
    h->snap_ns = s->snap_ns;
    h->publish_ns = s->publish_ns;
    h->metrics_ns = s->metrics_ns;
    h->publishes = ++publishes;
    h->minor_version = PROF_LIVE_MINOR;
    h->gpu_size = sizeof *fg;
    h->ngpus = (uint32_t)s->ngpus;
    h->gpu_off = (uint32_t)gpu_off;
    h->kern_size = sizeof *fk;
    h->nkern = (uint32_t)s->nkst;
    h->kern_off = (uint32_t)kern_off;
    h->cpu_off = (uint32_t)cpu_off;
    h->pid_ns = file_pid_ns;
    h->time_ns = file_time_ns;
    h->start_ticks = file_start_ticks;
    h->mem_size = s->mem_known ? (uint32_t)sizeof *fm : 0;
    h->mem_off = s->mem_known ? (uint32_t)mem_off : 0;
    fr = (struct prof_live_file_row *)(map + sizeof *h);
    off = 0;
    for (size_t i = 0; i < s->table.len; i++, fr++) {
        const struct prof_stats_snap_row *r = &s->table.rows[i];
        size_t len = strlen(r->name);

        fr->name_off = (uint32_t)off;
        fr->name_len = (uint32_t)len;
        fr->parent = r->parent;
        fr->depth = r->depth;
        fr->flags = r->flags;
        fr->pad = 0;
        fr->count = r->count;
        fr->total_ns = r->total_ns;
        fr->self_ns = r->self_ns;
        fr->outer_ns = r->outer_ns;
        fr->win_count = r->win_count;
        fr->win_total_ns = r->win_total_ns;
        fr->p50_ns = r->p50_ns;
        fr->p95_ns = r->p95_ns;
        fr->p99_ns = r->p99_ns;
        memcpy(map + names_at + off, r->name, len);
        off += len;
    }
    /* The names' end up to mem_off: a reader copies these bytes too. */
    memset(map + names_at + names, 0, mem_off - (names_at + names));
    fg = (struct prof_live_file_gpu *)(map + gpu_off);
    for (int i = 0; i < s->ngpus; i++, fg++) {
        const struct prof_gpu_live *g = &s->gpus[i];

        fg->device = g->device;
        fg->flags = g->nvml;
        fg->busy_win = g->busy_win;
        fg->busy_run = g->busy_run;
        fg->nvml_win = g->nvml_win;
        fg->nvml_run = g->nvml_run;
        fg->mem_used = g->mem_used;
        fg->mem_peak_win = g->mem_peak_win;
    }
    fk = (struct prof_live_file_kernels *)(map + kern_off);
    for (int i = 0; i < s->nkst; i++, fk++) {
        const struct prof_live_kstage *k = &s->kst[i];

        memset(fk, 0, sizeof *fk);
        fk->row = k->row;
        fk->win_busy_ns = k->k.win_busy_ns;
        fk->win_count = k->k.win_count;
        fk->run_busy_ns = k->k.run_busy_ns;
        fk->run_count = k->k.run_count;
        fk->top_share = k->k.top_share;
        if (k->k.top != NULL)
            memcpy(fk->top, k->k.top, strnlen(k->k.top, sizeof fk->top - 1));
    }
    fc = (uint64_t *)(map + cpu_off);
    for (size_t i = 0; i < s->table.len; i++)
        fc[i] = s->table.rows[i].cpu_known ? s->table.rows[i].cpu_ns : PROF_LIVE_CPU_UNKNOWN;
    fc += s->table.len;
    for (size_t i = 0; i < s->table.len; i++)
        fc[i] = s->table.rows[i].peak_known ? s->table.rows[i].peak_rise_bytes
                                             : PROF_LIVE_PEAK_UNKNOWN;
    if (s->mem_known) {
        fm = (struct prof_live_file_memory *)(map + mem_off);
        fm->rss = s->rss;
        fm->peak_win = s->rss_peak_win;
        fm->peak_run = s->rss_peak_run;
    }
    /* Release: a reader that sees this even number sees every byte above
     * (the odd store and the fence before the rows pair with the reader's
     * second read of seq: a reader that saw any new byte sees seq moved). */
    __atomic_store_n(&h->seq, seq + 1, __ATOMIC_RELEASE);
}

void prof_live_publish(const struct prof_live_snap *s)
{
    if (prof_config_get()->live)
        file_write(s);
}

void prof_live_file_remove(void)
{
    if (file_fd >= 0 && file_pid == prof_process_get()->pid) {
        struct stat mine, there;

        /* Only the file this process made: where it was removed and
         * something else took the name, that is left alone. */
        if (fstat(file_fd, &mine) == 0 && lstat(file_path, &there) == 0 &&
            mine.st_dev == there.st_dev && mine.st_ino == there.st_ino)
            unlink(file_path);
    }
    file_forget();
}
