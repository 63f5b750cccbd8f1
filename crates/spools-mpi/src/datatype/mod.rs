//! Datatypes: the predefined ones of the ABI and derived ones (contiguous, vector,
//! hvector, indexed, hindexed, indexed_block, hindexed_block, struct, resized, dup),
//! flattened into the byte blocks one element occupies, with packing of non-contiguous
//! buffers.

pub(crate) mod external;
pub(crate) mod runs;
pub(crate) mod typeattr;
pub(crate) mod typector;
pub(crate) mod typeinfo;

use std::ffi::c_int;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use crate::abi::*;
use crate::env::errhandler::on_self;
use crate::env::error::MpiError;
use crate::handles::{Kind, ObjRef, Table};
use crate::out::out;

/// A primitive element type, for reductions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Basic {
    I8,
    U8,
    I16,
    U16,
    I32,
    U32,
    I64,
    U64,
    F32,
    F64,
    /// C `_Bool` / C++ `bool` (one byte, 0 or 1).
    Bool,
    /// `long double` (x86-64: 80-bit extended in 16 bytes).
    LongDouble,
    /// A complex number (two floats, doubles or long doubles).
    Complex,
    /// Bytes with no arithmetic (`MPI_BYTE`, `MPI_PACKED`, `long double`, complex).
    Opaque,
}

/// A datatype: its size, bounds, and where its bytes are within one element.
#[derive(Debug)]
pub(crate) struct TypeObj {
    /// Bytes of data in one element.
    pub(crate) size: usize,
    /// Lower bound and extent (the stride between consecutive elements).
    pub(crate) lb: isize,
    pub(crate) extent: isize,
    /// Bounds of the bytes actually occupied.
    pub(crate) true_lb: isize,
    pub(crate) true_extent: isize,
    /// The data of one element: (offset from the buffer address, length), in order.
    pub(crate) blocks: Vec<(isize, usize)>,
    /// The primitive type every element is made of, when there is exactly one.
    pub(crate) basic: Option<Basic>,
    /// Width of the primitive of `basic`.
    pub(crate) basic_size: usize,
    /// Largest alignment of the primitives inside (for a struct's extent).
    align: usize,
    /// Committed (`MPI_Type_commit`); predefined types always are.
    pub(crate) committed: AtomicBool,
    /// The predefined handle, for a named type.
    pub(crate) named: Option<MPI_Datatype>,
    /// How it was made (`MPI_Type_get_envelope`, `MPI_Type_get_contents`).
    pub(crate) envelope: Envelope,
    /// Its name (`MPI_Type_set_name`).
    pub(crate) name: std::sync::Mutex<String>,
    /// Cached attributes by keyval.
    pub(crate) attrs: crate::comm::attr::Attrs,
    /// How many handles name it (`MPI_Type_get_contents` gives more): its attributes are
    /// deleted when the last is freed.
    handles: AtomicUsize,
    /// As a file view's filetype: why its copies cannot tile a file (`None`: they can),
    /// found at its first `MPI_File_set_view` and kept (`file::View::new`): a view is
    /// checked once per type, not once per call.
    pub(crate) tiling: std::sync::OnceLock<Option<&'static str>>,
    /// `blocks` as strided progressions, made at the first pack or unpack.
    progs: OnceLock<Vec<runs::Prog>>,
}

/// The constructor of a datatype and its arguments, as `MPI_Type_get_contents` gives
/// them back.
#[derive(Debug, Clone, Default)]
pub(crate) struct Envelope {
    /// `MPI_COMBINER_*`.
    pub(crate) combiner: c_int,
    pub(crate) ints: Vec<c_int>,
    pub(crate) aints: Vec<MPI_Aint>,
    pub(crate) counts: Vec<MPI_Count>,
    pub(crate) types: Vec<MPI_Datatype>,
    /// The types of `types`, kept alive: a type made of others stays whole after they
    /// are freed, and its contents are new handles to them.
    pub(crate) keep: Vec<Arc<TypeObj>>,
}

impl TypeObj {
    /// Whether `count` elements are `count * size` bytes at the buffer's address.
    pub(crate) fn contiguous(&self) -> bool {
        self.extent == self.size as isize
            && self.blocks.len() <= 1
            && self.blocks.first().is_none_or(|b| b.0 == 0)
    }

    /// One element's blocks as strided progressions, in packed order.
    pub(crate) fn progs(&self) -> &[runs::Prog] {
        self.progs.get_or_init(|| runs::progressions(&self.blocks))
    }

    /// Packs (`Way::Pack`: from the elements at `base` to `packed`) or unpacks (the
    /// other way) the `len` bytes of data from byte `offset` of the packed message
    /// ([`runs::copy_at`] over this type's progressions).
    ///
    /// # Safety
    /// As [`runs::copy_at`]: the elements those bytes belong to lie at `base` (addresses
    /// formed with wrapping arithmetic, so `MPI_BOTTOM` too), and `packed` holds `len`
    /// bytes, apart from them.
    pub(crate) unsafe fn copy_at(
        &self,
        way: runs::Way,
        base: *mut u8,
        offset: usize,
        packed: *mut u8,
        len: usize,
    ) {
        // SAFETY: the caller's contract.
        unsafe {
            runs::copy_at(
                way,
                self.progs(),
                self.size,
                self.extent,
                base,
                offset,
                packed,
                len,
            )
        }
    }

