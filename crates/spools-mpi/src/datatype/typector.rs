//! Datatype constructors, each in its `int` and large-count (`_c`) form: contiguous,
//! vector, hvector, indexed, hindexed, indexed_block, hindexed_block, struct, subarray,
//! darray, resized, dup. Each records its envelope (combiner and arguments) for
//! `MPI_Type_get_contents`.

use std::ffi::c_int;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::abi::*;
use crate::datatype::{array, build, dtype, give, Envelope, TypeObj};
use crate::env::errhandler::on_self;
use crate::env::error::MpiError;

fn n(v: i64, call: &'static str) -> Result<usize, MpiError> {
    crate::datatype::count(v, call)
}

fn to_c_ints(v: &[i64]) -> Vec<c_int> {
    v.iter().map(|&x| x as c_int).collect()
}

/// How a constructor was called: with `int` arguments (and `MPI_Aint` byte
/// displacements) or with large counts.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Form {
    Int,
    Large,
}

/// Stores `t` with its envelope and writes its handle.
///
/// # Safety
/// `newtype` is NULL or writable.
unsafe fn made(
    mut t: TypeObj,
    env: Envelope,
    newtype: *mut MPI_Datatype,
    call: &'static str,
) -> Result<(), MpiError> {
    let mut env = env;
    env.keep = env
        .types
        .iter()
        .map(|&h| dtype(h))
        .collect::<Result<_, _>>()?;
    t.envelope = env;
    // SAFETY: the caller's contract.
    unsafe { give(t, newtype, call) }
}

fn contiguous(
    count: i64,
    old: MPI_Datatype,
    f: Form,
    call: &'static str,
) -> Result<(TypeObj, Envelope), MpiError> {
    let t = dtype(old)?;
    let c = n(count, call)?;
    let env = envelope(MPI_COMBINER_CONTIGUOUS, f, &[count], &[], &[old]);
    Ok((build(&[(0, c, t)], false)?, env))
}

/// An envelope: `ints` are the integer arguments (large counts in the `_c` form),
/// `aints` the byte displacements of the `int` form.
fn envelope(
    combiner: c_int,
    f: Form,
    ints: &[i64],
    aints: &[MPI_Aint],
    types: &[MPI_Datatype],
) -> Envelope {
    match f {
        Form::Int => Envelope {
            combiner,
            ints: to_c_ints(ints),
            aints: aints.to_vec(),
            counts: Vec::new(),
            types: types.to_vec(),
            keep: Vec::new(),
        },
        Form::Large => Envelope {
            combiner,
            ints: Vec::new(),
            aints: Vec::new(),
            counts: ints
                .iter()
                .copied()
                .chain(aints.iter().map(|&a| a as i64))
                .collect(),
            types: types.to_vec(),
            keep: Vec::new(),
        },
    }
}

fn hvector(count: usize, bl: usize, stride: isize, t: &Arc<TypeObj>) -> Result<TypeObj, MpiError> {
    let parts: Vec<_> = (0..count)
        .map(|i| (i as isize * stride, bl, t.clone()))
        .collect();
    build(&parts, false)
}

fn blocks(
    bls: &[i64],
    displs: &[isize],
    t: &Arc<TypeObj>,
    call: &'static str,
) -> Result<TypeObj, MpiError> {
    let parts = bls
        .iter()
        .zip(displs)
        .map(|(&b, &d)| Ok((d, n(b, call)?, t.clone())))
        .collect::<Result<Vec<_>, MpiError>>()?;
    build(&parts, false)
}

