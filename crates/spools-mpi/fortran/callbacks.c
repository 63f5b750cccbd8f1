/* The functions a program writes in Fortran and the library calls: user operators, error
 * handlers, attribute copy and delete functions; and the attribute calls, whose values
 * are INTEGER(KIND=MPI_ADDRESS_KIND) (INTEGER for the MPI-1 forms) in Fortran where C
 * stores a void *.
 *
 * A C callback of an operator or an error handler gets no word of the program's, so each
 * Fortran one takes one of a fixed number of trampolines, which knows its slot. A keyval's
 * callbacks get the keyval's extra state, so there the extra state points to a record of
 * the Fortran functions and the program's own extra state (a record that lives as long as
 * the process: the standard keeps a freed keyval alive while attributes use it). */
#include <pthread.h>
#include <search.h>
#include <stdlib.h>

#include "fortran.h"

static pthread_mutex_t slots_lock = PTHREAD_MUTEX_INITIALIZER;

/* Slot I's trampoline of family F is F_trampoline_A_B, I = 8 * A + B; 64 per family. */
#define EIGHT(T, a) T(a, 0) T(a, 1) T(a, 2) T(a, 3) T(a, 4) T(a, 5) T(a, 6) T(a, 7)
#define ALL(T) EIGHT(T, 0) EIGHT(T, 1) EIGHT(T, 2) EIGHT(T, 3) EIGHT(T, 4) EIGHT(T, 5) \
    EIGHT(T, 6) EIGHT(T, 7)
#define SLOTS 64

/* --- User operators: SUBROUTINE F(INVEC, INOUTVEC, LEN, DATATYPE), the datatype an
 * INTEGER (mpi_f08's form, TYPE(C_PTR), VALUE buffers and TYPE(MPI_Datatype), is the same
 * call at the machine level). MPI_Op_free gives the slot back. */
typedef void (*f_user_fn)(void *invec, void *inoutvec, MPI_Fint *len, MPI_Fint *datatype);
static struct {
    f_user_fn fn; /* NULL: free */
    MPI_Fint op;
} op_slots[SLOTS];

static void op_call(int slot, void *in, void *inout, int *len, MPI_Datatype *datatype)
{
    MPI_Fint f = MPI_Type_toint(*datatype);
    op_slots[slot].fn(in, inout, len, &f);
}
#define OP_T(a, b)                                                                   \
    static void op_trampoline_##a##_##b(void *in, void *inout, int *len,             \
                                        MPI_Datatype *datatype)                      \
    {                                                                                \
        op_call(8 * a + b, in, inout, len, datatype);                                \
    }
ALL(OP_T)
#define OP_R(a, b) op_trampoline_##a##_##b,
static MPI_User_function *const op_trampolines[SLOTS] = {ALL(OP_R)};

void mpi_op_create_(f_user_fn fn, MPI_Fint *commute, MPI_Fint *op, MPI_Fint *ierror)
{
    pthread_mutex_lock(&slots_lock);
    int slot = 0;
    while (slot < SLOTS && op_slots[slot].fn != NULL)
        slot++;
    if (slot == SLOTS) {
        pthread_mutex_unlock(&slots_lock);
        /* More than SLOTS Fortran operators alive at once. */
        *ierror = MPI_ERR_NO_MEM;
        return;
    }
    MPI_Op c = 0;
    int rc = MPI_Op_create(op_trampolines[slot], *commute != 0, &c);
    if (rc == MPI_SUCCESS) {
        op_slots[slot].fn = fn;
        op_slots[slot].op = MPI_Op_toint(c);
        *op = op_slots[slot].op;
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
            if (op_slots[slot].fn != NULL && op_slots[slot].op == was)
                op_slots[slot].fn = NULL;
        pthread_mutex_unlock(&slots_lock);
    }
    *op = MPI_Op_toint(c);
    *ierror = rc;
}

/* --- Error handlers: SUBROUTINE H(OBJECT, ERROR_CODE), both INTEGER. A handler's slot
 * is kept for the process's life (the library may hold a handler freed by the program). */
typedef void (*f_errhandler_fn)(MPI_Fint *object, MPI_Fint *code);
static f_errhandler_fn comm_eh[SLOTS], win_eh[SLOTS], file_eh[SLOTS];
static int comm_eh_used, win_eh_used, file_eh_used;