    fn named(h: MPI_Datatype, size: usize, basic: Basic, basic_size: usize) -> TypeObj {
        TypeObj {
            size,
            lb: 0,
            extent: size as isize,
            true_lb: 0,
            true_extent: size as isize,
            blocks: if size > 0 {
                vec![(0, size)]
            } else {
                Vec::new()
            },
            basic: Some(basic),
            basic_size,
            // A complex number aligns as its halves do in C (a `float _Complex` on 4).
            align: if basic == Basic::Complex {
                (basic_size / 2).clamp(1, 16)
            } else {
                basic_size.clamp(1, 16)
            },
            committed: AtomicBool::new(true),
            named: Some(h),
            envelope: Envelope {
                combiner: MPI_COMBINER_NAMED,
                ..Envelope::default()
            },
            name: std::sync::Mutex::new(String::new()),
            attrs: crate::comm::attr::Attrs::default(),
            handles: AtomicUsize::new(1),
            tiling: std::sync::OnceLock::new(),
            progs: OnceLock::new(),
        }
    }

    fn pair(h: MPI_Datatype, a: usize, b_off: usize, b: usize, extent: usize) -> TypeObj {
        TypeObj {
            size: a + b,
            lb: 0,
            extent: extent as isize,
            true_lb: 0,
            true_extent: (b_off + b) as isize,
            blocks: if b_off == a {
                vec![(0, a + b)]
            } else {
                vec![(0, a), (b_off as isize, b)]
            },
            basic: None,
            basic_size: 0,
            align: a.max(b).min(16),
            committed: AtomicBool::new(true),
            named: Some(h),
            envelope: Envelope {
                combiner: MPI_COMBINER_NAMED,
                ..Envelope::default()
            },
            name: std::sync::Mutex::new(String::new()),
            attrs: crate::comm::attr::Attrs::default(),
            handles: AtomicUsize::new(1),
            tiling: std::sync::OnceLock::new(),
            progs: OnceLock::new(),
        }
    }
}

/// Predefined datatype handles are below this (the standard ABI's small integers).
const PREDEFINED_LIMIT: MPI_Datatype = 0x400;

/// The predefined datatypes indexed by handle: every call looks its datatype up, so the
/// look-up is one index, not a search.
fn predefined_by_handle() -> &'static [Option<Arc<TypeObj>>] {
    static T: OnceLock<Vec<Option<Arc<TypeObj>>>> = OnceLock::new();
    T.get_or_init(|| {
        let mut v = vec![None; PREDEFINED_LIMIT];
        for (h, t) in predefined_table() {
            if let Some(slot) = v.get_mut(*h) {
                *slot = Some(t.clone());
            }
        }
        v
    })
}

/// The predefined datatype of handle `h`, borrowed (no reference count taken): `None`
/// for any other handle, derived or invalid.
#[inline]
pub(crate) fn predefined(h: MPI_Datatype) -> Option<&'static TypeObj> {
    predefined_by_handle().get(h)?.as_deref()
}

fn predefined_table() -> &'static Vec<(MPI_Datatype, Arc<TypeObj>)> {
    static T: OnceLock<Vec<(MPI_Datatype, Arc<TypeObj>)>> = OnceLock::new();
    T.get_or_init(|| {
        use Basic::*;
        let named: &[(MPI_Datatype, usize, Basic)] = &[
            (MPI_AINT, 8, I64),
            (MPI_COUNT, 8, I64),
            (MPI_OFFSET, 8, I64),
            (MPI_PACKED, 1, Opaque),
            (MPI_SHORT, 2, I16),
            (MPI_INT, 4, I32),
            (MPI_LONG, 8, I64),
            (MPI_LONG_LONG, 8, I64),
            (MPI_UNSIGNED_SHORT, 2, U16),
            (MPI_UNSIGNED, 4, U32),
            (MPI_UNSIGNED_LONG, 8, U64),
            (MPI_UNSIGNED_LONG_LONG, 8, U64),
            (MPI_FLOAT, 4, F32),
            (MPI_DOUBLE, 8, F64),
            (MPI_LONG_DOUBLE, 16, LongDouble),
            (MPI_C_FLOAT_COMPLEX, 8, Complex),
            (MPI_CXX_FLOAT_COMPLEX, 8, Complex),
            (MPI_C_DOUBLE_COMPLEX, 16, Complex),
            (MPI_CXX_DOUBLE_COMPLEX, 16, Complex),
            (MPI_C_LONG_DOUBLE_COMPLEX, 32, Complex),
            (MPI_CXX_LONG_DOUBLE_COMPLEX, 32, Complex),
            (MPI_LOGICAL, 4, I32),
            (MPI_INTEGER, 4, I32),
            (MPI_REAL, 4, F32),
            (MPI_COMPLEX, 8, Complex),
            (MPI_DOUBLE_PRECISION, 8, F64),
            (MPI_DOUBLE_COMPLEX, 16, Complex),
            (MPI_CHARACTER, 1, Opaque),
            (MPI_C_BOOL, 1, Bool),
            (MPI_CXX_BOOL, 1, Bool),
            (MPI_WCHAR, 4, I32),
            (MPI_INT8_T, 1, I8),
            (MPI_UINT8_T, 1, U8),
            (MPI_CHAR, 1, I8),
            (MPI_SIGNED_CHAR, 1, I8),
            (MPI_UNSIGNED_CHAR, 1, U8),
            (MPI_BYTE, 1, Opaque),
            (MPI_INT16_T, 2, I16),
            (MPI_UINT16_T, 2, U16),
            (MPI_INT32_T, 4, I32),
            (MPI_UINT32_T, 4, U32),
            (MPI_INT64_T, 8, I64),
            (MPI_UINT64_T, 8, U64),
            (MPI_LOGICAL1, 1, I8),
            (MPI_INTEGER1, 1, I8),
            (MPI_LOGICAL2, 2, I16),
            (MPI_INTEGER2, 2, I16),
            (MPI_REAL2, 2, Opaque),
            (MPI_LOGICAL4, 4, I32),
            (MPI_INTEGER4, 4, I32),
            (MPI_REAL4, 4, F32),
            (MPI_COMPLEX4, 4, Opaque),
            (MPI_LOGICAL8, 8, I64),
            (MPI_INTEGER8, 8, I64),
            (MPI_REAL8, 8, F64),
            (MPI_COMPLEX8, 8, Complex),
            (MPI_LOGICAL16, 16, Opaque),
            (MPI_INTEGER16, 16, Opaque),
            (MPI_REAL16, 16, LongDouble),
            (MPI_COMPLEX16, 16, Complex),
            (MPI_COMPLEX32, 32, Complex),
        ];
        let mut v: Vec<(MPI_Datatype, Arc<TypeObj>)> = named
            .iter()
            .map(|&(h, s, b)| {
                let bs = if b == Opaque { 1 } else { s };
                // MPI_COMPLEX4: two 2-byte halves; no arithmetic here.
                let b = if h == MPI_COMPLEX4 { Opaque } else { b };
                (h, Arc::new(TypeObj::named(h, s, b, bs)))
            })
            .collect();
        // The pair types of MINLOC and MAXLOC: (value, int) as a C struct lays them out.
        for (h, a, off, b, ext) in [
            (MPI_FLOAT_INT, 4, 4, 4, 8),
            (MPI_DOUBLE_INT, 8, 8, 4, 16),
            (MPI_LONG_INT, 8, 8, 4, 16),
            (MPI_2INT, 4, 4, 4, 8),
            (MPI_SHORT_INT, 2, 4, 4, 8),
            (MPI_LONG_DOUBLE_INT, 16, 16, 4, 32),
            (MPI_2REAL, 4, 4, 4, 8),
            (MPI_2DOUBLE_PRECISION, 8, 8, 8, 16),
            (MPI_2INTEGER, 4, 4, 4, 8),
        ] {
            v.push((h, Arc::new(TypeObj::pair(h, a, off, b, ext))));
        }
        v
    })
}

