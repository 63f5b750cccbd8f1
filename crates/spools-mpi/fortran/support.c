/* The hand-written part of Spools' Fortran layer (gen.py writes the rest; callbacks.c has
 * the functions a program writes in Fortran): the sentinels mpif.h declares in common
 * blocks, the string and array helpers of the generated bindings, and the functions whose
 * Fortran form is not a row of gen.py's table (MPI_Init's missing arguments, MPI_Wtime's
 * result, ...).
 *
 * The common blocks are defined here; a program's own COMMON declarations of the same
 * names resolve to these definitions (or these to the program's), so that the address of
 * MPI_BOTTOM or MPI_STATUS_IGNORE as a program passes it is the address defined here. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fortran.h"

/* gfortran's names for the common blocks /SPOOLS_BOTTOM/ ... of mpif.h and module mpi_f08
 * (aligned as gfortran aligns the modules' common blocks). */
#define COMMON_BLOCK __attribute__((aligned(32)))
MPI_Fint spools_bottom_ COMMON_BLOCK;
MPI_Fint spools_in_place_ COMMON_BLOCK;
MPI_Fint spools_status_ignore_[MPI_F_STATUS_SIZE] COMMON_BLOCK;
MPI_Fint spools_statuses_ignore_[MPI_F_STATUS_SIZE] COMMON_BLOCK;
MPI_Fint spools_errcodes_ignore_[1] COMMON_BLOCK;
MPI_Fint spools_unweighted_[1] COMMON_BLOCK;
MPI_Fint spools_weights_empty_[1] COMMON_BLOCK;
char spools_argv_null_[1] COMMON_BLOCK;
char spools_argvs_null_[1] COMMON_BLOCK;

void *spools_f_buf(void *p)
{
    if (p == (void *)&spools_bottom_)
        return MPI_BOTTOM;
    if (p == (void *)&spools_in_place_)
        return MPI_IN_PLACE;
    return p;
}

MPI_Status *spools_f_status(MPI_Fint *p)
{
    return p == spools_status_ignore_ ? (MPI_Status *)0 : (MPI_Status *)p;
}

MPI_Status *spools_f_statuses(MPI_Fint *p)
{
    return p == spools_statuses_ignore_ ? (MPI_Status *)0 : (MPI_Status *)p;
}

/* A Fortran string (LEN characters, blank-padded, no terminator) as a C string without
 * its leading and trailing blanks; NULL when memory runs out. The caller frees it. */
char *spools_f_str_in(const char *s, size_t len)
{
    while (len > 0 && s[len - 1] == ' ')
        len--;
    while (len > 0 && s[0] == ' ') {
        s++;
        len--;
    }
    char *c = malloc(len + 1);
    if (c != NULL) {
        memcpy(c, s, len);
        c[len] = 0;
    }
    return c;
}

/* A C string into a Fortran string of LEN characters: truncated, or padded with blanks. */
void spools_f_str_out(char *dst, size_t len, const char *src)
{
    size_t n = strlen(src);
    if (n > len)
        n = len;
    memcpy(dst, src, n);
    memset(dst + n, ' ', len - n);
}

/* Room for COUNT C handles of SIZE bytes (at least one, so that NULL means no memory). */
void *spools_f_handles(size_t size, MPI_Fint count)
{
    return malloc(size * (size_t)(count > 0 ? count : 1));
}

/* Module mpi_f08's choice buffers are TYPE(*), DIMENSION(..), CONTIGUOUS: the compiler
 * passes a C descriptor (CFI_cdesc_t), whose first member is the base address in every
 * implementation (the standard fixes base_addr, elem_len and version as the first three). */
void *spools_f08_addr(void **descriptor)
{
    return *descriptor;
}

void mpi_init_(MPI_Fint *ierror)
{
    *ierror = MPI_Init(NULL, NULL);
}

void mpi_init_thread_(MPI_Fint *required, MPI_Fint *provided, MPI_Fint *ierror)
{
    *ierror = MPI_Init_thread(NULL, NULL, *required, provided);
}

double mpi_wtime_(void)
{
    return MPI_Wtime();
}