macro_rules! both {
    ($int:ident, $large:ident, ($($p:ident: $ti:ty => $tl:ty),*), $body:expr) => {
        #[doc = concat!("`", stringify!($int), "`.")]
        #[no_mangle]
        pub unsafe extern "C" fn $int($($p: $ti,)* newtype: *mut MPI_Datatype) -> c_int {
            let f: &dyn Fn(Form) -> Result<(TypeObj, Envelope), MpiError> = &$body;
            // SAFETY: the caller's contract.
            on_self(f(Form::Int).and_then(|(t, e)| unsafe { made(t, e, newtype, stringify!($int)) }))
        }

        #[doc = concat!("`", stringify!($large), "`.")]
        #[no_mangle]
        pub unsafe extern "C" fn $large($($p: $tl,)* newtype: *mut MPI_Datatype) -> c_int {
            let f: &dyn Fn(Form) -> Result<(TypeObj, Envelope), MpiError> = &$body;
            // SAFETY: the caller's contract.
            on_self(f(Form::Large).and_then(|(t, e)| unsafe { made(t, e, newtype, stringify!($large)) }))
        }
    };
}

both!(MPI_Type_contiguous, MPI_Type_contiguous_c, (count: c_int => MPI_Count, oldtype: MPI_Datatype => MPI_Datatype),
    |f| contiguous(count as i64, oldtype, f, "MPI_Type_contiguous"));

both!(MPI_Type_vector, MPI_Type_vector_c,
(count: c_int => MPI_Count, blocklength: c_int => MPI_Count, stride: c_int => MPI_Count, oldtype: MPI_Datatype => MPI_Datatype),
|f| {
    let call = "MPI_Type_vector";
    let t = dtype(oldtype)?;
    let v = hvector(n(count as i64, call)?, n(blocklength as i64, call)?, stride as isize * t.extent, &t)?;
    Ok((v, envelope(MPI_COMBINER_VECTOR, f, &[count as i64, blocklength as i64, stride as i64], &[], &[oldtype])))
});

both!(MPI_Type_create_hvector, MPI_Type_create_hvector_c,
(count: c_int => MPI_Count, blocklength: c_int => MPI_Count, stride: MPI_Aint => MPI_Count, oldtype: MPI_Datatype => MPI_Datatype),
|f| {
    let call = "MPI_Type_create_hvector";
    let t = dtype(oldtype)?;
    let v = hvector(n(count as i64, call)?, n(blocklength as i64, call)?, stride as isize, &t)?;
    Ok((v, envelope(MPI_COMBINER_HVECTOR, f, &[count as i64, blocklength as i64], &[stride as isize], &[oldtype])))
});

/// Reads the arrays of an indexed constructor.
///
/// # Safety
/// `p` holds `count` values.
unsafe fn read<T: Copy + Into<i64>>(
    p: *const T,
    count: usize,
    call: &'static str,
) -> Result<Vec<i64>, MpiError> {
    // SAFETY: the caller's contract.
    Ok(unsafe { array(p, count, call) }?
        .iter()
        .map(|&x| x.into())
        .collect())
}

both!(MPI_Type_indexed, MPI_Type_indexed_c,
(count: c_int => MPI_Count, array_of_blocklengths: *const c_int => *const MPI_Count, array_of_displacements: *const c_int => *const MPI_Count, oldtype: MPI_Datatype => MPI_Datatype),
|f| {
    let call = "MPI_Type_indexed";
    let k = n(count as i64, call)?;
    let t = dtype(oldtype)?;
    // SAFETY: `count` values each (the caller's contract).
    let (bl, dl) = unsafe { (read(array_of_blocklengths, k, call)?, read(array_of_displacements, k, call)?) };
    let displs: Vec<isize> = dl.iter().map(|&d| d as isize * t.extent).collect();
    let v = blocks(&bl, &displs, &t, call)?;
    let args: Vec<i64> = std::iter::once(count as i64).chain(bl).chain(dl).collect();
    Ok((v, envelope(MPI_COMBINER_INDEXED, f, &args, &[], &[oldtype])))
});

both!(MPI_Type_create_hindexed, MPI_Type_create_hindexed_c,
(count: c_int => MPI_Count, array_of_blocklengths: *const c_int => *const MPI_Count, array_of_displacements: *const MPI_Aint => *const MPI_Count, oldtype: MPI_Datatype => MPI_Datatype),
|f| {
    let call = "MPI_Type_create_hindexed";
    let k = n(count as i64, call)?;
    let t = dtype(oldtype)?;
    // SAFETY: `count` values each (the caller's contract).
    let (bl, dl) = unsafe { (read(array_of_blocklengths, k, call)?, read(array_of_displacements.cast::<i64>(), k, call)?) };
    let displs: Vec<isize> = dl.iter().map(|&d| d as isize).collect();
    let v = blocks(&bl, &displs, &t, call)?;
    let args: Vec<i64> = std::iter::once(count as i64).chain(bl).collect();
    Ok((v, envelope(MPI_COMBINER_HINDEXED, f, &args, &displs, &[oldtype])))
});