#define EH_FAMILY(kind, table)                                                              \
    static void kind##_eh_call(int slot, MPI_##kind *object, int *code)                     \
    {                                                                                       \
        MPI_Fint f = MPI_##kind##_toint(*object), c = *code;                                \
        table[slot](&f, &c);                                                                \
    }
EH_FAMILY(Comm, comm_eh)
EH_FAMILY(Win, win_eh)
EH_FAMILY(File, file_eh)
#define COMM_T(a, b)                                                                 \
    static void comm_eh_trampoline_##a##_##b(MPI_Comm *o, int *c, ...)               \
    {                                                                                \
        Comm_eh_call(8 * a + b, o, c);                                               \
    }
#define WIN_T(a, b)                                                                  \
    static void win_eh_trampoline_##a##_##b(MPI_Win *o, int *c, ...)                 \
    {                                                                                \
        Win_eh_call(8 * a + b, o, c);                                                \
    }
#define FILE_T(a, b)                                                                 \
    static void file_eh_trampoline_##a##_##b(MPI_File *o, int *c, ...)               \
    {                                                                                \
        File_eh_call(8 * a + b, o, c);                                               \
    }
ALL(COMM_T)
ALL(WIN_T)
ALL(FILE_T)
#define COMM_R(a, b) comm_eh_trampoline_##a##_##b,
#define WIN_R(a, b) win_eh_trampoline_##a##_##b,
#define FILE_R(a, b) file_eh_trampoline_##a##_##b,
static MPI_Comm_errhandler_function *const comm_eh_trampolines[SLOTS] = {ALL(COMM_R)};
static MPI_Win_errhandler_function *const win_eh_trampolines[SLOTS] = {ALL(WIN_R)};
static MPI_File_errhandler_function *const file_eh_trampolines[SLOTS] = {ALL(FILE_R)};

#define EH_CREATE(lower, kind, table, used)                                              \
    void mpi_##lower##_create_errhandler_(f_errhandler_fn fn, MPI_Fint *errhandler,      \
                                          MPI_Fint *ierror)                              \
    {                                                                                    \
        pthread_mutex_lock(&slots_lock);                                                 \
        if (used == SLOTS) {                                                             \
            pthread_mutex_unlock(&slots_lock);                                           \
            *ierror = MPI_ERR_NO_MEM; /* more than SLOTS handlers of this kind */        \
            return;                                                                      \
        }                                                                                \
        MPI_Errhandler c = 0;                                                            \
        int rc = MPI_##kind##_create_errhandler(lower##_eh_trampolines[used], &c);       \
        if (rc == MPI_SUCCESS) {                                                         \
            table[used++] = fn;                                                          \
            *errhandler = MPI_Errhandler_toint(c);                                       \
        }                                                                                \
        pthread_mutex_unlock(&slots_lock);                                               \
        *ierror = rc;                                                                    \
    }
EH_CREATE(comm, Comm, comm_eh, comm_eh_used)
EH_CREATE(win, Win, win_eh, win_eh_used)
EH_CREATE(file, File, file_eh, file_eh_used)

/* --- Attribute values set in Fortran. The standard (MPI 4.1, 19.3.7) has C read such a
 * value through a pointer to it: a Fortran value is stored in a cell of its own, and the
 * attribute is the cell's address. The cells are kept in a set, so that a value read in
 * Fortran is the cell's content where it is one of them, and the pointer's bits where C
 * set it. A cell is freed when its attribute is deleted through a Fortran keyval. */
static void *cells; /* tsearch's tree of cell addresses */
static pthread_mutex_t cells_lock = PTHREAD_MUTEX_INITIALIZER;

static int cell_cmp(const void *a, const void *b)
{
    return (a > b) - (a < b);
}

static void *cell_new(MPI_Aint value)
{
    MPI_Aint *cell = malloc(sizeof *cell);
    if (cell == NULL)
        return NULL;
    *cell = value;
    pthread_mutex_lock(&cells_lock);
    void *added = tsearch(cell, &cells, cell_cmp);
    pthread_mutex_unlock(&cells_lock);
    if (added == NULL) {
        free(cell);
        return NULL;
    }
    return cell;
}