/// The derived datatypes programs made.
static TYPES: Table<TypeObj> = Table::new(Kind::Datatype);

/// A datatype as a call holds it ([`ObjRef`]): a predefined one borrowed from the static
/// table.
pub(crate) type TypeRef = ObjRef<TypeObj>;

/// A datatype a call holds: what it reads, and the shared datatype when it keeps it past
/// the call (a request, a reducer's closure).
pub(crate) trait Held: std::ops::Deref<Target = TypeObj> {
    /// The datatype shared.
    fn arc(&self) -> Arc<TypeObj>;
}

impl Held for Arc<TypeObj> {
    fn arc(&self) -> Arc<TypeObj> {
        Arc::clone(self)
    }
}

impl Held for TypeRef {
    fn arc(&self) -> Arc<TypeObj> {
        ObjRef::arc(self)
    }
}

/// The datatype of handle `h`, held for the call ([`TypeRef`]).
///
/// # Errors
/// [`MpiError::Handle`] with `MPI_ERR_TYPE`.
pub(crate) fn dtype_ref(h: MPI_Datatype) -> Result<TypeRef, MpiError> {
    let bad = || MpiError::Handle {
        class: MPI_ERR_TYPE,
        what: "datatype",
        handle: h,
    };
    if h < PREDEFINED_LIMIT {
        return predefined_by_handle()[h]
            .as_ref()
            .map(ObjRef::Named)
            .ok_or_else(bad);
    }
    TYPES.get(h).map(ObjRef::Made).ok_or_else(bad)
}

/// The datatype of handle `h`.
///
/// # Errors
/// [`MpiError::Handle`] with `MPI_ERR_TYPE`.
pub(crate) fn dtype(h: MPI_Datatype) -> Result<Arc<TypeObj>, MpiError> {
    let bad = || MpiError::Handle {
        class: MPI_ERR_TYPE,
        what: "datatype",
        handle: h,
    };
    if h < PREDEFINED_LIMIT {
        return predefined_by_handle()[h].clone().ok_or_else(bad);
    }
    TYPES.get(h).ok_or_else(bad)
}

/// Stores a new datatype; its handle.
///
/// # Errors
/// `MPI_ERR_NO_MEM` when the table is full.
pub(crate) fn insert(t: TypeObj) -> Result<MPI_Datatype, MpiError> {
    TYPES
        .insert(t)
        .ok_or_else(|| MpiError::invalid(MPI_ERR_NO_MEM, "too many datatypes"))
}

/// A new handle to datatype `t` of handle `h` (`MPI_Type_get_contents` gives new handles
/// of derived types, which the program frees); predefined ones are given as they are.
pub(crate) fn another_handle(h: MPI_Datatype, t: &Arc<TypeObj>) -> Result<MPI_Datatype, MpiError> {
    if h < 0x400 {
        return Ok(h);
    }
    let h = TYPES
        .insert_shared(t.clone())
        .ok_or_else(|| MpiError::invalid(MPI_ERR_NO_MEM, "too many datatypes"))?;
    t.handles.fetch_add(1, Ordering::AcqRel);
    Ok(h)
}

/// The datatype of `h`, which must be committed, for a transfer of `call`.
///
/// # Errors
/// As [`dtype`], and `MPI_ERR_TYPE` for an uncommitted type.
pub(crate) fn committed(h: MPI_Datatype, call: &'static str) -> Result<Arc<TypeObj>, MpiError> {
    committed_ref(h, call).map(|t| t.arc())
}

