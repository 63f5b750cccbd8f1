//! The MPI 5.0 standard ABI (the standard's Appendix "ABI"): C types, handle encodings,
//! predefined handles and integer constants, as the standard fixes them. The
//! `abi_constants` test compares every value, `sizeof` and field offset here with a C
//! program compiled against another implementation's `mpi_abi.h` (PyPI's MPICH wheel).
//!
//! Handles are pointer-sized: the predefined ones are the small integers the standard
//! gives (all below 0x400); those Spools makes are `kind << 24 | index` (see
//! `handles.rs`), so that `MPI_Comm_toint` and `MPI_Comm_fromint` are exact.
#![allow(non_camel_case_types, non_upper_case_globals, missing_docs)]

use std::ffi::c_int;

/// `MPI_Aint`: `intptr_t`.
pub type MPI_Aint = isize;
/// `MPI_Offset`: 64-bit.
pub type MPI_Offset = i64;
/// `MPI_Count`: as `MPI_Offset`.
pub type MPI_Count = i64;
/// `MPI_Fint`: Fortran's default INTEGER.
pub type MPI_Fint = c_int;

/// `MPI_Comm`, and the other handles: a pointer-sized opaque value.
pub type MPI_Comm = usize;
pub type MPI_Datatype = usize;
pub type MPI_Op = usize;
pub type MPI_Group = usize;
pub type MPI_Win = usize;
pub type MPI_File = usize;
pub type MPI_Session = usize;
pub type MPI_Message = usize;
pub type MPI_Info = usize;
pub type MPI_Errhandler = usize;
pub type MPI_Request = usize;
pub type MPI_T_enum = usize;
pub type MPI_T_cvar_handle = usize;
pub type MPI_T_pvar_handle = usize;
pub type MPI_T_pvar_session = usize;
pub type MPI_T_event_registration = usize;
pub type MPI_T_event_instance = usize;

/// `MPI_Status`: three public fields and five implementation slots (32 bytes). Spools
/// keeps the byte count in slots 0 and 1 (low and high halves) and "cancelled" in slot 2.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MPI_Status {
    pub MPI_SOURCE: c_int,
    pub MPI_TAG: c_int,
    pub MPI_ERROR: c_int,
    pub MPI_internal: [c_int; 5],
}

/// Defines integer constants and a table of their names and values (for the oracle
/// test and for `MPI_Error_string`).
macro_rules! constants {
    ($table:ident: $ty:ty { $($name:ident = $value:expr),* $(,)? }) => {
        $(pub const $name: $ty = $value;)*
        /// Every constant of this group, by name.
        pub const $table: &[(&str, i64)] = &[$((stringify!($name), $name as i64)),*];
    };
}

constants!(OPS: MPI_Op {
    MPI_OP_NULL = 0x20, MPI_SUM = 0x21, MPI_MIN = 0x22, MPI_MAX = 0x23, MPI_PROD = 0x24,
    MPI_BAND = 0x28, MPI_BOR = 0x29, MPI_BXOR = 0x2a, MPI_LAND = 0x30, MPI_LOR = 0x31,
    MPI_LXOR = 0x32, MPI_MINLOC = 0x38, MPI_MAXLOC = 0x39, MPI_REPLACE = 0x3c,
    MPI_NO_OP = 0x3d,
});

constants!(OBJECTS: usize {
    MPI_COMM_NULL = 0x100, MPI_COMM_WORLD = 0x101, MPI_COMM_SELF = 0x102,
    MPI_GROUP_NULL = 0x108, MPI_GROUP_EMPTY = 0x109,
    MPI_WIN_NULL = 0x110, MPI_FILE_NULL = 0x118, MPI_SESSION_NULL = 0x120,
    MPI_MESSAGE_NULL = 0x128, MPI_MESSAGE_NO_PROC = 0x129,
    MPI_INFO_NULL = 0x130, MPI_INFO_ENV = 0x131,
    MPI_ERRHANDLER_NULL = 0x140, MPI_ERRORS_ARE_FATAL = 0x141, MPI_ERRORS_ABORT = 0x142,
    MPI_ERRORS_RETURN = 0x143,
    MPI_REQUEST_NULL = 0x180,
});

