/* live_dir.c - where this process's live file goes: this user's own
 * directory and the file's name in it (live_dir.h).
 *
 * The directory is made 0700 and then checked, never trusted for its
 * name: one that another user made first (the names are guessable), or
 * that others may enter, is refused, so nobody else can create, replace or
 * read a per-pid name in it; where another user took the name, the file
 * goes to a directory of this user's alone that nobody can take (one of
 * mkdtemp's), where readers look too. The file's name says the pid
 * namespace, so two containers' pid 1 sharing /dev/shm never take each
 * other's name. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "live.h"
#include "live_dir.h"
#include "log.h"

/* The user's own directory: $XDG_RUNTIME_DIR/prof where that variable
 * names a directory of this user's that it may write, else
 * /dev/shm/prof-UID (tmpfs on every Linux). Made 0700 and then checked,
 * never trusted for its name: a directory another user made first (the
 * names are guessable), or one that others may enter, is refused, so
 * nobody else can create, replace or read a per-pid name in it. Only the
 * name is chosen here; prof_live_dir_open checks what is there and where
 * the names are taken, makes one nobody can take (live_dir_private). */
int prof_live_dir(char *buf, size_t size)
{
    const char *xdg = getenv("XDG_RUNTIME_DIR");
    struct stat st;
    int n;

    if (xdg != NULL && xdg[0] == '/' && stat(xdg, &st) == 0 && S_ISDIR(st.st_mode) &&
        st.st_uid == geteuid() && access(xdg, W_OK) == 0)
        n = snprintf(buf, size, "%s/prof", xdg);
    else
        n = snprintf(buf, size, "/dev/shm/prof-%u", (unsigned)geteuid());
    return n < 0 || (size_t)n >= size ? -ENAMETOOLONG : 0;
}

int prof_live_name(int pid, uint32_t pid_ns, char *buf, size_t size)
{
    int n;

    if (pid_ns == 0 || pid_ns == PROF_LIVE_INIT_PID_NS)
        n = snprintf(buf, size, PROF_LIVE_PREFIX "%d", pid);
    else
        n = snprintf(buf, size, PROF_LIVE_PREFIX "%d-ns%u", pid, (unsigned)pid_ns);
    return n < 0 || (size_t)n >= size ? -ENAMETOOLONG : 0;
}

/* dir, made if missing (make) and opened without following a link; its
 * descriptor if it is this user's and nobody else's (0700), else -1 with
 * the reason in why. */
static int live_dir_try(const char *dir, int make, char *why, size_t whysize)
{
    struct stat st;
    int fd;

    if (make && mkdir(dir, 0700) != 0 && errno != EEXIST) {
        snprintf(why, whysize, "cannot create %s (%s)", dir, strerror(errno));
        return -1;
    }
    fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 || fstat(fd, &st) != 0) {
        snprintf(why, whysize, "cannot open %s (%s)", dir, strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    if (st.st_uid != geteuid() || (st.st_mode & 077) != 0) {
        snprintf(why, whysize, "%s belongs to uid %u with mode %03o, not to this user (uid %u) "
                 "alone", dir, (unsigned)st.st_uid, (unsigned)(st.st_mode & 0777),
                 (unsigned)geteuid());
        close(fd);
        return -1;
    }
    return fd;
}

/* Where /dev/shm/prof-UID is taken (another user made it first, or made
 * it a link or a file): a directory of this user's alone named
 * /dev/shm/prof-UID.XXXXXX, an existing one (the user's other processes
 * share it) or one made by mkdtemp, whose name nobody can take first.
 * Readers find it the same way: by its prefix, trusted only for its owner
 * and mode, which another user cannot give a directory of theirs. Its
 * descriptor and name, or -1. */
static int live_dir_private(char *dir, size_t size)
{
    char prefix[64];
    size_t plen;
    DIR *shm;
    struct dirent *e;
    int fd = -1, n;

    n = snprintf(prefix, sizeof prefix, "prof-%u.", (unsigned)geteuid());
    if (n < 0 || (size_t)n >= sizeof prefix)
        return -1;
    plen = (size_t)n;
    if ((shm = opendir("/dev/shm")) == NULL)
        return -1;
    while (fd < 0 && (e = readdir(shm)) != NULL) {
        struct stat st;
        int d;

        if (strncmp(e->d_name, prefix, plen) != 0)
            continue;
        d = openat(dirfd(shm), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (d < 0)
            continue;
        n = snprintf(dir, size, "/dev/shm/%s", e->d_name);
        if (fstat(d, &st) == 0 && st.st_uid == geteuid() && (st.st_mode & 077) == 0 &&
            n > 0 && (size_t)n < size)
            fd = d;
        else
            close(d);
    }
    closedir(shm);
    if (fd >= 0)
        return fd;
    n = snprintf(dir, size, "/dev/shm/%sXXXXXX", prefix);
    if (n < 0 || (size_t)n >= size || mkdtemp(dir) == NULL)
        return -1;
    fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    return fd;
}

/* This user's directory for the file: the first choice (prof_live_dir),
 * then /dev/shm/prof-UID, then a private one (live_dir_private); its
 * descriptor and name (dir), or -1. A refused choice is said (unless
 * quiet), with where the file went instead. */
int prof_live_dir_open(char *dir, size_t size, int quiet)
{
    char cand[2][400], why[600] = "";
    int ncand = 1, fd;

    if (prof_live_dir(cand[0], sizeof cand[0]) != 0) {
        if (!quiet)
            prof_log("live stats: the directory's name is too long; prof-top will not see this "
                 "process");
        return -1;
    }
    snprintf(cand[1], sizeof cand[1], "/dev/shm/prof-%u", (unsigned)geteuid());
    if (strcmp(cand[0], cand[1]) != 0)
        ncand = 2;
    for (int i = 0; i < ncand; i++) {
        char w[600];

        fd = live_dir_try(cand[i], 1, w, sizeof w);
        if (fd >= 0) {
            size_t len = strlen(cand[i]);

            if (len >= size) {
                close(fd);
                return -1;
            }
            memcpy(dir, cand[i], len + 1);
            if (why[0] != '\0' && !quiet)
                prof_log("live stats: %s; publishing in %s instead", why, dir);
            return fd;
        }
        if (why[0] == '\0')
            snprintf(why, sizeof why, "%s", w);
    }
    if ((fd = live_dir_private(dir, size)) >= 0) {
        char w[600];
        int checked;

        /* Made by mkdtemp (0700) or found by owner and mode: checked
         * again through the descriptor all the same. */
        close(fd);
        checked = live_dir_try(dir, 0, w, sizeof w);
        if (checked >= 0) {
            if (!quiet)
                prof_log("live stats: %s; publishing in %s instead", why, dir);
            return checked;
        }
    }
    if (!quiet)
        prof_log("live stats: %s; prof-top will not see this process", why);
    return -1;
}
