"""Module `mpi_f08` of Spools' Fortran layer, written by gen.py from the same table as the
C bindings: the handle types (`TYPE(MPI_Comm)` ... with their MPI_VAL, `==` and `/=`),
`TYPE(MPI_Status)` (the ABI's status, bind(C)), the constants, and one module procedure per
row that calls the row's C binding (`mpi_send_`) through a bind(C) interface:

- choice buffers are `TYPE(*), DIMENSION(..), CONTIGUOUS` (MPI_SUBARRAYS_SUPPORTED is
  .FALSE.: a non-contiguous section is copied in and out by the compiler around a blocking
  call, as with the `mpi` module), passed as their base address (support.c);
- a handle is passed by reference, which is its MPI_VAL's address: the C binding's
  INTEGER handle; a status is the ABI's `MPI_Status` in place;
- strings pass their length as the hidden argument gfortran would;
- `ierror` is optional.
"""
import re

ARRAY = re.compile(r"^(\w+)\[(@?\w*)\]([*&]?)$")

MPI1_ONLY = {"MPI_Errhandler_set", "MPI_Errhandler_get", "MPI_Keyval_free"}
KINDS = {"Aint": "MPI_ADDRESS_KIND", "Offset": "MPI_OFFSET_KIND", "Count": "MPI_COUNT_KIND"}


def arg_decls(kind, p, handles):
    """(the module procedure's declaration of P, the interface's, the actual argument,
    hidden length argument or None)."""
    m = ARRAY.match(kind)
    if m:
        base, _, mark = m.groups()
        out = mark != ""
        intent = "" if out else ", intent(in)"
        if base in handles:
            t = "type(MPI_%s)" % base
            intent = ", intent(inout)" if mark == "&" else intent
            return ("%s%s :: %s(*)" % (t, intent, p), "%s :: %s(*)" % (t, p), p, None)
        if base == "status":
            return ("type(MPI_Status) :: %s(*)" % p, "type(MPI_Status) :: %s(*)" % p, p, None)
        if base == "str":
            return ("character(len=*), intent(out) :: %s" % p,
                    "character(kind=c_char) :: %s(*)" % p, p, p)
        if base in ("int", "index"):
            return ("integer%s :: %s(*)" % (intent, p), "integer(c_int) :: %s(*)" % p, p, None)
        if base == "logical":
            return ("logical%s :: %s(*)" % (intent, p), "logical :: %s(*)" % p, p, None)
        t = "integer(%s)" % KINDS[base]
        return ("%s%s :: %s(*)" % (t, intent, p), "%s :: %s(*)" % (t, p), p, None)
    if kind in ("buf", "cbuf"):
        intent = "inout" if kind == "buf" else "in"
        return ("type(*), dimension(..), contiguous, intent(%s) :: %s" % (intent, p),
                "type(c_ptr), value :: %s" % p, "spools_f08_addr(%s)" % p, None)
    if kind == "ranges":
        return ("integer, intent(in) :: %s(3, *)" % p, "integer(c_int) :: %s(3, *)" % p, p, None)
    if kind == "ptr*":
        return ("integer(MPI_ADDRESS_KIND), intent(out) :: %s" % p,
                "integer(MPI_ADDRESS_KIND) :: %s" % p, p, None)
    if kind in ("weights", "weights*"):
        intent = "in" if kind == "weights" else "inout"
        return ("integer, intent(%s) :: %s(*)" % (intent, p), "integer(c_int) :: %s(*)" % p,
                p, None)
    if kind == "int":
        return ("integer, intent(in) :: %s" % p, "integer(c_int) :: %s" % p, p, None)
    if kind == "logical":
        return ("logical, intent(in) :: %s" % p, "logical :: %s" % p, p, None)
    if kind in ("int*", "index*"):
        return ("integer, intent(out) :: %s" % p, "integer(c_int) :: %s" % p, p, None)
    if kind == "logical*":
        return ("logical, intent(out) :: %s" % p, "logical :: %s" % p, p, None)
    if kind in KINDS:
        t = "integer(%s)" % KINDS[kind]
        return ("%s, intent(in) :: %s" % (t, p), "%s :: %s" % (t, p), p, None)
    if kind.rstrip("*") in KINDS:
        t = "integer(%s)" % KINDS[kind.rstrip("*")]
        return ("%s, intent(out) :: %s" % (t, p), "%s :: %s" % (t, p), p, None)
    if kind == "status*":
        return ("type(MPI_Status) :: %s" % p, "type(MPI_Status) :: %s" % p, p, None)
    if kind == "cstatus":
        return ("type(MPI_Status), intent(in) :: %s" % p, "type(MPI_Status) :: %s" % p, p, None)
    if kind == "str":
        return ("character(len=*), intent(in) :: %s" % p,
                "character(kind=c_char) :: %s(*)" % p, p, p)
    base = kind.rstrip("*&")
    if base in handles:
        intent = {"": "in", "*": "out", "&": "inout"}[kind[len(base):]]
        return ("type(MPI_%s), intent(%s) :: %s" % (base, intent, p),
                "type(MPI_%s) :: %s" % (base, p), p, None)
    raise SystemExit("f08.py: unknown parameter kind %r" % kind)