constants!(DATATYPES: MPI_Datatype {
    MPI_DATATYPE_NULL = 0x200, MPI_AINT = 0x201, MPI_COUNT = 0x202, MPI_OFFSET = 0x203,
    MPI_PACKED = 0x207, MPI_SHORT = 0x208, MPI_INT = 0x209, MPI_LONG = 0x20a,
    MPI_LONG_LONG = 0x20b, MPI_UNSIGNED_SHORT = 0x20c, MPI_UNSIGNED = 0x20d,
    MPI_UNSIGNED_LONG = 0x20e, MPI_UNSIGNED_LONG_LONG = 0x20f, MPI_FLOAT = 0x210,
    MPI_C_FLOAT_COMPLEX = 0x212, MPI_CXX_FLOAT_COMPLEX = 0x213, MPI_DOUBLE = 0x214,
    MPI_C_DOUBLE_COMPLEX = 0x216, MPI_CXX_DOUBLE_COMPLEX = 0x217, MPI_LOGICAL = 0x218,
    MPI_INTEGER = 0x219, MPI_REAL = 0x21a, MPI_COMPLEX = 0x21b,
    MPI_DOUBLE_PRECISION = 0x21c, MPI_DOUBLE_COMPLEX = 0x21d, MPI_CHARACTER = 0x21e,
    MPI_LONG_DOUBLE = 0x220, MPI_C_LONG_DOUBLE_COMPLEX = 0x224,
    MPI_CXX_LONG_DOUBLE_COMPLEX = 0x225, MPI_FLOAT_INT = 0x228, MPI_DOUBLE_INT = 0x229,
    MPI_LONG_INT = 0x22a, MPI_2INT = 0x22b, MPI_SHORT_INT = 0x22c,
    MPI_LONG_DOUBLE_INT = 0x22d, MPI_2REAL = 0x230, MPI_2DOUBLE_PRECISION = 0x231,
    MPI_2INTEGER = 0x232, MPI_C_BOOL = 0x238, MPI_CXX_BOOL = 0x239, MPI_WCHAR = 0x23c,
    MPI_INT8_T = 0x240, MPI_UINT8_T = 0x241, MPI_CHAR = 0x243, MPI_SIGNED_CHAR = 0x244,
    MPI_UNSIGNED_CHAR = 0x245, MPI_BYTE = 0x247, MPI_INT16_T = 0x248, MPI_UINT16_T = 0x249,
    MPI_INT32_T = 0x250, MPI_UINT32_T = 0x251, MPI_INT64_T = 0x258, MPI_UINT64_T = 0x259,
    MPI_LOGICAL1 = 0x2c0, MPI_INTEGER1 = 0x2c1, MPI_LOGICAL2 = 0x2c8, MPI_INTEGER2 = 0x2c9,
    MPI_REAL2 = 0x2ca, MPI_LOGICAL4 = 0x2d0, MPI_INTEGER4 = 0x2d1, MPI_REAL4 = 0x2d2,
    MPI_COMPLEX4 = 0x2d3, MPI_LOGICAL8 = 0x2d8, MPI_INTEGER8 = 0x2d9, MPI_REAL8 = 0x2da,
    MPI_COMPLEX8 = 0x2db, MPI_LOGICAL16 = 0x2e0, MPI_INTEGER16 = 0x2e1, MPI_REAL16 = 0x2e2,
    MPI_COMPLEX16 = 0x2e3, MPI_COMPLEX32 = 0x2eb,
});