/// [`committed`], held for the call ([`TypeRef`]): what the blocking collectives take.
///
/// # Errors
/// As [`committed`].
pub(crate) fn committed_ref(h: MPI_Datatype, call: &'static str) -> Result<TypeRef, MpiError> {
    let t = dtype_ref(h)?;
    if !t.committed.load(Ordering::Acquire) {
        return Err(MpiError::invalid(
            MPI_ERR_TYPE,
            format!("{call}: the datatype is not committed (call MPI_Type_commit first)"),
        ));
    }
    Ok(t)
}

/// The datatype of a buffer of `n` elements: as [`committed`]; and for no element,
/// `MPI_DATATYPE_NULL` too, as an empty buffer (as MPICH and Open MPI take it: programs
/// send and receive empty messages so).
///
/// # Errors
/// As [`committed`].
pub(crate) fn committed_for(
    h: MPI_Datatype,
    n: usize,
    call: &'static str,
) -> Result<Arc<TypeObj>, MpiError> {
    if h == MPI_DATATYPE_NULL && n == 0 {
        return dtype(MPI_BYTE);
    }
    committed(h, call)
}

/// [`committed_for`], held for the call ([`TypeRef`]: no reference count moves for a
/// predefined datatype).
///
/// # Errors
/// As [`committed`].
pub(crate) fn committed_for_ref(
    h: MPI_Datatype,
    n: usize,
    call: &'static str,
) -> Result<TypeRef, MpiError> {
    if h == MPI_DATATYPE_NULL && n == 0 {
        return dtype_ref(MPI_BYTE);
    }
    committed_ref(h, call)
}

/// A count argument.
///
/// # Errors
/// `MPI_ERR_COUNT` for a negative count.
pub(crate) fn count(n: i64, call: &'static str) -> Result<usize, MpiError> {
    usize::try_from(n)
        .map_err(|_| MpiError::invalid(MPI_ERR_COUNT, format!("{call}: count {n} is negative")))
}

/// Bytes of `n` elements of `t`.
///
/// # Errors
/// `MPI_ERR_COUNT` when they do not fit the address space.
pub(crate) fn bytes_of(n: usize, t: &TypeObj, call: &'static str) -> Result<usize, MpiError> {
    n.checked_mul(t.size)
        .filter(|&b| b <= isize::MAX as usize)
        .ok_or_else(|| {
            MpiError::invalid(
                MPI_ERR_COUNT,
                format!(
                    "{call}: {n} elements of {} bytes do not fit the address space",
                    t.size
                ),
            )
        })
}

/// Data at addresses below this never lies in a program's memory (the first page is
/// never mapped): a datatype whose data starts here or above it is one of absolute
/// addresses, made for `MPI_BOTTOM`.
const FIRST_PAGE: isize = 4096;

/// Why `n` elements of `t` at `addr` are no buffer, for [`buffer`]; `None` when they may
/// be one. The rule of every buffer argument (MPICH's, made exact): nothing is wrong
/// with no data (a zero count or a datatype of no bytes, whatever the address);
/// otherwise the address must not be `MPI_IN_PLACE` (callers that allow it resolve it
/// first), and the data must not start in the first page, which is never mapped: NULL
/// (`MPI_BOTTOM`) is refused unless the datatype's data lies at absolute addresses (its
/// true lower bound beyond the first page, as a type built from `MPI_Get_address` has).
pub(crate) fn unusable(addr: usize, n: usize, t: &TypeObj) -> Option<&'static str> {
    if n == 0 || t.size == 0 {
        return None;
    }
    if addr == MPI_IN_PLACE {
        return Some("MPI_IN_PLACE, which this argument does not allow");
    }
    let first = isize::try_from(addr)
        .ok()
        .and_then(|a| a.checked_add(t.true_lb));
    if first.is_some_and(|f| f >= FIRST_PAGE) {
        return None;
    }
    Some(if addr == MPI_BOTTOM {
        "NULL (MPI_BOTTOM), and the datatype's displacements are not absolute addresses"
    } else {
        "an address whose data would start in the first page of memory (never mapped)"
    })
}

/// Checks the buffer argument `what` of `call`: `n` elements of `t` at `addr`
/// ([`unusable`] gives the rule). Every call that moves data checks each buffer it uses
/// with this before touching it.
///
/// # Errors
/// `MPI_ERR_BUFFER` naming the call, the argument and what is wrong.
pub(crate) fn buffer(
    addr: usize,
    n: usize,
    t: &TypeObj,
    call: &'static str,
    what: &'static str,
) -> Result<(), MpiError> {
    match unusable(addr, n, t) {
        None => Ok(()),
        Some(why) => Err(MpiError::invalid(
            MPI_ERR_BUFFER,
            format!("{call}: {what} is {why} ({n} elements of {} bytes)", t.size),
        )),
    }
}

/// [`buffer`] for one block of a v, w or neighbourhood collective: `n` elements of `t`
/// at byte displacement `disp` from the argument `base` (the block's own address is what
/// is checked, so `MPI_BOTTOM` with absolute displacements is a buffer; `MPI_IN_PLACE`
/// never is).
///
/// # Errors
/// As [`buffer`].
pub(crate) fn block(
    base: usize,
    disp: isize,
    n: usize,
    t: &TypeObj,
    call: &'static str,
    what: &'static str,
) -> Result<(), MpiError> {
    if base == MPI_IN_PLACE {
        return buffer(base, n, t, call, what);
    }
    buffer(base.wrapping_add_signed(disp), n, t, call, what)
}

/// [`buffer`] for `len` bytes (a packed buffer, of `MPI_PACKED`).
///
/// # Errors
/// As [`buffer`].
pub(crate) fn byte_buffer(
    addr: usize,
    len: usize,
    call: &'static str,
    what: &'static str,
) -> Result<(), MpiError> {
    buffer(addr, len, &*dtype(MPI_BYTE)?, call, what)
}