SIZEOF_TYPES = [("integer", k) for k in (1, 2, 4, 8)] + [("real", k) for k in (4, 8)] + \
    [("complex", k) for k in (4, 8)] + [("logical", k) for k in (1, 2, 4, 8)] + \
    [("character", 1)]


def sizeof_procedures():
    """MPI_SIZEOF(X, SIZE, IERROR), for modules mpi and mpi_f08: a generic over every
    intrinsic type and kind, of any rank (the size of one element). Gives the lines of the
    generic interface and those of the specific procedures (after `contains`)."""
    specifics = ["spools_sizeof_%s%d" % (t, k) for t, k in SIZEOF_TYPES]
    head = ["interface MPI_Sizeof", "module procedure %s" % ", ".join(specifics),
            "end interface", "private :: %s" % ", ".join(specifics)]
    body = []
    for (t, k), sp in zip(SIZEOF_TYPES, specifics):
        decl = "character(len=*)" if t == "character" else "%s(kind=%d)" % (t, k)
        body += ["subroutine %s(x, size, ierror)" % sp,
                 "%s, dimension(..), intent(in) :: x" % decl,
                 "integer, intent(out) :: size",
                 "integer, optional, intent(out) :: ierror",
                 "size = 1" if t == "character" else "size = storage_size(x) / 8",
                 "if (present(ierror)) ierror = MPI_SUCCESS",
                 "end subroutine"]
    return head, body


def procedure(name, params, handles):
    """The interface block of the row's C binding and the module procedure over it."""
    decls, idecls, actuals, lens = [], [], [], []
    for kind, p in params:
        d, i, a, l = arg_decls(kind, p, handles)
        decls.append(d)
        idecls.append(i)
        actuals.append(a)
        if l:
            lens.append(l)
    names = [p for _, p in params]
    cname = "c_" + name.lower()
    iface = ["  subroutine %s(%s) bind(C, name=\"%s_\")"
             % (cname, ", ".join(names + ["ierror"] + ["%s_len" % l for l in lens]),
                name.lower()),
             "    import"]
    iface += ["    " + d for d in idecls]
    iface.append("    integer(c_int) :: ierror")
    iface += ["    integer(c_size_t), value :: %s_len" % l for l in lens]
    iface.append("  end subroutine")
    proc = ["subroutine %s(%s)" % (name, ", ".join(names + ["ierror"]))]
    proc += ["  " + d for d in decls]
    proc.append("  integer, optional, intent(out) :: ierror")
    proc.append("  integer :: e")
    call = actuals + ["e"] + ["len(%s, kind=c_size_t)" % l for l in lens]
    proc.append("  call %s(%s)" % (cname, ", ".join(call)))
    proc.append("  if (present(ierror)) ierror = e")
    proc.append("end subroutine")
    return iface, proc


def wrap(line, width=130):
    """Free-form lines of at most WIDTH columns, continued with &."""
    out = []
    while len(line) > width:
        cut = line.rfind(", ", 0, width - 2)
        if cut <= 0:
            break
        out.append(line[:cut + 1] + " &")
        line = "    " + line[cut + 2:]
    out.append(line)
    return out


