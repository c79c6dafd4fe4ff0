/* mpi_train.c - an MPI training loop with a live cross-rank summary.
 *
 *     PROF=1 PROF_SUMMARY_EVERY=10steps mpirun -np 4 --allow-run-as-root \
 *         --oversubscribe build/examples/mpi_train --slow-rank 2 --slow-stage data
 *
 * Each step: "data" (make a batch), "compute" (a small matrix product),
 * "allreduce" (MPI_Allreduce of the "gradients": where the fast ranks wait
 * for a slow one), then prof_step() and prof_mpi_summary(). Every 10 steps
 * rank 0 prints one table of every rank's window naming the straggler.
 *
 *   --steps N                 steps (default 40)
 *   --slow-rank R             rank R sleeps --slow-ms more (default 20) ...
 *   --slow-stage S            ... in stage S: data or compute (default data)
 *   --exit-rank R --exit-step K
 *                             rank R stops stepping after step K and waits in
 *                             MPI_Finalize: the others' next gather times
 *                             out (PROF_RANKS_TIMEOUT), prof says so once and
 *                             they go back to their own summaries. */
#include <mpi.h>
#include <prof_mpi.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define N 64

static void sleep_ms(double ms)
{
    struct timespec ts = {(time_t)(ms / 1e3), (long)(ms * 1e6) % 1000000000L};

    nanosleep(&ts, NULL);
}

int main(int argc, char **argv)
{
    int steps = 40, slow_rank = -1, exit_rank = -1, exit_step = 15, rank, size;
    const char *slow_stage = "data";
    double slow_ms = 20, sum = 0;
    static double a[N * N], b[N * N], c[N * N], grad[N], total[N];

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--steps") == 0)
            steps = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--slow-rank") == 0)
            slow_rank = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--slow-stage") == 0)
            slow_stage = argv[i + 1];
        else if (strcmp(argv[i], "--slow-ms") == 0)
            slow_ms = atof(argv[i + 1]);
        else if (strcmp(argv[i], "--exit-rank") == 0)
            exit_rank = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--exit-step") == 0)
            exit_step = atoi(argv[i + 1]);
        else {
            if (rank == 0)
                fprintf(stderr, "mpi_train: unknown option %s\n", argv[i]);
            MPI_Finalize();
            return 2;
        }
    }
    prof_thread_name("main");

    for (int step = 1; step <= steps; step++) {
        /* After --exit-step the leaving rank is gone (it waits in
         * MPI_Finalize) and the others go on without the allreduce: prof's
         * gather is the only collective that misses it. */
        int left = exit_rank >= 0 && step > exit_step;

        if (left && rank == exit_rank)
            break;
        {
            PROF_ZONE("data");
            for (int i = 0; i < N * N; i++) {
                a[i] = (double)((i * 31 + step + rank) % 17) / 17.0;
                b[i] = (double)((i * 7 + step) % 13) / 13.0;
            }
            if (rank == slow_rank && strcmp(slow_stage, "data") == 0)
                sleep_ms(slow_ms);
        }
        {
            PROF_ZONE("compute");
            for (int i = 0; i < N; i++)
                for (int k = 0; k < N; k++)
                    for (int j = 0; j < N; j++)
                        c[i * N + j] += a[i * N + k] * b[k * N + j];
            for (int i = 0; i < N; i++)
                grad[i] = c[i * N + i] * 1e-6;
            if (rank == slow_rank && strcmp(slow_stage, "compute") == 0)
                sleep_ms(slow_ms);
        }
        if (!left) {
            PROF_ZONE("allreduce");
            MPI_Allreduce(grad, total, N, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
            sum += total[0];
        }
        prof_step();
        prof_mpi_summary(MPI_COMM_WORLD);
    }
    if (rank == 0) {
        /* What a logger would read: the last table's JSON. */
        char json[16384];
        int n = prof_mpi_last(json, sizeof json, PROF_FORMAT_JSON);
        const char *straggler = n > 0 ? strstr(json, "\"straggler\":") : NULL;
        printf("mpi_train: %d ranks, %d steps, checksum %.3f, last %s\n", size, steps, sum,
               straggler != NULL ? straggler : "(no cross-rank table)");
        fflush(stdout);
    }
    prof_shutdown();
    MPI_Finalize();
    return 0;
}
