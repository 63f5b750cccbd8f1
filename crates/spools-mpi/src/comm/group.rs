//! Groups: ordered sets of job ranks (`MPI_Comm_group`, the group algebra), and
//! `MPI_Comm_create` from a group.

use std::ffi::c_int;
use std::sync::Arc;

use crate::abi::*;
use crate::comm::comm;
use crate::env::errhandler::{on_comm, on_self};
use crate::env::error::MpiError;
use crate::handles::{Kind, Table};
use crate::out::out;
use crate::runtime::rt;

/// A group: job ranks in group order.
pub(crate) struct GroupObj(pub(crate) Vec<u32>);

static GROUPS: Table<GroupObj> = Table::new(Kind::Group);

fn group(h: MPI_Group) -> Result<Arc<GroupObj>, MpiError> {
    if h == MPI_GROUP_EMPTY {
        return Ok(Arc::new(GroupObj(Vec::new())));
    }
    GROUPS.get(h).ok_or(MpiError::Handle {
        class: MPI_ERR_GROUP,
        what: "group",
        handle: h,
    })
}

/// # Safety
/// `newgroup` is NULL or writable.
pub(crate) unsafe fn give(
    ranks: Vec<u32>,
    newgroup: *mut MPI_Group,
    call: &'static str,
) -> Result<(), MpiError> {
    let h = if ranks.is_empty() {
        MPI_GROUP_EMPTY
    } else {
        GROUPS
            .insert(GroupObj(ranks))
            .ok_or_else(|| MpiError::invalid(MPI_ERR_NO_MEM, "too many groups"))?
    };
    // SAFETY: the caller's contract.
    unsafe { out(newgroup, h, call) }
}

/// Stores a group of job ranks and writes its handle.
///
/// # Safety
/// `newgroup` is NULL or writable.
pub(crate) unsafe fn give_group(
    ranks: Vec<u32>,
    newgroup: *mut MPI_Group,
    call: &'static str,
) -> Result<(), MpiError> {
    // SAFETY: the caller's contract.
    unsafe { give(ranks, newgroup, call) }
}

/// The processes of group `h` (their labels: `worlds.rs`).
pub(crate) fn members_of(h: MPI_Group) -> Result<Vec<u32>, MpiError> {
    Ok(group(h)?.0.clone())
}

/// The job ranks of a communicator (in its job: `worlds.rs`), in its order (its local
/// group, for an intercommunicator).
pub(crate) fn members(c: &crate::comm::CommObj) -> Result<Vec<u32>, MpiError> {
    if let Some(i) = &c.inter {
        return Ok(i.local.clone());
    }
    (0..c.comm.size())
        .map(|r| c.comm.job_rank(r).map_err(MpiError::from))
        .collect()
}

/// `MPI_Comm_group`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Comm_group(comm: MPI_Comm, group: *mut MPI_Group) -> c_int {
    let r = self::comm(comm, "MPI_Comm_group").and_then(|c| {
        // SAFETY: the caller's contract.
        unsafe { give(c.ctx.labels_of(&members(&c)?), group, "MPI_Comm_group") }
    });
    on_comm(comm, r)
}

/// `MPI_Group_size`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Group_size(group: MPI_Group, size: *mut c_int) -> c_int {
    // SAFETY: the caller's contract.
    on_self(
        self::group(group).and_then(|g| unsafe { out(size, g.0.len() as c_int, "MPI_Group_size") }),
    )
}

/// `MPI_Group_rank`: this process's rank in the group (`MPI_UNDEFINED` if absent).
#[no_mangle]
pub unsafe extern "C" fn MPI_Group_rank(group: MPI_Group, rank: *mut c_int) -> c_int {
    let r = (|| {
        let g = self::group(group)?;
        let me = rt("MPI_Group_rank")?.rank;
        let r =
            g.0.iter()
                .position(|&x| x == me)
                .map_or(MPI_UNDEFINED, |p| p as c_int);
        // SAFETY: the caller's contract.
        unsafe { out(rank, r, "MPI_Group_rank") }
    })();
    on_self(r)
}

