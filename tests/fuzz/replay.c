/* replay.c - run a fuzz target over files and directories of inputs, with
 * any compiler and no libFuzzer: the committed corpus (regression inputs
 * included) is exercised in every build.
 *
 *     fuzz_env_replay tests/fuzz/corpus/fuzz_env [more files or dirs]
 *
 * Exit 0 when every input passed (a failing check aborts), 1 when an input
 * could not be read or no input was found. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

__attribute__((weak)) int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    return 0;
}

static long ran;

static int run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    unsigned char *data = NULL;
    size_t len = 0, cap = 0, got;

    if (f == NULL) {
        perror(path);
        return -1;
    }
    do {
        if (len == cap) {
            unsigned char *d = realloc(data, cap = cap ? cap * 2 : 4096);
            if (d == NULL) {
                fclose(f);
                free(data);
                return -1;
            }
            data = d;
        }
        got = fread(data + len, 1, cap - len, f);
        len += got;
    } while (got > 0);
    fclose(f);
    fprintf(stderr, "replay %s (%zu bytes)\n", path, len);
    LLVMFuzzerTestOneInput(data, len);
    free(data);
    ran++;
    return 0;
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int run_path(const char *path)
{
    struct stat st;
    DIR *d;
    struct dirent *e;
    char **names = NULL;
    size_t n = 0;
    int err = 0;

    if (stat(path, &st) != 0) {
        perror(path);
        return -1;
    }
    if (!S_ISDIR(st.st_mode))
        return run_file(path);
    if ((d = opendir(path)) == NULL) {
        perror(path);
        return -1;
    }
    while ((e = readdir(d)) != NULL) {
        char **nn;
        if (e->d_name[0] == '.')
            continue;
        if ((nn = realloc(names, (n + 1) * sizeof *names)) == NULL)
            break;
        names = nn;
        names[n] = malloc(strlen(path) + strlen(e->d_name) + 2);
        if (names[n] == NULL)
            break;
        sprintf(names[n], "%s/%s", path, e->d_name);
        n++;
    }
    closedir(d);
    qsort(names, n, sizeof *names, cmp_names);
    for (size_t i = 0; i < n; i++) {
        if (run_path(names[i]) != 0)
            err = -1;
        free(names[i]);
    }
    free(names);
    return err;
}

int main(int argc, char **argv)
{
    int err = 0;

    LLVMFuzzerInitialize(&argc, &argv);
    for (int i = 1; i < argc; i++)
        if (run_path(argv[i]) != 0)
            err = 1;
    fprintf(stderr, "%ld inputs replayed\n", ran);
    return err || ran == 0;
}