/// Copies `count` elements of `t` at `buf` into one contiguous vector.
///
/// # Safety
/// `buf` holds `count` elements of `t`.
pub(crate) unsafe fn pack(buf: *const u8, count: usize, t: &TypeObj) -> Vec<u8> {
    if t.contiguous() {
        if count * t.size == 0 {
            return Vec::new();
        }
        // SAFETY: the caller's contract: `count * size` contiguous bytes at `buf`.
        return unsafe { std::slice::from_raw_parts(buf, count * t.size) }.to_vec();
    }
    let total = count * t.size;
    let mut v = Vec::with_capacity(total);
    // SAFETY: within the caller's `count` elements of `t` (from MPI_BOTTOM too: `runs`
    // forms the addresses with wrapping arithmetic, as `offset`'s rule, within one
    // allocation, does not hold for absolute displacements); `v` has room for the
    // `count * size` bytes of data, which `copy_at` writes in full before `set_len`.
    unsafe {
        t.copy_at(runs::Way::Pack, buf.cast_mut(), 0, v.as_mut_ptr(), total);
        v.set_len(total);
    }
    v
}

/// Copies the packed bytes `data` (whole or partial elements of `t`) out to `buf`.
///
/// # Safety
/// `buf` holds as many elements of `t` as `data` has bytes for.
pub(crate) unsafe fn unpack(data: &[u8], buf: *mut u8, t: &TypeObj) {
    if t.contiguous() {
        // SAFETY: the caller's contract: `buf` holds as many bytes as `data` fills.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), buf, data.len()) };
        return;
    }
    // SAFETY: the caller's contract (from MPI_BOTTOM too: `runs` forms the addresses
    // with wrapping arithmetic).
    unsafe {
        t.copy_at(
            runs::Way::Unpack,
            buf,
            0,
            data.as_ptr().cast_mut(),
            data.len(),
        )
    };
}

/// The program's memory of a receive into a non-contiguous datatype: the message's
/// bytes are unpacked into it piece by piece as they arrive
/// ([`spools_msg::ScatterBuf`]), without a packed copy of the whole message.
pub(crate) struct Unpacker {
    /// The program's buffer.
    pub(crate) addr: usize,
    /// Its elements' datatype.
    pub(crate) t: Arc<TypeObj>,
    /// The bytes of data its elements hold.
    pub(crate) cap: usize,
}

impl spools_msg::ScatterBuf for Unpacker {
    fn capacity(&self) -> usize {
        self.cap
    }

    fn write_at(&mut self, offset: usize, data: &[u8]) {
        let end = offset.saturating_add(data.len());
        assert!(end <= self.cap, "a piece past the receive's end");
        // SAFETY: MPI's contract on a pending receive's buffer: `addr` holds elements
        // of `t` with room for `cap` bytes of data, the operation's until it completes
        // (the engine writes no piece after that, and none past `cap`: asserted above).
        unsafe {
            self.t.copy_at(
                runs::Way::Unpack,
                self.addr as *mut u8,
                offset,
                data.as_ptr().cast_mut(),
                data.len(),
            );
        }
    }
}

/// The program's memory of a send of a non-contiguous datatype: packed piece by piece
/// as the message leaves ([`spools_msg::GatherBuf`]), without a packed copy of the whole
/// message.
pub(crate) struct Packer {
    /// The program's buffer.
    pub(crate) addr: usize,
    /// Its elements' datatype.
    pub(crate) t: Arc<TypeObj>,
    /// The bytes of data its elements hold.
    pub(crate) len: usize,
}

impl spools_msg::GatherBuf for Packer {
    fn len(&self) -> usize {
        self.len
    }

    fn read_at(&mut self, offset: usize, out: &mut [u8]) {
        let end = offset.saturating_add(out.len());
        assert!(end <= self.len, "a piece past the send's end");
        // SAFETY: MPI's contract on a pending send's buffer: `addr` holds elements of
        // `t` with `len` bytes of data, left alone until the operation completes (the
        // engine reads no piece after that, and none past `len`: asserted above).
        unsafe {
            self.t.copy_at(
                runs::Way::Pack,
                self.addr as *mut u8,
                offset,
                out.as_mut_ptr(),
                out.len(),
            );
        }
    }
}