both!(MPI_Type_create_indexed_block, MPI_Type_create_indexed_block_c,
(count: c_int => MPI_Count, blocklength: c_int => MPI_Count, array_of_displacements: *const c_int => *const MPI_Count, oldtype: MPI_Datatype => MPI_Datatype),
|f| {
    let call = "MPI_Type_create_indexed_block";
    let k = n(count as i64, call)?;
    let t = dtype(oldtype)?;
    // SAFETY: `count` values (the caller's contract).
    let dl = unsafe { read(array_of_displacements, k, call)? };
    let displs: Vec<isize> = dl.iter().map(|&d| d as isize * t.extent).collect();
    let v = blocks(&vec![blocklength as i64; k], &displs, &t, call)?;
    let args: Vec<i64> = [count as i64, blocklength as i64].into_iter().chain(dl).collect();
    Ok((v, envelope(MPI_COMBINER_INDEXED_BLOCK, f, &args, &[], &[oldtype])))
});

both!(MPI_Type_create_hindexed_block, MPI_Type_create_hindexed_block_c,
(count: c_int => MPI_Count, blocklength: c_int => MPI_Count, array_of_displacements: *const MPI_Aint => *const MPI_Count, oldtype: MPI_Datatype => MPI_Datatype),
|f| {
    let call = "MPI_Type_create_hindexed_block";
    let k = n(count as i64, call)?;
    let t = dtype(oldtype)?;
    // SAFETY: `count` values (the caller's contract).
    let dl = unsafe { read(array_of_displacements.cast::<i64>(), k, call)? };
    let displs: Vec<isize> = dl.iter().map(|&d| d as isize).collect();
    let v = blocks(&vec![blocklength as i64; k], &displs, &t, call)?;
    Ok((v, envelope(MPI_COMBINER_HINDEXED_BLOCK, f, &[count as i64, blocklength as i64], &displs, &[oldtype])))
});

both!(MPI_Type_create_struct, MPI_Type_create_struct_c,
(count: c_int => MPI_Count, array_of_blocklengths: *const c_int => *const MPI_Count, array_of_displacements: *const MPI_Aint => *const MPI_Count, array_of_types: *const MPI_Datatype => *const MPI_Datatype),
|f| {
    let call = "MPI_Type_create_struct";
    let k = n(count as i64, call)?;
    // SAFETY: `count` values each (the caller's contract).
    let (bl, dl, tl) = unsafe {
        (read(array_of_blocklengths, k, call)?, read(array_of_displacements.cast::<i64>(), k, call)?, array(array_of_types, k, call)?.to_vec())
    };
    let mut parts = Vec::with_capacity(k);
    for i in 0..k {
        parts.push((dl[i] as isize, n(bl[i], call)?, dtype(tl[i])?));
    }
    let displs: Vec<isize> = dl.iter().map(|&d| d as isize).collect();
    let args: Vec<i64> = std::iter::once(count as i64).chain(bl).collect();
    Ok((build(&parts, true)?, envelope(MPI_COMBINER_STRUCT, f, &args, &displs, &tl)))
});

both!(MPI_Type_create_resized, MPI_Type_create_resized_c,
(oldtype: MPI_Datatype => MPI_Datatype, lb: MPI_Aint => MPI_Count, extent: MPI_Aint => MPI_Count),
|f| {
    let t = dtype(oldtype)?;
    let mut v = build(&[(0, 1, t)], false)?;
    v.lb = lb as isize;
    v.extent = extent as isize;
    Ok((v, envelope(MPI_COMBINER_RESIZED, f, &[], &[lb as isize, extent as isize], &[oldtype])))
});