constants!(ERROR_CLASSES: c_int {
    MPI_SUCCESS = 0, MPI_ERR_BUFFER = 1, MPI_ERR_COUNT = 2, MPI_ERR_TYPE = 3, MPI_ERR_TAG = 4,
    MPI_ERR_COMM = 5, MPI_ERR_RANK = 6, MPI_ERR_REQUEST = 7, MPI_ERR_ROOT = 8,
    MPI_ERR_GROUP = 9, MPI_ERR_OP = 10, MPI_ERR_TOPOLOGY = 11, MPI_ERR_DIMS = 12,
    MPI_ERR_ARG = 13, MPI_ERR_UNKNOWN = 14, MPI_ERR_TRUNCATE = 15, MPI_ERR_OTHER = 16,
    MPI_ERR_INTERN = 17, MPI_ERR_PENDING = 18, MPI_ERR_IN_STATUS = 19, MPI_ERR_ACCESS = 20,
    MPI_ERR_AMODE = 21, MPI_ERR_ASSERT = 22, MPI_ERR_BAD_FILE = 23, MPI_ERR_BASE = 24,
    MPI_ERR_CONVERSION = 25, MPI_ERR_DISP = 26, MPI_ERR_DUP_DATAREP = 27,
    MPI_ERR_FILE_EXISTS = 28, MPI_ERR_FILE_IN_USE = 29, MPI_ERR_FILE = 30,
    MPI_ERR_INFO_KEY = 31, MPI_ERR_INFO_NOKEY = 32, MPI_ERR_INFO_VALUE = 33,
    MPI_ERR_INFO = 34, MPI_ERR_IO = 35, MPI_ERR_KEYVAL = 36, MPI_ERR_LOCKTYPE = 37,
    MPI_ERR_NAME = 38, MPI_ERR_NO_MEM = 39, MPI_ERR_NOT_SAME = 40, MPI_ERR_NO_SPACE = 41,
    MPI_ERR_NO_SUCH_FILE = 42, MPI_ERR_PORT = 43, MPI_ERR_QUOTA = 44,
    MPI_ERR_READ_ONLY = 45, MPI_ERR_RMA_ATTACH = 46, MPI_ERR_RMA_CONFLICT = 47,
    MPI_ERR_RMA_RANGE = 48, MPI_ERR_RMA_SHARED = 49, MPI_ERR_RMA_SYNC = 50,
    MPI_ERR_SERVICE = 51, MPI_ERR_SIZE = 52, MPI_ERR_SPAWN = 53,
    MPI_ERR_UNSUPPORTED_DATAREP = 54, MPI_ERR_UNSUPPORTED_OPERATION = 55, MPI_ERR_WIN = 56,
    MPI_ERR_RMA_FLAVOR = 57, MPI_ERR_PROC_ABORTED = 58, MPI_ERR_VALUE_TOO_LARGE = 59,
    MPI_ERR_SESSION = 60, MPI_ERR_ERRHANDLER = 61, MPI_ERR_ABI = 62,
    MPI_T_ERR_NOT_SUPPORTED = 1004,
    MPI_ERR_LASTCODE = 0x3fff,
});

constants!(INTEGERS: c_int {
    MPI_VERSION = 5, MPI_SUBVERSION = 0, MPI_ABI_VERSION = 1, MPI_ABI_SUBVERSION = 0,
    MPI_F_STATUS_SIZE = 8, MPI_F_SOURCE = 0, MPI_F_TAG = 1, MPI_F_ERROR = 2,
    MPI_MAX_DATAREP_STRING = 128, MPI_MAX_ERROR_STRING = 512, MPI_MAX_INFO_KEY = 256,
    MPI_MAX_INFO_VAL = 1024, MPI_MAX_LIBRARY_VERSION_STRING = 8192,
    MPI_MAX_OBJECT_NAME = 128, MPI_MAX_PORT_NAME = 1024, MPI_MAX_PROCESSOR_NAME = 256,
    MPI_MAX_STRINGTAG_LEN = 1024, MPI_MAX_PSET_NAME_LEN = 1024, MPI_BSEND_OVERHEAD = 512,
    MPI_MODE_APPEND = 1, MPI_MODE_CREATE = 2, MPI_MODE_DELETE_ON_CLOSE = 4,
    MPI_MODE_EXCL = 8, MPI_MODE_RDONLY = 16, MPI_MODE_RDWR = 32, MPI_MODE_SEQUENTIAL = 64,
    MPI_MODE_UNIQUE_OPEN = 128, MPI_MODE_WRONLY = 256, MPI_MODE_NOCHECK = 1024,
    MPI_MODE_NOPRECEDE = 2048, MPI_MODE_NOPUT = 4096, MPI_MODE_NOSTORE = 8192,
    MPI_MODE_NOSUCCEED = 16384,
    MPI_ANY_SOURCE = -1, MPI_ANY_TAG = -2, MPI_PROC_NULL = -3, MPI_ROOT = -4,
    MPI_UNDEFINED = -32766,
    MPI_THREAD_SINGLE = 0, MPI_THREAD_FUNNELED = 1024, MPI_THREAD_SERIALIZED = 2048,
    MPI_THREAD_MULTIPLE = 4096,
    MPI_ORDER_C = 12, MPI_ORDER_FORTRAN = 15,
    MPI_DISTRIBUTE_NONE = 16, MPI_DISTRIBUTE_BLOCK = 17, MPI_DISTRIBUTE_CYCLIC = 18,
    MPI_DISTRIBUTE_DFLT_DARG = 19,
    MPI_COMBINER_NAMED = 101, MPI_COMBINER_DUP = 102, MPI_COMBINER_CONTIGUOUS = 103,
    MPI_COMBINER_VECTOR = 104, MPI_COMBINER_HVECTOR = 105, MPI_COMBINER_INDEXED = 106,
    MPI_COMBINER_HINDEXED = 107, MPI_COMBINER_INDEXED_BLOCK = 108,
    MPI_COMBINER_HINDEXED_BLOCK = 109, MPI_COMBINER_STRUCT = 110,
    MPI_COMBINER_SUBARRAY = 111, MPI_COMBINER_DARRAY = 112, MPI_COMBINER_F90_REAL = 113,
    MPI_COMBINER_F90_COMPLEX = 114, MPI_COMBINER_F90_INTEGER = 115, MPI_COMBINER_RESIZED = 116,
    MPI_COMBINER_VALUE_INDEX = 117,
    MPI_TYPECLASS_INTEGER = 192, MPI_TYPECLASS_REAL = 193, MPI_TYPECLASS_COMPLEX = 194,
    MPI_IDENT = 201, MPI_CONGRUENT = 202, MPI_SIMILAR = 203, MPI_UNEQUAL = 204,
    MPI_CART = 211, MPI_GRAPH = 212, MPI_DIST_GRAPH = 213,
    MPI_COMM_TYPE_SHARED = 221, MPI_COMM_TYPE_HW_UNGUIDED = 222,
    MPI_COMM_TYPE_HW_GUIDED = 223, MPI_COMM_TYPE_RESOURCE_GUIDED = 224,
    MPI_LOCK_EXCLUSIVE = 301, MPI_LOCK_SHARED = 302,
    MPI_WIN_FLAVOR_CREATE = 311, MPI_WIN_FLAVOR_ALLOCATE = 312,
    MPI_WIN_FLAVOR_DYNAMIC = 313, MPI_WIN_FLAVOR_SHARED = 314,
    MPI_WIN_UNIFIED = 321, MPI_WIN_SEPARATE = 322,
    MPI_SEEK_CUR = 401, MPI_SEEK_END = 402, MPI_SEEK_SET = 403,
    MPI_KEYVAL_INVALID = 0, MPI_TAG_UB = 501, MPI_IO = 502, MPI_HOST = 503,
    MPI_WTIME_IS_GLOBAL = 504, MPI_APPNUM = 505, MPI_LASTUSEDCODE = 506,
    MPI_UNIVERSE_SIZE = 507,
    MPI_WIN_BASE = 601, MPI_WIN_DISP_UNIT = 602, MPI_WIN_SIZE = 603,
    MPI_WIN_CREATE_FLAVOR = 604, MPI_WIN_MODEL = 605,
});