/// A new type of `parts`: (byte displacement, block length, type) each; `resize` gives
/// the bounds of a struct (padded to alignment) or leaves the parts' own.
///
/// # Errors
/// `MPI_ERR_ARG` when a bound, a block's place or the size does not fit the address
/// space (displacements and extents a program gave that overflow: an error, not a wrapped
/// offset).
pub(crate) fn build(
    parts: &[(isize, usize, Arc<TypeObj>)],
    is_struct: bool,
) -> Result<TypeObj, MpiError> {
    let overflow = || {
        MpiError::invalid(
            MPI_ERR_ARG,
            "a datatype constructor: the displacements, extents and counts overflow the \
             address space",
        )
    };
    let fit = |v: i128| isize::try_from(v).map_err(|_| overflow());
    let mut blocks: Vec<(isize, usize)> = Vec::new();
    // The bounds in i128: a part's first and last copies are computed exactly, then
    // checked to fit.
    let (mut lb, mut ub) = (i128::MAX, i128::MIN);
    let mut size = 0usize;
    let mut align = 1usize;
    let mut basic: Option<(Basic, usize)> = None;
    let mut mixed = false;
    for (disp, n, t) in parts {
        if *n == 0 {
            continue;
        }
        // Copy k spans [lb + k extent, lb + (k + 1) extent] (reversed for a negative
        // extent): the bounds are the first's or the last's.
        let first = *disp as i128 + t.lb as i128;
        let last = first + (*n as i128 - 1) * t.extent as i128;
        lb = lb.min(first.min(last));
        ub = ub.max((first + t.extent as i128).max(last + t.extent as i128));
        fit(lb)?;
        fit(ub)?;
        align = align.max(t.align);
        size = n
            .checked_mul(t.size)
            .and_then(|b| size.checked_add(b))
            .ok_or_else(overflow)?;
        match (basic, t.basic) {
            (_, None) => mixed = true,
            (None, Some(b)) => basic = Some((b, t.basic_size)),
            (Some((b0, _)), Some(b)) if b0 != b => mixed = true,
            _ => {}
        }
        // n copies of a gapless type are one block (whatever n: a contiguous type of
        // 2^31 bytes takes no loop).
        if t.blocks.len() == 1 && t.blocks[0].1 as isize == t.extent && t.lb == t.blocks[0].0 {
            let (off, len) = t.blocks[0];
            let o = disp.checked_add(off).ok_or_else(overflow)?;
            let total = n.checked_mul(len).ok_or_else(overflow)?;
            fit(o as i128 + total as i128)?;
            match blocks.last_mut() {
                Some(last) if last.0 + last.1 as isize == o => last.1 += total,
                _ => blocks.push((o, total)),
            }
            continue;
        }
        for k in 0..*n {
            for &(off, len) in &t.blocks {
                // A resized type's blocks may lie outside its bounds: each is checked.
                let o = fit(*disp as i128 + k as i128 * t.extent as i128 + off as i128)?;
                fit(o as i128 + len as i128)?;
                match blocks.last_mut() {
                    Some(last) if last.0 + last.1 as isize == o => last.1 += len,
                    _ => blocks.push((o, len)),
                }
            }
        }
    }
    if lb > ub {
        (lb, ub) = (0, 0);
    }
    if is_struct {
        let e = ub - lb;
        let pad = (align as i128 - e.rem_euclid(align as i128)) % align as i128;
        ub += pad;
    }
    let (lb, extent) = (fit(lb)?, fit(ub - lb)?);
    let true_lb = blocks.iter().map(|b| b.0).min().unwrap_or(0);
    let true_ub = blocks.iter().map(|b| b.0 + b.1 as isize).max().unwrap_or(0);
    let basic = if mixed { None } else { basic };
    Ok(TypeObj {
        size,
        lb,
        extent,
        true_lb,
        true_extent: fit(true_ub as i128 - true_lb as i128)?,
        blocks,
        basic: basic.map(|b| b.0),
        basic_size: basic.map_or(0, |b| b.1),
        align,
        committed: AtomicBool::new(false),
        named: None,
        envelope: Envelope::default(),
        name: std::sync::Mutex::new(String::new()),
        attrs: crate::comm::attr::Attrs::default(),
        handles: AtomicUsize::new(1),
        tiling: std::sync::OnceLock::new(),
        progs: OnceLock::new(),
    })
}

/// Stores a new derived type and writes its handle.
///
/// # Safety
/// `newtype` is NULL or writable.
pub(crate) unsafe fn give(
    t: TypeObj,
    newtype: *mut MPI_Datatype,
    call: &'static str,
) -> Result<(), MpiError> {
    let h = TYPES
        .insert(t)
        .ok_or_else(|| MpiError::invalid(MPI_ERR_NO_MEM, "too many datatypes"))?;
    // SAFETY: the caller's contract.
    unsafe { out(newtype, h, call) }
}

/// Reads `n` values of a C array.
///
/// # Safety
/// `p` holds `n` values (or `n` is 0).
pub(crate) unsafe fn array<'a, T>(
    p: *const T,
    n: usize,
    call: &'static str,
) -> Result<&'a [T], MpiError> {
    if n == 0 {
        return Ok(&[]);
    }
    if p.is_null() {
        return Err(MpiError::invalid(
            MPI_ERR_ARG,
            format!("{call}: an array argument is NULL"),
        ));
    }
    // SAFETY: `n` readable values (the caller's contract).
    Ok(unsafe { std::slice::from_raw_parts(p, n) })
}

pub(crate) fn nonneg(v: c_int, call: &'static str) -> Result<usize, MpiError> {
    count(i64::from(v), call)
}

/// `MPI_Type_commit`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Type_commit(datatype: *mut MPI_Datatype) -> c_int {
    let r = (|| {
        if datatype.is_null() {
            return Err(MpiError::invalid(MPI_ERR_ARG, "MPI_Type_commit: NULL"));
        }
        // SAFETY: non-NULL (the caller's contract).
        let t = dtype(unsafe { *datatype })?;
        t.committed.store(true, Ordering::Release);
        Ok(())
    })();
    on_self(r)
}

/// `MPI_Type_free`: frees a derived type (predefined ones cannot be freed).
#[no_mangle]
pub unsafe extern "C" fn MPI_Type_free(datatype: *mut MPI_Datatype) -> c_int {
    let r = (|| {
        if datatype.is_null() {
            return Err(MpiError::invalid(MPI_ERR_ARG, "MPI_Type_free: NULL"));
        }
        // SAFETY: non-NULL (the caller's contract).
        let h = unsafe { *datatype };
        if h < 0x400 {
            return Err(MpiError::invalid(
                MPI_ERR_TYPE,
                "MPI_Type_free: a predefined datatype cannot be freed",
            ));
        }
        if let Ok(t) = dtype(h) {
            // Attributes go with the last handle of the type (types made from it, and
            // transfers in flight, may hold the object longer).
            if t.handles.load(Ordering::Acquire) == 1 {
                crate::comm::attr::delete_all(h, &t.attrs)?;
            }
        }
        let t = TYPES.remove(h).ok_or(MpiError::Handle {
            class: MPI_ERR_TYPE,
            what: "datatype",
            handle: h,
        })?;
        t.handles.fetch_sub(1, Ordering::AcqRel);
        // SAFETY: as above.
        unsafe { *datatype = MPI_DATATYPE_NULL };
        Ok(())
    })();
    on_self(r)
}