/// A type of the given global indices per dimension (`idx[d]`, sorted) of an array of
/// `sizes` elements of `t` in `order`, with lower bound 0 and the whole array's extent.
/// Consecutive indices of the fastest dimension are one part (`n` copies of `t`), so a
/// block of a large array costs a part per row, not per element.
fn grid(
    sizes: &[usize],
    idx: &[Vec<usize>],
    order: c_int,
    t: &Arc<TypeObj>,
) -> Result<TypeObj, MpiError> {
    let nd = sizes.len();
    // Dimensions from slowest to fastest varying.
    let dims: Vec<usize> = if order == MPI_ORDER_FORTRAN {
        (0..nd).rev().collect()
    } else {
        (0..nd).collect()
    };
    let mut stride = vec![0isize; nd];
    let mut s = t.extent;
    for &d in dims.iter().rev() {
        stride[d] = s;
        s *= sizes[d] as isize;
    }
    let total = s;
    let mut parts = Vec::new();
    if let Some(&fast) = dims.last().filter(|_| idx.iter().all(|v| !v.is_empty())) {
        // The fastest dimension's indices as runs of consecutive ones.
        let mut runs: Vec<(usize, usize)> = Vec::new();
        for &i in &idx[fast] {
            match runs.last_mut() {
                Some((first, n)) if *first + *n == i => *n += 1,
                _ => runs.push((i, 1)),
            }
        }
        let mut pos = vec![0usize; nd];
        'outer: loop {
            let row: isize = dims[..nd - 1]
                .iter()
                .map(|&d| idx[d][pos[d]] as isize * stride[d])
                .sum();
            for &(first, n) in &runs {
                parts.push((row + first as isize * stride[fast], n, t.clone()));
            }
            for &d in dims[..nd - 1].iter().rev() {
                pos[d] += 1;
                if pos[d] < idx[d].len() {
                    continue 'outer;
                }
                pos[d] = 0;
            }
            break;
        }
    }
    let mut v = build(&parts, false)?;
    v.lb = 0;
    v.extent = total;
    Ok(v)
}

both!(MPI_Type_create_subarray, MPI_Type_create_subarray_c,
(ndims: c_int => c_int, array_of_sizes: *const c_int => *const MPI_Count, array_of_subsizes: *const c_int => *const MPI_Count, array_of_starts: *const c_int => *const MPI_Count, order: c_int => c_int, oldtype: MPI_Datatype => MPI_Datatype),
|f| {
    let call = "MPI_Type_create_subarray";
    let nd = n(ndims as i64, call)?;
    let t = dtype(oldtype)?;
    // SAFETY: `ndims` values each (the caller's contract).
    let (sz, sub, st) = unsafe { (read(array_of_sizes, nd, call)?, read(array_of_subsizes, nd, call)?, read(array_of_starts, nd, call)?) };
    if order != MPI_ORDER_C && order != MPI_ORDER_FORTRAN {
        return Err(MpiError::invalid(MPI_ERR_ARG, format!("{call}: order {order} is neither MPI_ORDER_C nor MPI_ORDER_FORTRAN")));
    }
    let mut idx = Vec::with_capacity(nd);
    let mut sizes = Vec::with_capacity(nd);
    for d in 0..nd {
        if sz[d] <= 0 || sub[d] <= 0 || st[d] < 0 || st[d] + sub[d] > sz[d] {
            return Err(MpiError::invalid(MPI_ERR_ARG, format!("{call}: dimension {d}: size {}, subsize {}, start {} do not nest", sz[d], sub[d], st[d])));
        }
        sizes.push(sz[d] as usize);
        idx.push((st[d] as usize..(st[d] + sub[d]) as usize).collect::<Vec<_>>());
    }
    let v = grid(&sizes, &idx, order, &t)?;
    let env = match f {
        Form::Int => Envelope {
            combiner: MPI_COMBINER_SUBARRAY,
            ints: std::iter::once(ndims).chain(to_c_ints(&sz)).chain(to_c_ints(&sub)).chain(to_c_ints(&st)).chain([order]).collect(),
            types: vec![oldtype],
            ..Envelope::default()
        },
        Form::Large => Envelope {
            combiner: MPI_COMBINER_SUBARRAY,
            ints: vec![ndims, order],
            counts: sz.iter().chain(&sub).chain(&st).copied().collect(),
            types: vec![oldtype],
            ..Envelope::default()
        },
    };
    Ok((v, env))
});