def module(rows, handle_consts, int_consts, handles):
    """The text of mpi_f08.f90. HANDLE_CONSTS: (name, kind, value); INT_CONSTS: (name, value)."""
    m = ["! Module mpi_f08 of Spools' Fortran layer (generated by gen.py and f08.py: do not edit).",
         "module mpi_f08",
         "use, intrinsic :: iso_c_binding, only: c_int, c_ptr, c_funptr, c_char, c_size_t, c_funloc",
         "implicit none",
         "private :: c_int, c_ptr, c_funptr, c_char, c_size_t, c_funloc"]
    for kind in handles:
        m += ["type, bind(C) :: MPI_%s" % kind, "  integer(c_int) :: MPI_VAL", "end type"]
    m += ["type, bind(C) :: MPI_Status",
          "  integer(c_int) :: MPI_SOURCE, MPI_TAG, MPI_ERROR",
          "  integer(c_int) :: mpi_abi_slot(5)",
          "end type"]
    for n, v in int_consts:
        m.append("integer, parameter :: %s = %d" % (n, v))
    m += ["integer(MPI_OFFSET_KIND), parameter :: MPI_DISPLACEMENT_CURRENT = -1",
          "logical, parameter :: MPI_SUBARRAYS_SUPPORTED = .false.",
          "logical, parameter :: MPI_ASYNC_PROTECTS_NONBLOCKING = .false."]
    for n, kind, v in handle_consts:
        m.append("type(MPI_%s), parameter :: %s = MPI_%s(%d)" % (kind, n, kind, v))
    # The sentinels: the same common blocks as mpif.h's, defined by support.c.
    m += ["integer :: MPI_BOTTOM, MPI_IN_PLACE",
          "common /spools_bottom/ MPI_BOTTOM",
          "common /spools_in_place/ MPI_IN_PLACE",
          "type(MPI_Status) :: MPI_STATUS_IGNORE, MPI_STATUSES_IGNORE(1)",
          "common /spools_status_ignore/ MPI_STATUS_IGNORE",
          "common /spools_statuses_ignore/ MPI_STATUSES_IGNORE",
          "integer :: MPI_ERRCODES_IGNORE(1), MPI_UNWEIGHTED(1), MPI_WEIGHTS_EMPTY(1)",
          "common /spools_errcodes_ignore/ MPI_ERRCODES_IGNORE",
          "common /spools_unweighted/ MPI_UNWEIGHTED",
          "common /spools_weights_empty/ MPI_WEIGHTS_EMPTY",
          "character(len=1) :: MPI_ARGV_NULL(1), MPI_ARGVS_NULL(1,1)",
          "common /spools_argv_null/ MPI_ARGV_NULL",
          "common /spools_argvs_null/ MPI_ARGVS_NULL"]
    m += ["abstract interface",
          "  subroutine MPI_User_function(invec, inoutvec, len, datatype)",
          "    import",
          "    type(c_ptr), value :: invec, inoutvec",
          "    integer(c_int) :: len",
          "    type(MPI_Datatype) :: datatype",
          "  end subroutine",
          "end interface"]
    for op, fn in (("==", "eq"), ("/=", "ne")):
        m.append("interface operator(%s)" % op)
        m.append("  module procedure %s" % ", ".join("spools_%s_%s" % (fn, k.lower())
                                                     for k in handles))
        m.append("end interface")
    ifaces, procs = [], []
    for name, params in rows:
        if name in MPI1_ONLY or any(k.startswith("aint32") for k, _ in params):
            continue  # calls removed in MPI 3.0: mpi_f08 never had them
        i, p = procedure(name, params, handles)
        ifaces += i
        procs += p
    m.append("interface")
    m += ifaces
    m += ["  function spools_f08_addr(buf) bind(C, name=\"spools_f08_addr\") result(p)",
          "    import",
          "    type(*), dimension(..), contiguous :: buf",
          "    type(c_ptr) :: p",
          "  end function",
          "  subroutine c_mpi_init(ierror) bind(C, name=\"mpi_init_\")",
          "    import",
          "    integer(c_int) :: ierror",
          "  end subroutine",
          "  subroutine c_mpi_init_thread(required, provided, ierror) bind(C, name=\"mpi_init_thread_\")",
          "    import",
          "    integer(c_int) :: required, provided, ierror",
          "  end subroutine",
          "  function c_mpi_wtime() bind(C, name=\"mpi_wtime_\") result(t)",
          "    import",
          "    double precision :: t",
          "  end function",
          "  function c_mpi_wtick() bind(C, name=\"mpi_wtick_\") result(t)",
          "    import",
          "    double precision :: t",
          "  end function",
          "  subroutine c_mpi_op_create(user_fn, commute, op, ierror) bind(C, name=\"mpi_op_create_\")",
          "    import",
          "    type(c_funptr), value :: user_fn",
          "    logical :: commute",
          "    type(MPI_Op) :: op",
          "    integer(c_int) :: ierror",
          "  end subroutine",
          "  subroutine c_mpi_comm_spawn(command, argv, maxprocs, info, root, comm, intercomm, codes, &",
          "      ierror, command_len, argv_len) bind(C, name=\"mpi_comm_spawn_\")",
          "    import",
          "    character(kind=c_char) :: command(*), argv(*)",
          "    integer(c_int) :: maxprocs, root, codes(*), ierror",
          "    type(MPI_Info) :: info",
          "    type(MPI_Comm) :: comm, intercomm",
          "    integer(c_size_t), value :: command_len, argv_len",
          "  end subroutine",
          "  subroutine c_mpi_comm_spawn_multiple(count, commands, argvs, maxprocs, infos, root, comm, &",
          "      intercomm, codes, ierror, commands_len, argvs_len) bind(C, name=\"mpi_comm_spawn_multiple_\")",
          "    import",
          "    integer(c_int) :: count, maxprocs(*), root, codes(*), ierror",
          "    character(kind=c_char) :: commands(*), argvs(*)",
          "    type(MPI_Info) :: infos(*)",
          "    type(MPI_Comm) :: comm, intercomm",
          "    integer(c_size_t), value :: commands_len, argvs_len",
          "  end subroutine",
          "  subroutine c_mpi_op_free(op, ierror) bind(C, name=\"mpi_op_free_\")",
          "    import",
          "    type(MPI_Op) :: op",
          "    integer(c_int) :: ierror",
          "  end subroutine",
          "end interface",
          "private :: spools_f08_addr"]
    head, body = sizeof_procedures()
    m += head
    m.append("contains")
    m += body
    for k in handles:
        for fn, op in (("eq", "=="), ("ne", "/=")):
            m += ["logical function spools_%s_%s(a, b)" % (fn, k.lower()),
                  "  type(MPI_%s), intent(in) :: a, b" % k,
                  "  spools_%s_%s = a%%MPI_VAL %s b%%MPI_VAL" % (fn, k.lower(), op),
                  "end function"]
    m += ["subroutine MPI_Init(ierror)",
          "  integer, optional, intent(out) :: ierror",
          "  integer :: e",
          "  call c_mpi_init(e)",
          "  if (present(ierror)) ierror = e",
          "end subroutine",
          "subroutine MPI_Init_thread(required, provided, ierror)",
          "  integer, intent(in) :: required",
          "  integer, intent(out) :: provided",
          "  integer, optional, intent(out) :: ierror",
          "  integer :: e",
          "  call c_mpi_init_thread(required, provided, e)",
          "  if (present(ierror)) ierror = e",
          "end subroutine",
          "double precision function MPI_Wtime()",
          "  MPI_Wtime = c_mpi_wtime()",
          "end function",
          "double precision function MPI_Wtick()",
          "  MPI_Wtick = c_mpi_wtick()",
          "end function",
          "subroutine MPI_Op_create(user_fn, commute, op, ierror)",
          "  procedure(MPI_User_function) :: user_fn",
          "  logical, intent(in) :: commute",
          "  type(MPI_Op), intent(out) :: op",
          "  integer, optional, intent(out) :: ierror",
          "  integer :: e",
          "  call c_mpi_op_create(c_funloc(user_fn), commute, op, e)",
          "  if (present(ierror)) ierror = e",
          "end subroutine",
          # MPI_Comm_spawn(_multiple): CHARACTER argument arrays, each ended by a blank
          # element (MPI_ARGV_NULL, MPI_ARGVS_NULL: support.c).
          "subroutine MPI_Comm_spawn(command, argv, maxprocs, info, root, comm, intercomm, &",
          "    array_of_errcodes, ierror)",
          "  character(len=*), intent(in) :: command, argv(*)",
          "  integer, intent(in) :: maxprocs, root",
          "  type(MPI_Info), intent(in) :: info",
          "  type(MPI_Comm), intent(in) :: comm",
          "  type(MPI_Comm), intent(out) :: intercomm",
          "  integer :: array_of_errcodes(*)",
          "  integer, optional, intent(out) :: ierror",
          "  integer :: e",
          "  call c_mpi_comm_spawn(command, argv, maxprocs, info, root, comm, intercomm, &",
          "      array_of_errcodes, e, len(command, kind=c_size_t), len(argv, kind=c_size_t))",
          "  if (present(ierror)) ierror = e",
          "end subroutine",
          "subroutine MPI_Comm_spawn_multiple(count, array_of_commands, array_of_argv, &",
          "    array_of_maxprocs, array_of_info, root, comm, intercomm, array_of_errcodes, ierror)",
          "  integer, intent(in) :: count, root",
          "  character(len=*), intent(in) :: array_of_commands(*), array_of_argv(count, *)",
          "  integer, intent(in) :: array_of_maxprocs(*)",
          "  type(MPI_Info), intent(in) :: array_of_info(*)",
          "  type(MPI_Comm), intent(in) :: comm",
          "  type(MPI_Comm), intent(out) :: intercomm",
          "  integer :: array_of_errcodes(*)",
          "  integer, optional, intent(out) :: ierror",
          "  integer :: e",
          "  call c_mpi_comm_spawn_multiple(count, array_of_commands, array_of_argv, &",
          "      array_of_maxprocs, array_of_info, root, comm, intercomm, array_of_errcodes, e, &",
          "      len(array_of_commands, kind=c_size_t), len(array_of_argv, kind=c_size_t))",
          "  if (present(ierror)) ierror = e",
          "end subroutine",
          "subroutine MPI_Op_free(op, ierror)",
          "  type(MPI_Op), intent(inout) :: op",
          "  integer, optional, intent(out) :: ierror",
          "  integer :: e",
          "  call c_mpi_op_free(op, e)",
          "  if (present(ierror)) ierror = e",
          "end subroutine"]
    m += procs
    m.append("end module mpi_f08")
    out = []
    for line in m:
        out += wrap(line)
    return "\n".join(out) + "\n"