/// `MPI_Type_size`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Type_size(datatype: MPI_Datatype, size: *mut c_int) -> c_int {
    let r = dtype(datatype).and_then(|t| {
        let s = c_int::try_from(t.size).unwrap_or(MPI_UNDEFINED);
        // SAFETY: the caller's contract.
        unsafe { out(size, s, "MPI_Type_size") }
    });
    on_self(r)
}

/// `MPI_Type_size_c`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Type_size_c(datatype: MPI_Datatype, size: *mut MPI_Count) -> c_int {
    // SAFETY: the caller's contract.
    let r =
        dtype(datatype).and_then(|t| unsafe { out(size, t.size as MPI_Count, "MPI_Type_size_c") });
    on_self(r)
}

/// `MPI_Type_get_extent`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Type_get_extent(
    datatype: MPI_Datatype,
    lb: *mut MPI_Aint,
    extent: *mut MPI_Aint,
) -> c_int {
    let r = dtype(datatype).and_then(|t| {
        // SAFETY: the caller's contract.
        unsafe {
            out(lb, t.lb, "MPI_Type_get_extent")?;
            out(extent, t.extent, "MPI_Type_get_extent")
        }
    });
    on_self(r)
}

/// `MPI_Type_get_true_extent`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Type_get_true_extent(
    datatype: MPI_Datatype,
    true_lb: *mut MPI_Aint,
    true_extent: *mut MPI_Aint,
) -> c_int {
    let r = dtype(datatype).and_then(|t| {
        // SAFETY: the caller's contract.
        unsafe {
            out(true_lb, t.true_lb, "MPI_Type_get_true_extent")?;
            out(true_extent, t.true_extent, "MPI_Type_get_true_extent")
        }
    });
    on_self(r)
}

/// `MPI_Get_address`: the address as an `MPI_Aint`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Get_address(
    location: *const std::ffi::c_void,
    address: *mut MPI_Aint,
) -> c_int {
    // SAFETY: the caller's contract.
    on_self(unsafe { out(address, location as MPI_Aint, "MPI_Get_address") })
}

/// `MPI_Aint_add`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Aint_add(base: MPI_Aint, disp: MPI_Aint) -> MPI_Aint {
    base.wrapping_add(disp)
}

/// `MPI_Aint_diff`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Aint_diff(addr1: MPI_Aint, addr2: MPI_Aint) -> MPI_Aint {
    addr1.wrapping_sub(addr2)
}

/// Elements of `t` in `bytes` (`MPI_UNDEFINED` when not a whole number).
pub(crate) fn elements(bytes: usize, t: &TypeObj) -> c_int {
    if t.size == 0 {
        return 0;
    }
    if bytes % t.size != 0 {
        return MPI_UNDEFINED;
    }
    c_int::try_from(bytes / t.size).unwrap_or(MPI_UNDEFINED)
}

/// `MPI_Pack_size`: an upper bound of the bytes `MPI_Pack` takes.
#[no_mangle]
pub unsafe extern "C" fn MPI_Pack_size(
    incount: c_int,
    datatype: MPI_Datatype,
    comm: MPI_Comm,
    size: *mut c_int,
) -> c_int {
    let r = (|| {
        let n = nonneg(incount, "MPI_Pack_size")?;
        let t = dtype(datatype)?;
        let s = c_int::try_from(n * t.size)
            .map_err(|_| MpiError::invalid(MPI_ERR_COUNT, "MPI_Pack_size: too large for an int"))?;
        // SAFETY: the caller's contract.
        unsafe { out(size, s, "MPI_Pack_size") }
    })();
    crate::env::errhandler::on_comm(comm, r)
}

/// `MPI_Pack`: appends `incount` elements at `inbuf` to `outbuf` at `*position`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Pack(
    inbuf: *const std::ffi::c_void,
    incount: c_int,
    datatype: MPI_Datatype,
    outbuf: *mut std::ffi::c_void,
    outsize: c_int,
    position: *mut c_int,
    comm: MPI_Comm,
) -> c_int {
    let r = (|| {
        let call = "MPI_Pack";
        let n = nonneg(incount, call)?;
        let t = committed(datatype, call)?;
        if position.is_null() {
            return Err(MpiError::invalid(MPI_ERR_ARG, "MPI_Pack: position is NULL"));
        }
        // SAFETY: non-NULL (the caller's contract).
        let pos = nonneg(unsafe { *position }, call)?;
        buffer(inbuf as usize, n, &t, call, "inbuf")?;
        // SAFETY: `inbuf` holds `incount` elements (the caller's contract).
        let data = unsafe { pack(inbuf.cast(), n, &t) };
        if pos + data.len() > nonneg(outsize, call)? {
            return Err(MpiError::invalid(
                MPI_ERR_TRUNCATE,
                "MPI_Pack: outbuf is too small",
            ));
        }
        byte_buffer(outbuf as usize, data.len(), call, "outbuf")?;
        // SAFETY: `outbuf` holds `outsize` bytes, checked above.
        unsafe {
            std::ptr::copy_nonoverlapping(data.as_ptr(), outbuf.cast::<u8>().add(pos), data.len());
            *position = (pos + data.len()) as c_int;
        }
        Ok(())
    })();
    crate::env::errhandler::on_comm(comm, r)
}