/// `MPI_Group_translate_ranks`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Group_translate_ranks(
    group1: MPI_Group,
    n: c_int,
    ranks1: *const c_int,
    group2: MPI_Group,
    ranks2: *mut c_int,
) -> c_int {
    let r = (|| {
        let call = "MPI_Group_translate_ranks";
        let (a, b) = (self::group(group1)?, self::group(group2)?);
        let n = crate::datatype::nonneg(n, call)?;
        // SAFETY: `n` values each (the caller's contract).
        let src = unsafe { crate::datatype::array(ranks1, n, call)? }.to_vec();
        if n > 0 && ranks2.is_null() {
            return Err(MpiError::invalid(
                MPI_ERR_ARG,
                format!("{call}: ranks2 is NULL"),
            ));
        }
        for (i, &r) in src.iter().enumerate() {
            let v = if r == MPI_PROC_NULL {
                MPI_PROC_NULL
            } else {
                let job = *usize::try_from(r)
                    .ok()
                    .and_then(|r| a.0.get(r))
                    .ok_or_else(|| {
                        MpiError::invalid(
                            MPI_ERR_RANK,
                            format!("{call}: rank {r} is not in group1 of {}", a.0.len()),
                        )
                    })?;
                b.0.iter()
                    .position(|&x| x == job)
                    .map_or(MPI_UNDEFINED, |p| p as c_int)
            };
            // SAFETY: `n` writable values (the caller's contract).
            unsafe { *ranks2.add(i) = v };
        }
        Ok(())
    })();
    on_self(r)
}

/// `MPI_Group_compare`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Group_compare(
    group1: MPI_Group,
    group2: MPI_Group,
    result: *mut c_int,
) -> c_int {
    let r = (|| {
        let (a, b) = (self::group(group1)?, self::group(group2)?);
        let v = if a.0 == b.0 {
            MPI_IDENT
        } else {
            let (mut x, mut y) = (a.0.clone(), b.0.clone());
            x.sort_unstable();
            y.sort_unstable();
            if x == y {
                MPI_SIMILAR
            } else {
                MPI_UNEQUAL
            }
        };
        // SAFETY: the caller's contract.
        unsafe { out(result, v, "MPI_Group_compare") }
    })();
    on_self(r)
}

macro_rules! set_op {
    ($name:ident, |$a:ident, $b:ident| $body:expr) => {
        #[doc = concat!("`", stringify!($name), "`.")]
        #[no_mangle]
        pub unsafe extern "C" fn $name(
            group1: MPI_Group,
            group2: MPI_Group,
            newgroup: *mut MPI_Group,
        ) -> c_int {
            let r = (|| {
                let ($a, $b) = (self::group(group1)?, self::group(group2)?);
                let v: Vec<u32> = $body;
                // SAFETY: the caller's contract.
                unsafe { give(v, newgroup, stringify!($name)) }
            })();
            on_self(r)
        }
    };
}
set_op!(MPI_Group_union, |a, b| a
    .0
    .iter()
    .copied()
    .chain(b.0.iter().copied().filter(|x| !a.0.contains(x)))
    .collect());
set_op!(MPI_Group_intersection, |a, b| a
    .0
    .iter()
    .copied()
    .filter(|x| b.0.contains(x))
    .collect());
set_op!(MPI_Group_difference, |a, b| a
    .0
    .iter()
    .copied()
    .filter(|x| !b.0.contains(x))
    .collect());

fn ranks_arg(
    g: &GroupObj,
    n: c_int,
    ranks: *const c_int,
    call: &'static str,
) -> Result<Vec<usize>, MpiError> {
    let n = crate::datatype::nonneg(n, call)?;
    // SAFETY: `n` values (MPI's contract).
    let v = unsafe { crate::datatype::array(ranks, n, call)? };
    let mut seen = vec![false; g.0.len()];
    v.iter()
        .map(|&r| {
            let i = usize::try_from(r)
                .ok()
                .filter(|&i| i < g.0.len())
                .ok_or_else(|| {
                    MpiError::invalid(
                        MPI_ERR_RANK,
                        format!("{call}: rank {r} is not in the group of {}", g.0.len()),
                    )
                })?;
            if std::mem::replace(&mut seen[i], true) {
                return Err(MpiError::invalid(
                    MPI_ERR_RANK,
                    format!("{call}: rank {r} is listed twice"),
                ));
            }
            Ok(i)
        })
        .collect()
}

/// `MPI_Group_incl`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Group_incl(
    group: MPI_Group,
    n: c_int,
    ranks: *const c_int,
    newgroup: *mut MPI_Group,
) -> c_int {
    let r = (|| {
        let g = self::group(group)?;
        let idx = ranks_arg(&g, n, ranks, "MPI_Group_incl")?;
        // SAFETY: the caller's contract.
        unsafe {
            give(
                idx.iter().map(|&i| g.0[i]).collect(),
                newgroup,
                "MPI_Group_incl",
            )
        }
    })();
    on_self(r)
}