constants!(ADDRESSES: usize {
    MPI_BOTTOM = 0, MPI_IN_PLACE = 1, MPI_BUFFER_AUTOMATIC = 2,
    MPI_STATUS_IGNORE = 0, MPI_STATUSES_IGNORE = 0, MPI_ERRCODES_IGNORE = 0,
    MPI_UNWEIGHTED = 10, MPI_WEIGHTS_EMPTY = 11,
});

/// `sizeof` of the ABI's C types, by name (for the oracle test).
pub const SIZES: &[(&str, usize)] = &[
    ("MPI_Aint", std::mem::size_of::<MPI_Aint>()),
    ("MPI_Offset", std::mem::size_of::<MPI_Offset>()),
    ("MPI_Count", std::mem::size_of::<MPI_Count>()),
    ("MPI_Status", std::mem::size_of::<MPI_Status>()),
    ("MPI_Comm", std::mem::size_of::<MPI_Comm>()),
    ("MPI_Datatype", std::mem::size_of::<MPI_Datatype>()),
    ("MPI_Request", std::mem::size_of::<MPI_Request>()),
];

/// Field offsets of `MPI_Status`, by name (for the oracle test).
pub const STATUS_OFFSETS: &[(&str, usize)] = &[
    ("MPI_SOURCE", std::mem::offset_of!(MPI_Status, MPI_SOURCE)),
    ("MPI_TAG", std::mem::offset_of!(MPI_Status, MPI_TAG)),
    ("MPI_ERROR", std::mem::offset_of!(MPI_Status, MPI_ERROR)),
];

/// Every integer constant and predefined handle, by name.
pub fn all_constants() -> impl Iterator<Item = (&'static str, i64)> {
    [OPS, OBJECTS, DATATYPES, ERROR_CLASSES, INTEGERS, ADDRESSES]
        .into_iter()
        .flatten()
        .copied()
}
