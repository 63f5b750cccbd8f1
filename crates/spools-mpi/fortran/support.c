/* The hand-written part of Spools' Fortran layer (gen.py writes the rest): the sentinels
 * mpif.h declares in common blocks, the string and array helpers of the generated
 * bindings, and the functions whose Fortran form is not a row of gen.py's table
 * (MPI_Init's missing arguments, MPI_Wtime's result, user operators written in Fortran).
 *
 * The common blocks are defined here; a program's own COMMON declarations of the same
 * names resolve to these definitions (or these to the program's), so that the address of
 * MPI_BOTTOM or MPI_STATUS_IGNORE as a program passes it is the address defined here. */
#include <pthread.h>
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

void *spools_f_buf(void *p)
{
    if (p == (void *)&spools_bottom_)
        return (void *)0; /* MPI_BOTTOM */
    if (p == (void *)&spools_in_place_)
        return (void *)1; /* MPI_IN_PLACE */
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

/* User operators written in Fortran: SUBROUTINE F(INVEC, INOUTVEC, LEN, DATATYPE) takes
 * the datatype as an INTEGER, where the C function gets an MPI_Datatype. The library calls
 * a C function with no word of its own, so each operator gets one of SLOTS trampolines,
 * which knows its slot; MPI_Op_free gives the slot back. */
typedef void (*spools_f_user_fn)(void *invec, void *inoutvec, MPI_Fint *len,
                                 MPI_Fint *datatype);
#define SLOTS 64
static struct {
    spools_f_user_fn fn; /* NULL: free */
    MPI_Fint op;
} slots[SLOTS];
static pthread_mutex_t slots_lock = PTHREAD_MUTEX_INITIALIZER;

static void trampoline(int slot, void *in, void *inout, int *len, MPI_Datatype *datatype)
{
    MPI_Fint f = MPI_Type_toint(*datatype);
    slots[slot].fn(in, inout, len, &f);
}

/* trampoline_A_B serves slot 8 * A + B. */
#define T(a, b)                                                                   \
    static void trampoline_##a##_##b(void *in, void *inout, int *len,             \
                                     MPI_Datatype *datatype)                     \
    {                                                                             \
        trampoline(8 * a + b, in, inout, len, datatype);                          \
    }
#define T8(a) T(a, 0) T(a, 1) T(a, 2) T(a, 3) T(a, 4) T(a, 5) T(a, 6) T(a, 7)
T8(0) T8(1) T8(2) T8(3) T8(4) T8(5) T8(6) T8(7)
#define R(a, b) trampoline_##a##_##b,
#define R8(a) R(a, 0) R(a, 1) R(a, 2) R(a, 3) R(a, 4) R(a, 5) R(a, 6) R(a, 7)
static MPI_User_function *const trampolines[SLOTS] = {
    R8(0) R8(1) R8(2) R8(3) R8(4) R8(5) R8(6) R8(7)};

void mpi_op_create_(spools_f_user_fn fn, MPI_Fint *commute, MPI_Fint *op, MPI_Fint *ierror)
{
    pthread_mutex_lock(&slots_lock);
    int slot = 0;
    while (slot < SLOTS && slots[slot].fn != NULL)
        slot++;
    if (slot == SLOTS) {
        pthread_mutex_unlock(&slots_lock);
        /* More than SLOTS Fortran operators alive at once. */
        *ierror = MPI_ERR_NO_MEM;
        return;
    }
    MPI_Op c = 0;
    int rc = MPI_Op_create(trampolines[slot], *commute != 0, &c);
    if (rc == MPI_SUCCESS) {
        slots[slot].fn = fn;
        slots[slot].op = MPI_Op_toint(c);
        *op = slots[slot].op;
    }
    pthread_mutex_unlock(&slots_lock);
    *ierror = rc;
}

void mpi_op_free_(MPI_Fint *op, MPI_Fint *ierror)
{
    MPI_Fint was = *op;
    MPI_Op c = MPI_Op_fromint(*op);
    int rc = MPI_Op_free(&c);
    if (rc == MPI_SUCCESS) {
        pthread_mutex_lock(&slots_lock);
        for (int slot = 0; slot < SLOTS; slot++)
            if (slots[slot].fn != NULL && slots[slot].op == was)
                slots[slot].fn = NULL;
        pthread_mutex_unlock(&slots_lock);
    }
    *op = MPI_Op_toint(c);
    *ierror = rc;
}