/// The global indices process coordinate `p` of `np` holds of a dimension of `g`
/// elements distributed as `distrib` with argument `darg`.
fn dist_indices(
    g: usize,
    distrib: c_int,
    darg: c_int,
    p: usize,
    np: usize,
    call: &'static str,
) -> Result<Vec<usize>, MpiError> {
    match distrib {
        MPI_DISTRIBUTE_NONE => Ok((0..g).collect()),
        MPI_DISTRIBUTE_BLOCK => {
            let b = if darg == MPI_DISTRIBUTE_DFLT_DARG {
                g.div_ceil(np)
            } else {
                darg.max(0) as usize
            };
            if b * np < g {
                return Err(MpiError::invalid(
                    MPI_ERR_ARG,
                    format!("{call}: block {b} times {np} processes does not cover {g} elements"),
                ));
            }
            Ok((p * b..((p + 1) * b).min(g)).collect())
        }
        MPI_DISTRIBUTE_CYCLIC => {
            let b = if darg == MPI_DISTRIBUTE_DFLT_DARG {
                1
            } else {
                darg.max(1) as usize
            };
            Ok((0..g).filter(|i| (i / b) % np == p).collect())
        }
        d => Err(MpiError::invalid(
            MPI_ERR_ARG,
            format!("{call}: distribution {d} is not MPI_DISTRIBUTE_*"),
        )),
    }
}

both!(MPI_Type_create_darray, MPI_Type_create_darray_c,
(size: c_int => c_int, rank: c_int => c_int, ndims: c_int => c_int, array_of_gsizes: *const c_int => *const MPI_Count, array_of_distribs: *const c_int => *const c_int, array_of_dargs: *const c_int => *const c_int, array_of_psizes: *const c_int => *const c_int, order: c_int => c_int, oldtype: MPI_Datatype => MPI_Datatype),
|f| {
    let call = "MPI_Type_create_darray";
    let nd = n(ndims as i64, call)?;
    let t = dtype(oldtype)?;
    // SAFETY: `ndims` values each (the caller's contract).
    let (gs, ds, da, ps) = unsafe {
        (read(array_of_gsizes, nd, call)?, array(array_of_distribs, nd, call)?.to_vec(), array(array_of_dargs, nd, call)?.to_vec(), array(array_of_psizes, nd, call)?.to_vec())
    };
    if ps.iter().map(|&p| p.max(0) as i64).product::<i64>() != i64::from(size) || rank < 0 || rank >= size {
        return Err(MpiError::invalid(MPI_ERR_ARG, format!("{call}: process grid {ps:?} does not hold {size} processes with rank {rank}")));
    }
    // The process grid is row-major whatever the array's order.
    let mut coords = vec![0usize; nd];
    let mut r = rank as usize;
    for d in (0..nd).rev() {
        coords[d] = r % ps[d] as usize;
        r /= ps[d] as usize;
    }
    let mut idx = Vec::with_capacity(nd);
    for d in 0..nd {
        idx.push(dist_indices(gs[d].max(0) as usize, ds[d], da[d], coords[d], ps[d] as usize, call)?);
    }
    let sizes: Vec<usize> = gs.iter().map(|&g| g.max(0) as usize).collect();
    let v = grid(&sizes, &idx, order, &t)?;
    let tail: Vec<c_int> = ds.iter().chain(&da).chain(&ps).copied().chain([order]).collect();
    let env = match f {
        Form::Int => Envelope {
            combiner: MPI_COMBINER_DARRAY,
            ints: [size, rank, ndims].into_iter().chain(to_c_ints(&gs)).chain(tail).collect(),
            types: vec![oldtype],
            ..Envelope::default()
        },
        Form::Large => Envelope {
            combiner: MPI_COMBINER_DARRAY,
            ints: [size, rank, ndims].into_iter().chain(tail).collect(),
            counts: gs.clone(),
            types: vec![oldtype],
            ..Envelope::default()
        },
    };
    Ok((v, env))
});