static int cell_is(void *p)
{
    pthread_mutex_lock(&cells_lock);
    int found = p != NULL && tfind(p, &cells, cell_cmp) != NULL;
    pthread_mutex_unlock(&cells_lock);
    return found;
}

/* The value Fortran sees of an attribute whose C value is P. */
static MPI_Aint cell_value(void *p)
{
    return cell_is(p) ? *(MPI_Aint *)p : (MPI_Aint)p;
}

static void cell_free(void *p)
{
    pthread_mutex_lock(&cells_lock);
    int found = p != NULL && tdelete(p, &cells, cell_cmp) != NULL;
    pthread_mutex_unlock(&cells_lock);
    if (found)
        free(p);
}

/* --- Keyvals. COPY(OLD, KEYVAL, EXTRA_STATE, VALUE_IN, VALUE_OUT, FLAG, IERROR) and
 * DELETE(OBJECT, KEYVAL, VALUE, EXTRA_STATE, IERROR); the values and the extra state are
 * INTEGER(KIND=MPI_ADDRESS_KIND), or INTEGER for MPI_Keyval_create's (mpi1). */
typedef void (*f_copy_fn)(MPI_Fint *old, MPI_Fint *keyval, void *extra, void *in, void *out,
                          MPI_Fint *flag, MPI_Fint *ierror);
typedef void (*f_delete_fn)(MPI_Fint *object, MPI_Fint *keyval, void *value, void *extra,
                            MPI_Fint *ierror);
struct keyval {
    f_copy_fn copy;
    f_delete_fn del;
    MPI_Aint extra;
    int mpi1;
};

static int keyval_copy(MPI_Fint old, int keyval, struct keyval *k, void *in, void *out,
                       int *flag)
{
    MPI_Fint fkey = keyval, fflag = 0, ierr = MPI_SUCCESS;
    MPI_Aint copied = 0;
    if (k->mpi1) {
        MPI_Fint extra = (MPI_Fint)k->extra, vin = (MPI_Fint)cell_value(in), vout = 0;
        k->copy(&old, &fkey, &extra, &vin, &vout, &fflag, &ierr);
        copied = vout;
    } else {
        MPI_Aint extra = k->extra, vin = cell_value(in), vout = 0;
        k->copy(&old, &fkey, &extra, &vin, &vout, &fflag, &ierr);
        copied = vout;
    }
    *flag = fflag != 0;
    if (ierr == MPI_SUCCESS && fflag) {
        void *cell = cell_new(copied);
        if (cell == NULL)
            return MPI_ERR_NO_MEM;
        *(void **)out = cell;
    }
    return ierr;
}

static int keyval_delete(MPI_Fint object, int keyval, void *value, struct keyval *k)
{
    MPI_Fint fkey = keyval, ierr = MPI_SUCCESS;
    if (k->mpi1) {
        MPI_Fint extra = (MPI_Fint)k->extra, v = (MPI_Fint)cell_value(value);
        k->del(&object, &fkey, &v, &extra, &ierr);
    } else {
        MPI_Aint extra = k->extra, v = cell_value(value);
        k->del(&object, &fkey, &v, &extra, &ierr);
    }
    if (ierr == MPI_SUCCESS)
        cell_free(value);
    return ierr;
}