/// `MPI_Group_excl`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Group_excl(
    group: MPI_Group,
    n: c_int,
    ranks: *const c_int,
    newgroup: *mut MPI_Group,
) -> c_int {
    let r = (|| {
        let g = self::group(group)?;
        let idx = ranks_arg(&g, n, ranks, "MPI_Group_excl")?;
        let v =
            g.0.iter()
                .enumerate()
                .filter(|(i, _)| !idx.contains(i))
                .map(|(_, &x)| x)
                .collect();
        // SAFETY: the caller's contract.
        unsafe { give(v, newgroup, "MPI_Group_excl") }
    })();
    on_self(r)
}

/// The ranks of `n` triplets (first, last, stride).
///
/// # Safety
/// `ranges` holds `n` triplets.
unsafe fn ranges(
    g: &GroupObj,
    n: c_int,
    ranges: *mut c_int,
    call: &'static str,
) -> Result<Vec<c_int>, MpiError> {
    let n = crate::datatype::nonneg(n, call)?;
    // SAFETY: `3 n` ints (the caller's contract).
    let v = unsafe { crate::datatype::array(ranges.cast::<c_int>().cast_const(), 3 * n, call)? };
    let mut out = Vec::new();
    for t in v.chunks_exact(3) {
        let (first, last, stride) = (t[0], t[1], t[2]);
        if stride == 0 {
            return Err(MpiError::invalid(
                MPI_ERR_ARG,
                format!("{call}: a range has stride 0"),
            ));
        }
        let mut r = first;
        while (stride > 0 && r <= last) || (stride < 0 && r >= last) {
            if r < 0 || r as usize >= g.0.len() {
                return Err(MpiError::invalid(
                    MPI_ERR_RANK,
                    format!("{call}: rank {r} is not in the group of {}", g.0.len()),
                ));
            }
            out.push(r);
            let Some(next) = r.checked_add(stride) else {
                break;
            };
            r = next;
        }
    }
    Ok(out)
}

/// `MPI_Group_range_incl`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Group_range_incl(
    group: MPI_Group,
    n: c_int,
    ranges: *mut c_int,
    newgroup: *mut MPI_Group,
) -> c_int {
    let r = (|| {
        let g = self::group(group)?;
        // SAFETY: the caller's contract.
        let rs = unsafe { self::ranges(&g, n, ranges, "MPI_Group_range_incl")? };
        // SAFETY: the caller's contract.
        unsafe { MPI_Group_incl_checked(&g, &rs, newgroup, "MPI_Group_range_incl") }
    })();
    on_self(r)
}

/// `MPI_Group_range_excl`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Group_range_excl(
    group: MPI_Group,
    n: c_int,
    ranges: *mut c_int,
    newgroup: *mut MPI_Group,
) -> c_int {
    let r = (|| {
        let g = self::group(group)?;
        // SAFETY: the caller's contract.
        let rs = unsafe { self::ranges(&g, n, ranges, "MPI_Group_range_excl")? };
        let idx = ranks_arg(&g, rs.len() as c_int, rs.as_ptr(), "MPI_Group_range_excl")?;
        let v =
            g.0.iter()
                .enumerate()
                .filter(|(i, _)| !idx.contains(i))
                .map(|(_, &x)| x)
                .collect();
        // SAFETY: the caller's contract.
        unsafe { give(v, newgroup, "MPI_Group_range_excl") }
    })();
    on_self(r)
}

/// # Safety
/// `newgroup` is NULL or writable.
#[allow(non_snake_case)]
unsafe fn MPI_Group_incl_checked(
    g: &GroupObj,
    rs: &[c_int],
    newgroup: *mut MPI_Group,
    call: &'static str,
) -> Result<(), MpiError> {
    let idx = ranks_arg(g, rs.len() as c_int, rs.as_ptr(), call)?;
    // SAFETY: the caller's contract.
    unsafe { give(idx.iter().map(|&i| g.0[i]).collect(), newgroup, call) }
}

/// `MPI_Group_free`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Group_free(group: *mut MPI_Group) -> c_int {
    let r = (|| {
        if group.is_null() {
            return Err(MpiError::invalid(MPI_ERR_ARG, "MPI_Group_free: NULL"));
        }
        // SAFETY: non-NULL (the caller's contract).
        let h = unsafe { *group };
        if h != MPI_GROUP_EMPTY {
            GROUPS.remove(h).ok_or(MpiError::Handle {
                class: MPI_ERR_GROUP,
                what: "group",
                handle: h,
            })?;
        }
        // SAFETY: as above.
        unsafe { *group = MPI_GROUP_NULL };
        Ok(())
    })();
    on_self(r)
}