double mpi_wtick_(void)
{
    return MPI_Wtick();
}

/* Graph weights: MPI_UNWEIGHTED and MPI_WEIGHTS_EMPTY are the addresses of their common
 * blocks in Fortran, small integers cast to pointers in C. */
int *spools_f_weights(MPI_Fint *p)
{
    if (p == spools_unweighted_)
        return MPI_UNWEIGHTED;
    if (p == spools_weights_empty_)
        return MPI_WEIGHTS_EMPTY;
    return p;
}

/* The ranks a communicator's per-peer arrays have (the remote group's for an
 * intercommunicator); 0 for a handle that is not a communicator, which the call then
 * refuses. */
int spools_f_comm_ranks(MPI_Comm comm)
{
    int inter = 0, n = 0;
    if (MPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS)
        return 0;
    if ((inter ? MPI_Comm_remote_size(comm, &n) : MPI_Comm_size(comm, &n)) != MPI_SUCCESS)
        return 0;
    return n;
}

/* The buffer's address is of no use in Fortran (and would not fit an INTEGER). */
void mpi_buffer_detach_(void *buffer_addr, MPI_Fint *size, MPI_Fint *ierror)
{
    void *p = NULL;
    (void)buffer_addr;
    *ierror = MPI_Buffer_detach(&p, size);
}

void mpi_info_create_env_(MPI_Fint *info, MPI_Fint *ierror)
{
    MPI_Info c = 0;
    *ierror = MPI_Info_create_env(0, NULL, &c);
    if (*ierror == MPI_SUCCESS)
        *info = MPI_Info_toint(c);
}

/* BUFLEN in: at most this many characters are stored (and at most LEN(VALUE)), blank-
 * padded to LEN(VALUE); none, and VALUE untouched, for 0. Out: the value's whole length,
 * without C's terminator. */
void mpi_info_get_string_(MPI_Fint *info, char *key, MPI_Fint *buflen, char *value,
                          MPI_Fint *flag, MPI_Fint *ierror, size_t key_len, size_t value_len)
{
    char *c_key = spools_f_str_in(key, key_len);
    size_t room = value_len;
    if (*buflen >= 0 && (size_t)*buflen < room)
        room = (size_t)*buflen;
    char *c_value = malloc(room + 1);
    if (c_key == NULL || c_value == NULL) {
        free(c_key);
        free(c_value);
        *ierror = MPI_ERR_NO_MEM;
        return;
    }
    int c_len = (int)room + 1, c_flag = 0;
    c_value[0] = 0;
    int rc = MPI_Info_get_string(MPI_Info_fromint(*info), c_key, &c_len, c_value, &c_flag);
    if (rc == MPI_SUCCESS) {
        *flag = c_flag != 0;
        if (c_flag) {
            if (room > 0)
                spools_f_str_out(value, value_len, c_value);
            *buflen = c_len - 1;
        }
    }
    free(c_key);
    free(c_value);
    *ierror = rc;
}

void mpi_pcontrol_(MPI_Fint *level, MPI_Fint *ierror)
{
    *ierror = MPI_Pcontrol(*level);
}

MPI_Aint mpi_aint_add_(MPI_Aint *base, MPI_Aint *disp)
{
    return MPI_Aint_add(*base, *disp);
}

MPI_Aint mpi_aint_diff_(MPI_Aint *addr1, MPI_Aint *addr2)
{
    return MPI_Aint_diff(*addr1, *addr2);
}

/* An address or extent that an MPI-1 call returns as an INTEGER and that does not fit:
 * said on stderr (naming the call and the MPI-2 form to use) and raised as MPI_ERR_ARG
 * under MPI_COMM_SELF's handler, as errors of calls without a communicator are. */
int spools_f_too_wide(const char *call)
{
    fprintf(stderr, "%s: the value does not fit a Fortran INTEGER (use the call's MPI-2 form, "
                    "with INTEGER(KIND=MPI_ADDRESS_KIND))\n", call);
    MPI_Comm_call_errhandler(MPI_Comm_fromint(SPOOLS_F_COMM_SELF), MPI_ERR_ARG);
    return MPI_ERR_ARG;
}

