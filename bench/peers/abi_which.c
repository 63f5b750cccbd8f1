/* Linked into the peer benchmarks' mpicc_abi builds (osu.sh, rma.sh, mpiio.sh): reports
 * on stderr, before main, the libmpi* files this process loaded and the first line of
 * MPI_Get_library_version (which may be called before MPI_Init), each line starting
 * with WHICH_PREFIX ("osu-abi", "rma-abi", "io-abi": -DWHICH_PREFIX=\"...\"), so that a
 * script can check that a run loaded the library it meant. */
#define _GNU_SOURCE
#include <link.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef WHICH_PREFIX
#error "compile with -DWHICH_PREFIX=\"name\""
#endif

static int which_one(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    (void)data;
    const char *base = strrchr(info->dlpi_name, '/');
    base = base ? base + 1 : info->dlpi_name;
    if (strncmp(base, "libmpi", 6) == 0) {
        char real[4096];
        const char *shown = realpath(info->dlpi_name, real) ? real : info->dlpi_name;
        fprintf(stderr, WHICH_PREFIX "-library: pid %d loaded %s\n", (int)getpid(), shown);
    }
    return 0;
}

__attribute__((constructor)) static void which_report(void)
{
    char v[MPI_MAX_LIBRARY_VERSION_STRING] = {0};
    int len = 0;
    dl_iterate_phdr(which_one, NULL);
    if (MPI_Get_library_version(v, &len) == MPI_SUCCESS) {
        char *nl = strchr(v, '\n');
        if (nl)
            *nl = '\0';
        fprintf(stderr, WHICH_PREFIX "-version: pid %d %s\n", (int)getpid(), v);
    }
}