#define KEYVAL_FAMILY(lower, kind, ctype)                                                \
    static int lower##_copy_trampoline(ctype old, int keyval, void *extra, void *in,     \
                                       void *out, int *flag)                             \
    {                                                                                    \
        return keyval_copy(MPI_##kind##_toint(old), keyval, extra, in, out, flag);       \
    }                                                                                    \
    static int lower##_delete_trampoline(ctype object, int keyval, void *value,          \
                                         void *extra)                                    \
    {                                                                                    \
        return keyval_delete(MPI_##kind##_toint(object), keyval, value, extra);          \
    }
KEYVAL_FAMILY(comm, Comm, MPI_Comm)
KEYVAL_FAMILY(type, Type, MPI_Datatype)
KEYVAL_FAMILY(win, Win, MPI_Win)

static struct keyval *keyval_record(f_copy_fn copy, f_delete_fn del, MPI_Aint extra, int mpi1)
{
    struct keyval *k = malloc(sizeof *k);
    if (k != NULL) {
        k->copy = copy;
        k->del = del;
        k->extra = extra;
        k->mpi1 = mpi1;
    }
    return k;
}

#define KEYVAL_CREATE(lower, kind)                                                       \
    void mpi_##lower##_create_keyval_(f_copy_fn copy, f_delete_fn del, MPI_Fint *keyval, \
                                      MPI_Aint *extra_state, MPI_Fint *ierror)           \
    {                                                                                    \
        struct keyval *k = keyval_record(copy, del, *extra_state, 0);                    \
        if (k == NULL) {                                                                 \
            *ierror = MPI_ERR_NO_MEM;                                                    \
            return;                                                                      \
        }                                                                                \
        *ierror = MPI_##kind##_create_keyval(lower##_copy_trampoline,                    \
                                             lower##_delete_trampoline, keyval, k);      \
        if (*ierror != MPI_SUCCESS)                                                      \
            free(k);                                                                     \
    }
KEYVAL_CREATE(comm, Comm)
KEYVAL_CREATE(type, Type)
KEYVAL_CREATE(win, Win)

void mpi_keyval_create_(f_copy_fn copy, f_delete_fn del, MPI_Fint *keyval,
                        MPI_Fint *extra_state, MPI_Fint *ierror)
{
    struct keyval *k = keyval_record(copy, del, *extra_state, 1);
    if (k == NULL) {
        *ierror = MPI_ERR_NO_MEM;
        return;
    }
    *ierror = MPI_Keyval_create(comm_copy_trampoline, comm_delete_trampoline, keyval, k);
    if (*ierror != MPI_SUCCESS)
        free(k);
}

/* The predefined copy and delete functions, as Fortran programs pass them. */
#define NULL_COPY(name, vt)                                                              \
    void name(MPI_Fint *old, MPI_Fint *keyval, vt *extra, vt *in, vt *out,               \
              MPI_Fint *flag, MPI_Fint *ierror)                                          \
    {                                                                                    \
        (void)old, (void)keyval, (void)extra, (void)in, (void)out;                       \
        *flag = 0;                                                                       \
        *ierror = MPI_SUCCESS;                                                           \
    }
#define DUP(name, vt)                                                                    \
    void name(MPI_Fint *old, MPI_Fint *keyval, vt *extra, vt *in, vt *out,               \
              MPI_Fint *flag, MPI_Fint *ierror)                                          \
    {                                                                                    \
        (void)old, (void)keyval, (void)extra;                                            \
        *out = *in;                                                                      \
        *flag = 1;                                                                       \
        *ierror = MPI_SUCCESS;                                                           \
    }
#define NULL_DELETE(name, vt)                                                            \
    void name(MPI_Fint *object, MPI_Fint *keyval, vt *value, vt *extra, MPI_Fint *ierror) \
    {                                                                                    \
        (void)object, (void)keyval, (void)value, (void)extra;                            \
        *ierror = MPI_SUCCESS;                                                           \
    }
NULL_COPY(mpi_comm_null_copy_fn_, MPI_Aint)
NULL_COPY(mpi_type_null_copy_fn_, MPI_Aint)
NULL_COPY(mpi_win_null_copy_fn_, MPI_Aint)
NULL_COPY(mpi_null_copy_fn_, MPI_Fint)
DUP(mpi_comm_dup_fn_, MPI_Aint)
DUP(mpi_type_dup_fn_, MPI_Aint)
DUP(mpi_win_dup_fn_, MPI_Aint)
DUP(mpi_dup_fn_, MPI_Fint)
NULL_DELETE(mpi_comm_null_delete_fn_, MPI_Aint)
NULL_DELETE(mpi_type_null_delete_fn_, MPI_Aint)
NULL_DELETE(mpi_win_null_delete_fn_, MPI_Aint)
NULL_DELETE(mpi_null_delete_fn_, MPI_Fint)

/* --- Attribute values. C stores a void *: a cell's address for a value set in Fortran,
 * whose content Fortran reads; for one set in C, the pointer's bits, except the
 * predefined attributes, C pointers to the value, which Fortran gets itself (the
 * standard's rule for attributes set in C and read in Fortran). */