/* VALUE is left as it was unless the key is there (FLAG); then at most VALUELEN
 * characters of it, blank-padded to LEN(VALUE). */
void mpi_info_get_(MPI_Fint *info, char *key, MPI_Fint *valuelen, char *value, MPI_Fint *flag,
                   MPI_Fint *ierror, size_t key_len, size_t value_len)
{
    size_t room = *valuelen > 0 ? (size_t)*valuelen : 0;
    if (room > value_len)
        room = value_len;
    char *c_key = spools_f_str_in(key, key_len), *c_value = malloc(room + 1);
    if (c_key == NULL || c_value == NULL) {
        free(c_key);
        free(c_value);
        *ierror = MPI_ERR_NO_MEM;
        return;
    }
    int c_flag = 0;
    c_value[0] = 0;
    int rc = MPI_Info_get(MPI_Info_fromint(*info), c_key, (int)room, c_value, &c_flag);
    if (rc == MPI_SUCCESS) {
        *flag = c_flag != 0;
        if (c_flag)
            spools_f_str_out(value, value_len, c_value);
    }
    free(c_key);
    free(c_value);
    *ierror = rc;
}

/* The status conversions of C code linked with Fortran: a Fortran status (INTEGER
 * STATUS(MPI_STATUS_SIZE), or mpi_f08's TYPE(MPI_Status)) is the ABI's MPI_Status, bit
 * for bit. MPI_F_STATUS_IGNORE and MPI_F_STATUSES_IGNORE are the sentinels' addresses. */
MPI_Fint *MPI_F_STATUS_IGNORE = spools_status_ignore_;
MPI_Fint *MPI_F_STATUSES_IGNORE = spools_statuses_ignore_;

static int status_copy(const void *from, void *to)
{
    if (from == NULL || to == NULL || from == (const void *)spools_status_ignore_ ||
        to == (void *)spools_status_ignore_)
        return MPI_ERR_ARG;
    memcpy(to, from, sizeof(MPI_Status));
    return MPI_SUCCESS;
}

int MPI_Status_f2c(const MPI_Fint *f_status, MPI_Status *c_status)
{
    return status_copy(f_status, c_status);
}

int MPI_Status_c2f(const MPI_Status *c_status, MPI_Fint *f_status)
{
    return status_copy(c_status, f_status);
}

int MPI_Status_f082c(const MPI_Status *f08_status, MPI_Status *c_status)
{
    return status_copy(f08_status, c_status);
}

int MPI_Status_c2f08(const MPI_Status *c_status, MPI_Status *f08_status)
{
    return status_copy(c_status, f08_status);
}

int MPI_Status_f2f08(const MPI_Fint *f_status, MPI_Status *f08_status)
{
    return status_copy(f_status, f08_status);
}

int MPI_Status_f082f(const MPI_Status *f08_status, MPI_Fint *f_status)
{
    return status_copy(f08_status, f_status);
}

/* A Fortran array of arguments (CHARACTER*(LEN) ARGV(*), the elements STRIDE apart,
 * ended by a blank element) as a C argv (NULL-terminated, each element trimmed); NULL
 * for MPI_ARGV_NULL (ARGV at NULL_AT) and *OK = 0 when memory runs out. Free it with
 * free_argv. */
static char **argv_in(const char *argv, size_t len, size_t stride, const void *null_at,
                      int *ok)
{
    *ok = 1;
    if ((const void *)argv == null_at)
        return NULL;
    size_t n = 0;
    for (;; n++) {
        const char *e = argv + n * stride;
        size_t k = 0;
        while (k < len && e[k] == ' ')
            k++;
        if (k == len)
            break;
    }
    char **c = calloc(n + 1, sizeof *c);
    if (c == NULL) {
        *ok = 0;
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        c[i] = spools_f_str_in(argv + i * stride, len);
        if (c[i] == NULL) {
            for (size_t j = 0; j < i; j++)
                free(c[j]);
            free(c);
            *ok = 0;
            return NULL;
        }
    }
    return c;
}

static void free_argv(char **argv)
{
    if (argv == NULL)
        return;
    for (char **a = argv; *a != NULL; a++)
        free(*a);
    free(argv);
}

