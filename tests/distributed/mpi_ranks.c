/* mpi_ranks.c - an MPI job whose ranks do not all step alike, for
 * mpi_check.py's "never" case: every rank calls the job's own
 * MPI_Allreduce every iteration; rank NEVER (argv[1]) never calls
 * prof_step() nor prof_mpi_summary(). The others' reduction must time out
 * once (PROF_RANKS_TIMEOUT), name that rank and let the job finish. */
#include <mpi.h>
#include <prof_mpi.h>

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int main(int argc, char **argv)
{
    int never = argc > 1 ? atoi(argv[1]) : 3, iters = argc > 2 ? atoi(argv[2]) : 30, rank;
    double x = 1, sum = 0, t0;
    struct timespec ts = {0, 2000000};

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
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
        if (rank != never) {
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