/// `MPI_Unpack`: takes `outcount` elements from `inbuf` at `*position`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Unpack(
    inbuf: *const std::ffi::c_void,
    insize: c_int,
    position: *mut c_int,
    outbuf: *mut std::ffi::c_void,
    outcount: c_int,
    datatype: MPI_Datatype,
    comm: MPI_Comm,
) -> c_int {
    let r = (|| {
        let call = "MPI_Unpack";
        let n = nonneg(outcount, call)?;
        let t = committed(datatype, call)?;
        if position.is_null() {
            return Err(MpiError::invalid(
                MPI_ERR_ARG,
                "MPI_Unpack: position is NULL",
            ));
        }
        // SAFETY: non-NULL (the caller's contract).
        let pos = nonneg(unsafe { *position }, call)?;
        let len = n * t.size;
        if pos + len > nonneg(insize, call)? {
            return Err(MpiError::invalid(
                MPI_ERR_TRUNCATE,
                "MPI_Unpack: inbuf holds fewer bytes than asked for",
            ));
        }
        byte_buffer(inbuf as usize, len, call, "inbuf")?;
        buffer(outbuf as usize, n, &t, call, "outbuf")?;
        // SAFETY: `inbuf` holds `insize` bytes (checked); `outbuf` `outcount` elements.
        unsafe {
            let data = std::slice::from_raw_parts(inbuf.cast::<u8>().add(pos), len);
            unpack(data, outbuf.cast(), &t);
            *position = (pos + len) as c_int;
        }
        Ok(())
    })();
    crate::env::errhandler::on_comm(comm, r)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn int() -> Arc<TypeObj> {
        dtype(MPI_INT).expect("MPI_INT is predefined")
    }

    #[test]
    fn displacements_that_overflow_the_address_space_are_an_error_not_a_wrapped_offset() {
        let int = dtype(MPI_INT).expect("MPI_INT");
        for (disp, n) in [
            (isize::MAX - 2, 1),
            (isize::MAX - 8, 3),
            (0, usize::MAX / 2),
        ] {
            let err = build(&[(disp, n, int.clone())], false).err();
            assert_eq!(err.map(|e| e.class()), Some(MPI_ERR_ARG), "{disp} x {n}");
            let err = build(&[(0, 1, int.clone()), (disp, n, int.clone())], true).err();
            assert_eq!(
                err.map(|e| e.class()),
                Some(MPI_ERR_ARG),
                "struct {disp} x {n}"
            );
        }
        // The largest that fit still build.
        let t = build(&[(isize::MAX - 4, 1, int.clone())], false).expect("fits");
        assert_eq!((t.lb, t.extent, t.size), (isize::MAX - 4, 4, 4));
    }

    #[test]
    fn copies_of_a_type_of_negative_extent_take_the_bounds_of_the_last() {
        // Four bytes resized to lb 6, extent -9 (ub -3), three copies: the copies' lower
        // bounds are 6, -3, -12, their upper bounds -3, -12, -21 (MPICH's lbub.c).
        let bytes = build(&[(0, 4, dtype(MPI_BYTE).expect("MPI_BYTE"))], false).expect("build");
        let mut evil = bytes;
        evil.lb = 6;
        evil.extent = -9;
        let three = build(&[(0, 3, Arc::new(evil))], false).expect("build");
        assert_eq!((three.lb, three.extent, three.size), (-12, 9, 12));
        assert_eq!((three.true_lb, three.true_extent), (-18, 22));
    }

    #[test]
    fn a_null_or_in_place_buffer_with_data_is_refused() {
        let t = int();
        assert!(unusable(MPI_BOTTOM, 4, &t).is_some());
        assert!(unusable(MPI_IN_PLACE, 4, &t).is_some());
        let e = buffer(MPI_BOTTOM, 4, &t, "MPI_Send", "buf").expect_err("NULL with 4 ints");
        assert_eq!(e.class(), MPI_ERR_BUFFER);
        assert!(e.to_string().starts_with("MPI_Send: buf is NULL"), "{e}");
        assert_eq!(
            byte_buffer(MPI_BOTTOM, 8, "MPI_Pack", "outbuf").map_err(|e| e.class()),
            Err(MPI_ERR_BUFFER)
        );
    }

    #[test]
    fn no_data_or_absolute_addresses_allow_any_address() {
        let t = int();
        assert!(unusable(MPI_BOTTOM, 0, &t).is_none());
        assert!(unusable(MPI_IN_PLACE, 0, &t).is_none());
        assert!(unusable(0x7fff_0000, 4, &t).is_none());
        // A struct of one int at an absolute address (built from MPI_Get_address).
        let absolute = build(&[(0x7fff_0000, 1, t.clone())], true).expect("build");
        assert!(unusable(MPI_BOTTOM, 1, &absolute).is_none());
        // Displacements inside the first page are no addresses: NULL is refused.
        let near = build(&[(8, 1, t.clone())], true).expect("build");
        assert!(unusable(MPI_BOTTOM, 1, &near).is_some());
        let below = build(&[(-8, 1, t.clone())], true).expect("build");
        assert!(unusable(MPI_BOTTOM, 1, &below).is_some());
        // Data starting in the first page is no buffer; a block at an absolute
        // displacement from MPI_BOTTOM is one.
        assert!(unusable(8, 4, &t).is_some());
        assert!(block(MPI_BOTTOM, 0x7fff_0000, 4, &t, "c", "b").is_ok());
        assert!(block(MPI_BOTTOM, 0, 4, &t, "c", "b").is_err());
        assert!(block(MPI_IN_PLACE, 0x7fff_0000, 4, &t, "c", "b").is_err());
        // An empty type moves nothing.
        let empty = build(&[], true).expect("build");
        assert!(unusable(MPI_BOTTOM, 4, &empty).is_none());
    }
}