static MPI_Aint predefined_value(int keyval, void *p)
{
    switch (keyval) {
    case MPI_TAG_UB:
    case MPI_IO:
    case MPI_HOST:
    case MPI_WTIME_IS_GLOBAL:
    case MPI_APPNUM:
    case MPI_LASTUSEDCODE:
    case MPI_UNIVERSE_SIZE:
    case MPI_WIN_DISP_UNIT:
    case MPI_WIN_CREATE_FLAVOR:
    case MPI_WIN_MODEL:
        return *(int *)p;
    case MPI_WIN_SIZE:
        return *(MPI_Aint *)p;
    default: /* MPI_WIN_BASE is the address itself */
        return cell_value(p);
    }
}

#define GET_ATTR(lower, kind)                                                            \
    void mpi_##lower##_get_attr_(MPI_Fint *object, MPI_Fint *keyval, MPI_Aint *value,    \
                                 MPI_Fint *flag, MPI_Fint *ierror)                       \
    {                                                                                    \
        void *p = NULL;                                                                  \
        int c_flag = 0;                                                                  \
        int rc = MPI_##kind##_get_attr(MPI_##kind##_fromint(*object), *keyval, &p,       \
                                       &c_flag);                                         \
        *flag = c_flag != 0;                                                             \
        if (rc == MPI_SUCCESS && c_flag)                                                 \
            *value = predefined_value(*keyval, p);                                       \
        *ierror = rc;                                                                    \
    }
GET_ATTR(comm, Comm)
GET_ATTR(type, Type)
GET_ATTR(win, Win)

void mpi_attr_get_(MPI_Fint *comm, MPI_Fint *keyval, MPI_Fint *value, MPI_Fint *flag,
                   MPI_Fint *ierror)
{
    void *p = NULL;
    int c_flag = 0;
    int rc = MPI_Attr_get(MPI_Comm_fromint(*comm), *keyval, &p, &c_flag);
    *flag = c_flag != 0;
    if (rc == MPI_SUCCESS && c_flag)
        *value = (MPI_Fint)predefined_value(*keyval, p);
    *ierror = rc;
}

#define SET_ATTR(lower, kind)                                                            \
    void mpi_##lower##_set_attr_(MPI_Fint *object, MPI_Fint *keyval, MPI_Aint *value,    \
                                 MPI_Fint *ierror)                                       \
    {                                                                                    \
        void *cell = cell_new(*value);                                                   \
        if (cell == NULL) {                                                              \
            *ierror = MPI_ERR_NO_MEM;                                                    \
            return;                                                                      \
        }                                                                                \
        *ierror = MPI_##kind##_set_attr(MPI_##kind##_fromint(*object), *keyval, cell);   \
        if (*ierror != MPI_SUCCESS)                                                      \
            cell_free(cell);                                                             \
    }
SET_ATTR(comm, Comm)
SET_ATTR(type, Type)
SET_ATTR(win, Win)

void mpi_attr_put_(MPI_Fint *comm, MPI_Fint *keyval, MPI_Fint *value, MPI_Fint *ierror)
{
    void *cell = cell_new(*value);
    if (cell == NULL) {
        *ierror = MPI_ERR_NO_MEM;
        return;
    }
    *ierror = MPI_Attr_put(MPI_Comm_fromint(*comm), *keyval, cell);
    if (*ierror != MPI_SUCCESS)
        cell_free(cell);
}

/* The profiling names. */
PMPI(mpi_op_create)
PMPI(mpi_op_free)
PMPI(mpi_comm_create_errhandler)
PMPI(mpi_win_create_errhandler)
PMPI(mpi_file_create_errhandler)
PMPI(mpi_comm_create_keyval)
PMPI(mpi_type_create_keyval)
PMPI(mpi_win_create_keyval)
PMPI(mpi_keyval_create)
PMPI(mpi_comm_get_attr)
PMPI(mpi_type_get_attr)
PMPI(mpi_win_get_attr)
PMPI(mpi_comm_set_attr)
PMPI(mpi_type_set_attr)
PMPI(mpi_win_set_attr)
PMPI(mpi_attr_get)
PMPI(mpi_attr_put)