/// `MPI_Type_dup`: a copy with the same state (committed or not).
#[no_mangle]
pub unsafe extern "C" fn MPI_Type_dup(oldtype: MPI_Datatype, newtype: *mut MPI_Datatype) -> c_int {
    let r = (|| {
        let t = dtype(oldtype)?;
        let mut v = build(&[(0, 1, t.clone())], false)?;
        v.lb = t.lb;
        v.extent = t.extent;
        v.committed
            .store(t.committed.load(Ordering::Acquire), Ordering::Release);
        let env = Envelope {
            combiner: MPI_COMBINER_DUP,
            types: vec![oldtype],
            ..Envelope::default()
        };
        crate::comm::attr::copy_all(oldtype, &t.attrs, &v.attrs)?;
        // SAFETY: the caller's contract.
        unsafe { made(v, env, newtype, "MPI_Type_dup") }
    })();
    if r.is_err() && !newtype.is_null() {
        // As MPI_Comm_dup's on a copy callback's error (MPI 4.1, 7.7.2), and as MPICH
        // writes: no handle of a half-made type.
        // SAFETY: non-NULL, writable (the caller's contract).
        unsafe { *newtype = MPI_DATATYPE_NULL };
    }
    on_self(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The type of the indices, one part per element (the definition).
    fn model(sizes: &[usize], idx: &[Vec<usize>], order: c_int, t: &Arc<TypeObj>) -> TypeObj {
        let nd = sizes.len();
        let offset = |ix: &[usize]| -> isize {
            let mut o = 0isize;
            let dims: Vec<usize> = if order == MPI_ORDER_FORTRAN {
                (0..nd).rev().collect()
            } else {
                (0..nd).collect()
            };
            for &d in &dims {
                o = o * sizes[d] as isize + ix[d] as isize;
            }
            o * t.extent
        };
        let mut all: Vec<Vec<usize>> = vec![Vec::new()];
        for v in idx {
            all = all
                .into_iter()
                .flat_map(|p| v.iter().map(move |&i| [p.clone(), vec![i]].concat()))
                .collect();
        }
        let mut parts: Vec<_> = all.iter().map(|ix| (offset(ix), 1, t.clone())).collect();
        parts.sort_by_key(|p| p.0);
        let mut v = build(&parts, false).expect("build");
        v.lb = 0;
        v.extent = sizes.iter().product::<usize>() as isize * t.extent;
        v
    }

    #[test]
    fn grids_of_rows_are_the_grids_of_elements() {
        let int = crate::datatype::committed(MPI_INT, "test").expect("MPI_INT");
        let cases: &[(&[usize], &[&[usize]])] = &[
            (&[5], &[&[1, 2, 3]]),
            (&[4, 6], &[&[0, 1], &[2, 3, 4]]),
            (&[4, 6], &[&[1, 3], &[0, 2, 3, 5]]),
            (&[3, 4, 5], &[&[0, 1, 2], &[1, 2], &[0, 1, 2, 3, 4]]),
            (&[3, 4, 5], &[&[2], &[0, 3], &[1, 3, 4]]),
        ];
        for &(sizes, idx) in cases {
            let idx: Vec<Vec<usize>> = idx.iter().map(|v| v.to_vec()).collect();
            for order in [MPI_ORDER_C, MPI_ORDER_FORTRAN] {
                let got = grid(sizes, &idx, order, &int).expect("grid");
                let want = model(sizes, &idx, order, &int);
                assert_eq!(got.blocks, want.blocks, "{sizes:?} {idx:?} order {order}");
                assert_eq!(
                    (got.size, got.lb, got.extent),
                    (want.size, want.lb, want.extent)
                );
            }
        }
    }
}