static int *errcodes_in(MPI_Fint *codes)
{
    return codes == spools_errcodes_ignore_ ? NULL : codes;
}

void mpi_comm_spawn_(char *command, char *argv, MPI_Fint *maxprocs, MPI_Fint *info,
                     MPI_Fint *root, MPI_Fint *comm, MPI_Fint *intercomm, MPI_Fint *codes,
                     MPI_Fint *ierror, size_t command_len, size_t argv_len)
{
    int ok = 1;
    char *c_command = spools_f_str_in(command, command_len);
    char **c_argv = argv_in(argv, argv_len, argv_len, spools_argv_null_, &ok);
    if (c_command == NULL || !ok) {
        free(c_command);
        free_argv(c_argv);
        *ierror = MPI_ERR_NO_MEM;
        return;
    }
    MPI_Comm c_inter = 0;
    int rc = MPI_Comm_spawn(c_command, c_argv, *maxprocs, MPI_Info_fromint(*info), *root,
                            MPI_Comm_fromint(*comm), &c_inter, errcodes_in(codes));
    if (rc == MPI_SUCCESS)
        *intercomm = MPI_Comm_toint(c_inter);
    free(c_command);
    free_argv(c_argv);
    *ierror = rc;
}

/* ARRAY_OF_ARGV is CHARACTER*(LEN) ARRAY_OF_ARGV(COUNT, *): the arguments of command i
 * are row i, COUNT elements apart. */
void mpi_comm_spawn_multiple_(MPI_Fint *count, char *commands, char *argvs,
                              MPI_Fint *maxprocs, MPI_Fint *infos, MPI_Fint *root,
                              MPI_Fint *comm, MPI_Fint *intercomm, MPI_Fint *codes,
                              MPI_Fint *ierror, size_t commands_len, size_t argvs_len)
{
    int n = *count > 0 ? *count : 0, ok = 1;
    char **c_commands = calloc((size_t)n + 1, sizeof *c_commands);
    char ***c_argvs = calloc((size_t)n + 1, sizeof *c_argvs);
    MPI_Info *c_infos = calloc((size_t)n + 1, sizeof *c_infos);
    if (c_commands == NULL || c_argvs == NULL || c_infos == NULL)
        ok = 0;
    for (int i = 0; ok && i < n; i++) {
        c_commands[i] = spools_f_str_in(commands + (size_t)i * commands_len, commands_len);
        ok = c_commands[i] != NULL;
        c_infos[i] = MPI_Info_fromint(infos[i]);
        if (ok && (const void *)argvs != spools_argvs_null_)
            c_argvs[i] = argv_in(argvs + (size_t)i * argvs_len, argvs_len,
                                 (size_t)n * argvs_len, NULL, &ok);
    }
    int rc = MPI_ERR_NO_MEM;
    MPI_Comm c_inter = 0;
    if (ok) {
        rc = MPI_Comm_spawn_multiple(n, c_commands,
                                     (const void *)argvs == spools_argvs_null_ ? NULL : c_argvs,
                                     maxprocs, c_infos, *root, MPI_Comm_fromint(*comm),
                                     &c_inter, errcodes_in(codes));
        if (rc == MPI_SUCCESS)
            *intercomm = MPI_Comm_toint(c_inter);
    }
    for (int i = 0; i < n; i++) {
        if (c_commands != NULL)
            free(c_commands[i]);
        if (c_argvs != NULL)
            free_argv(c_argvs[i]);
    }
    free(c_commands);
    free(c_argvs);
    free(c_infos);
    *ierror = rc;
}

/* The profiling names of the functions above. */
PMPI(mpi_init)
PMPI(mpi_init_thread)
PMPI(mpi_wtime)
PMPI(mpi_wtick)
PMPI(mpi_buffer_detach)
PMPI(mpi_info_create_env)
PMPI(mpi_info_get_string)
PMPI(mpi_info_get)
PMPI(mpi_pcontrol)
PMPI(mpi_comm_spawn)
PMPI(mpi_comm_spawn_multiple)
PMPI(mpi_aint_add)
PMPI(mpi_aint_diff)
