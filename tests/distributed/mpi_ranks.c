/* mpi_ranks.c - an MPI job whose ranks do not all step alike, for
 * mpi_check.py: every rank calls the job's own MPI_Allreduce every
 * iteration, so the ranks are in step with each other whatever prof does.
 *
 *   mpi_ranks never RANK ITERS   rank RANK never calls prof_step() nor
 *                                prof_mpi_summary()
 *   mpi_ranks rate RANK ITERS    rank RANK steps twice per iteration (and
 *                                calls prof_mpi_summary() after each step):
 *                                it reaches each window early
 *
 * Whichever rank it is (rank 0 too), the reduction must cost the job at
 * most one PROF_RANKS_TIMEOUT in all, name that rank and let every rank
 * finish. Each rank prints how long its loop took. */
#include <mpi.h>
#include <prof_mpi.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "never";
    int odd = argc > 2 ? atoi(argv[2]) : 3, iters = argc > 3 ? atoi(argv[3]) : 30, rank;
    int steps = strcmp(mode, "rate") == 0 ? 2 : strcmp(mode, "never") == 0 ? 0 : -1;
    double x = 1, sum = 0, t0;
    struct timespec ts = {0, 2000000};

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (steps < 0) {
        if (rank == 0)
            fprintf(stderr, "mpi_ranks: unknown mode %s\n", mode);
        MPI_Finalize();
        return 2;
    }
    t0 = MPI_Wtime();
    for (int i = 0; i < iters; i++) {
        {
            PROF_ZONE("work");
            nanosleep(&ts, NULL);
        }
        {
            PROF_ZONE("allreduce");
            MPI_Allreduce(&x, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        }
        for (int k = 0; k < (rank == odd ? steps : 1); k++) {
            prof_step();
            prof_mpi_summary(MPI_COMM_WORLD);
        }
    }
    printf("mpi_ranks: rank %d trained %d iterations in %.1f s\n", rank, iters,
           MPI_Wtime() - t0);
    fflush(stdout);
    MPI_Finalize();
    return 0;
}
