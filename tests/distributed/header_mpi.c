/* header_mpi.c - prof_mpi.h on its own (it includes mpi.h and prof.h), in
 * strict C99 and C++11 with every warning an error. Built, then run once
 * as a single MPI process: with PROF off, prof_mpi_summary() is refused
 * (no periodic summaries) and returns at once. */
#include <prof_mpi.h>

#include <stdio.h>

int main(int argc, char **argv)
{
    int rc;

    MPI_Init(&argc, &argv);
    prof_step();
    rc = prof_mpi_summary(MPI_COMM_WORLD);
    MPI_Finalize();
    if (rc != -ENOENT) {
        fprintf(stderr, "prof_mpi_summary without PROF_SUMMARY_EVERY: %d, not -ENOENT\n", rc);
        return 1;
    }
    return 0;
}
