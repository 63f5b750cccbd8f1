//! Virtual topologies: Cartesian, graph and distributed graph communicators, and the
//! neighbourhood collectives over them (on `Communicator::iexchange_keyed`: a
//! Cartesian block sent towards +d is received from the -d side, by key, so that a
//! rank that is both neighbours of a dimension gets each block in its place).

use std::ffi::{c_int, c_void};
use std::sync::{Arc, PoisonError};

use crate::abi::*;
use crate::coll::vcoll::{nonblocking, run, xfer_start, In, OutB, Xfer};
use crate::comm::{comm, insert_child, CommObj, Topo};
use crate::datatype::{array, block, committed, count as ccount};
use crate::env::errhandler::{on_comm, on_self};
use crate::env::error::MpiError;
use crate::out::out;
use crate::p2p::request::Start;

fn topo(c: &CommObj) -> Option<Topo> {
    c.topo
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone()
}

fn ints(p: *const c_int, n: usize, call: &'static str) -> Result<Vec<c_int>, MpiError> {
    // SAFETY: `n` values (MPI's contract).
    Ok(unsafe { array(p, n, call) }?.to_vec())
}

fn cart(c: &CommObj, call: &'static str) -> Result<(Vec<c_int>, Vec<bool>), MpiError> {
    match topo(c) {
        Some(Topo::Cart { dims, periods }) => Ok((dims, periods)),
        _ => Err(MpiError::invalid(
            MPI_ERR_TOPOLOGY,
            format!("{call}: the communicator has no Cartesian topology"),
        )),
    }
}

fn coords_of(dims: &[c_int], mut r: c_int) -> Vec<c_int> {
    let mut c = vec![0; dims.len()];
    for d in (0..dims.len()).rev() {
        let n = dims[d].max(1);
        c[d] = r % n;
        r /= n;
    }
    c
}

fn rank_of(dims: &[c_int], periods: &[bool], coords: &[c_int]) -> Option<c_int> {
    let mut r = 0;
    for d in 0..dims.len() {
        let mut x = coords[d];
        if periods[d] {
            x = x.rem_euclid(dims[d].max(1));
        } else if x < 0 || x >= dims[d] {
            return None;
        }
        r = r * dims[d] + x;
    }
    Some(r)
}

/// A new communicator of the first `n` ranks of `old` (reorder is not used), with `t`.
fn make(old: &Arc<CommObj>, n: usize, t: Topo) -> Result<MPI_Comm, MpiError> {
    let me = old.comm.rank() as usize;
    let color = (me < n).then_some(0);
    match old.comm.split(color, me as c_int)? {
        Some(s) => {
            let h = insert_child(old, s)?;
            let c = comm(h, "topology")?;
            *c.topo.lock().unwrap_or_else(PoisonError::into_inner) = Some(t);
            Ok(h)
        }
        None => Ok(MPI_COMM_NULL),
    }
}

/// `MPI_Cart_create`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Cart_create(
    comm_old: MPI_Comm,
    ndims: c_int,
    dims: *const c_int,
    periods: *const c_int,
    reorder: c_int,
    comm_cart: *mut MPI_Comm,
) -> c_int {
    let _ = reorder;
    let r = (|| {
        let call = "MPI_Cart_create";
        let c = comm(comm_old, call)?;
        let nd = crate::datatype::nonneg(ndims, call)?;
        let d = ints(dims, nd, call)?;
        let p: Vec<bool> = ints(periods, nd, call)?.iter().map(|&x| x != 0).collect();
        if d.iter().any(|&x| x <= 0) {
            return Err(MpiError::invalid(
                MPI_ERR_DIMS,
                format!("{call}: dimensions {d:?} must be positive"),
            ));
        }
        let n: i64 = d.iter().map(|&x| i64::from(x)).product();
        if n > i64::from(c.comm.size()) {
            return Err(MpiError::invalid(
                MPI_ERR_DIMS,
                format!(
                    "{call}: a grid of {n} is larger than the communicator of {}",
                    c.comm.size()
                ),
            ));
        }
        let h = make(
            &c,
            n as usize,
            Topo::Cart {
                dims: d,
                periods: p,
            },
        )?;
        // SAFETY: the caller's contract.
        unsafe { out(comm_cart, h, call) }
    })();
    if r.is_err() && !comm_cart.is_null() {
        // MPI leaves the output of a failed call undefined; MPI_COMM_NULL, as MPICH
        // writes, keeps a program that goes on from using a stale handle.
        // SAFETY: non-NULL, writable (the caller's contract).
        unsafe { *comm_cart = MPI_COMM_NULL };
    }
    on_comm(comm_old, r)
}

/// `n` as `k` factors of at most `cap` each, in non-increasing order, the largest as
/// small as it can be, then the next, and so on; `None` when there is no such product
/// (`k` = 0 and `n` > 1).
fn balanced(n: i64, k: usize, cap: i64) -> Option<Vec<i64>> {
    match k {
        0 => (n == 1).then(Vec::new),
        1 => (n <= cap).then(|| vec![n]),
        _ => {
            // The largest factor is at least the k-th root of n.
            let mut d = (n as f64).powf(1.0 / k as f64).floor().max(1.0) as i64;
            while d > 1 && (d - 1).checked_pow(k as u32).is_none_or(|p| p >= n) {
                d -= 1;
            }
            while d <= n.min(cap) {
                if n % d == 0 {
                    if let Some(mut rest) = balanced(n / d, k - 1, d) {
                        rest.insert(0, d);
                        return Some(rest);
                    }
                }
                d += 1;
            }
            None
        }
    }
}

/// `MPI_Dims_create`: fills the zero entries of `dims` with a balanced factorisation.
#[no_mangle]
pub unsafe extern "C" fn MPI_Dims_create(nnodes: c_int, ndims: c_int, dims: *mut c_int) -> c_int {
    let r = (|| {
        let call = "MPI_Dims_create";
        let nd = crate::datatype::nonneg(ndims, call)?;
        if nnodes < 0 {
            return Err(MpiError::invalid(
                MPI_ERR_ARG,
                format!("{call}: nnodes {nnodes} is negative"),
            ));
        }
        let mut d = ints(dims, nd, call)?;
        let fixed: i64 = d
            .iter()
            .filter(|&&x| x > 0)
            .map(|&x| i64::from(x))
            .product();
        if d.iter().any(|&x| x < 0) || (fixed > 0 && i64::from(nnodes) % fixed != 0) {
            return Err(MpiError::invalid(
                MPI_ERR_DIMS,
                format!("{call}: {nnodes} nodes cannot be arranged with {d:?}"),
            ));
        }
        let free: Vec<usize> = (0..nd).filter(|&i| d[i] == 0).collect();
        let rest = if fixed == 0 {
            0
        } else {
            i64::from(nnodes) / fixed
        };
        // The dimensions as close to each other as the factors allow: the smallest
        // largest dimension, then the same for the others (MPICH's 72 in 2-D is 9 x 8,
        // where dealing the prime factors out gave 12 x 6).
        let vals = match balanced(rest.max(1), free.len(), rest.max(1)) {
            Some(v) => v,
            None => {
                return Err(MpiError::invalid(
                    MPI_ERR_DIMS,
                    format!("{call}: {nnodes} nodes cannot be arranged with {d:?}"),
                ))
            }
        };
        for (k, &i) in free.iter().enumerate() {
            d[i] = vals[k] as c_int;
        }
        // SAFETY: `ndims` writable values (the caller's contract).
        unsafe { std::ptr::copy_nonoverlapping(d.as_ptr(), dims, nd) };
        Ok(())
    })();
    on_self(r)
}

/// `MPI_Topo_test`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Topo_test(comm: MPI_Comm, status: *mut c_int) -> c_int {
    let r = self::comm(comm, "MPI_Topo_test").and_then(|c| {
        let v = match topo(&c) {
            Some(Topo::Cart { .. }) => MPI_CART,
            Some(Topo::Graph { .. }) => MPI_GRAPH,
            Some(Topo::Dist { .. }) => MPI_DIST_GRAPH,
            None => MPI_UNDEFINED,
        };
        // SAFETY: the caller's contract.
        unsafe { out(status, v, "MPI_Topo_test") }
    });
    on_comm(comm, r)
}

/// `MPI_Cartdim_get`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Cartdim_get(comm: MPI_Comm, ndims: *mut c_int) -> c_int {
    let r = self::comm(comm, "MPI_Cartdim_get").and_then(|c| {
        let (d, _) = cart(&c, "MPI_Cartdim_get")?;
        // SAFETY: the caller's contract.
        unsafe { out(ndims, d.len() as c_int, "MPI_Cartdim_get") }
    });
    on_comm(comm, r)
}

/// # Safety
/// `p` is NULL or holds `v.len()` writable values.
unsafe fn put(p: *mut c_int, v: &[c_int]) {
    if !p.is_null() && !v.is_empty() {
        // SAFETY: the caller's contract.
        unsafe { std::ptr::copy_nonoverlapping(v.as_ptr(), p, v.len()) };
    }
}

/// `MPI_Cart_get`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Cart_get(
    comm: MPI_Comm,
    maxdims: c_int,
    dims: *mut c_int,
    periods: *mut c_int,
    coords: *mut c_int,
) -> c_int {
    let r = self::comm(comm, "MPI_Cart_get").and_then(|c| {
        let (d, p) = cart(&c, "MPI_Cart_get")?;
        let n = d.len().min(maxdims.max(0) as usize);
        let co = coords_of(&d, c.comm.rank() as c_int);
        let pi: Vec<c_int> = p.iter().map(|&x| c_int::from(x)).collect();
        // SAFETY: `maxdims` writable values each (the caller's contract).
        unsafe {
            put(dims, &d[..n]);
            put(periods, &pi[..n]);
            put(coords, &co[..n]);
        }
        Ok(())
    });
    on_comm(comm, r)
}

/// `MPI_Cart_rank`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Cart_rank(
    comm: MPI_Comm,
    coords: *const c_int,
    rank: *mut c_int,
) -> c_int {
    let r = self::comm(comm, "MPI_Cart_rank").and_then(|c| {
        let (d, p) = cart(&c, "MPI_Cart_rank")?;
        let co = ints(coords, d.len(), "MPI_Cart_rank")?;
        let v = rank_of(&d, &p, &co).ok_or_else(|| {
            MpiError::invalid(
                MPI_ERR_ARG,
                format!("MPI_Cart_rank: coordinates {co:?} are outside the grid {d:?}"),
            )
        })?;
        // SAFETY: the caller's contract.
        unsafe { out(rank, v, "MPI_Cart_rank") }
    });
    on_comm(comm, r)
}

/// `MPI_Cart_coords`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Cart_coords(
    comm: MPI_Comm,
    rank: c_int,
    maxdims: c_int,
    coords: *mut c_int,
) -> c_int {
    let r = self::comm(comm, "MPI_Cart_coords").and_then(|c| {
        let (d, _) = cart(&c, "MPI_Cart_coords")?;
        if rank < 0 || rank >= c.comm.size() as c_int {
            return Err(MpiError::invalid(
                MPI_ERR_RANK,
                format!("MPI_Cart_coords: rank {rank} is not in the grid"),
            ));
        }
        let co = coords_of(&d, rank);
        // SAFETY: `maxdims` writable values (the caller's contract).
        unsafe { put(coords, &co[..d.len().min(maxdims.max(0) as usize)]) };
        Ok(())
    });
    on_comm(comm, r)
}

/// The neighbours of `me` at `disp` along `dir`: (source, destination).
fn shift(d: &[c_int], p: &[bool], me: c_int, dir: usize, disp: c_int) -> (c_int, c_int) {
    let co = coords_of(d, me);
    let at = |delta: c_int| {
        let mut c = co.clone();
        c[dir] += delta;
        rank_of(d, p, &c).unwrap_or(MPI_PROC_NULL)
    };
    (at(-disp), at(disp))
}

/// `MPI_Cart_shift`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Cart_shift(
    comm: MPI_Comm,
    direction: c_int,
    disp: c_int,
    rank_source: *mut c_int,
    rank_dest: *mut c_int,
) -> c_int {
    let r = self::comm(comm, "MPI_Cart_shift").and_then(|c| {
        let (d, p) = cart(&c, "MPI_Cart_shift")?;
        let dir = usize::try_from(direction)
            .ok()
            .filter(|&x| x < d.len())
            .ok_or_else(|| {
                MpiError::invalid(
                    MPI_ERR_ARG,
                    format!(
                        "MPI_Cart_shift: direction {direction} of {} dimensions",
                        d.len()
                    ),
                )
            })?;
        let (s, t) = shift(&d, &p, c.comm.rank() as c_int, dir, disp);
        // SAFETY: the caller's contract.
        unsafe {
            out(rank_source, s, "MPI_Cart_shift")?;
            out(rank_dest, t, "MPI_Cart_shift")
        }
    });
    on_comm(comm, r)
}

/// `MPI_Cart_sub`: the sub-grids keeping the dimensions `remain_dims` says.
#[no_mangle]
pub unsafe extern "C" fn MPI_Cart_sub(
    comm: MPI_Comm,
    remain_dims: *const c_int,
    newcomm: *mut MPI_Comm,
) -> c_int {
    let r = (|| {
        let call = "MPI_Cart_sub";
        let c = self::comm(comm, call)?;
        let (d, p) = cart(&c, call)?;
        let keep: Vec<bool> = ints(remain_dims, d.len(), call)?
            .iter()
            .map(|&x| x != 0)
            .collect();
        let co = coords_of(&d, c.comm.rank() as c_int);
        let mut color = 0i64;
        let mut key = 0i64;
        for i in 0..d.len() {
            if keep[i] {
                key = key * i64::from(d[i]) + i64::from(co[i]);
            } else {
                color = color * i64::from(d[i]) + i64::from(co[i]);
            }
        }
        let sub = c
            .comm
            .split(Some(color as u32), key as c_int)?
            .ok_or_else(|| MpiError::invalid(MPI_ERR_INTERN, "MPI_Cart_sub: no communicator"))?;
        let h = insert_child(&c, sub)?;
        let nd: Vec<c_int> = (0..d.len()).filter(|&i| keep[i]).map(|i| d[i]).collect();
        let np: Vec<bool> = (0..d.len()).filter(|&i| keep[i]).map(|i| p[i]).collect();
        *self::comm(h, call)?
            .topo
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(Topo::Cart {
            dims: nd,
            periods: np,
        });
        // SAFETY: the caller's contract.
        unsafe { out(newcomm, h, call) }
    })();
    on_comm(comm, r)
}

/// `MPI_Cart_map`: this rank's place in such a grid (its own rank, or `MPI_UNDEFINED`).
#[no_mangle]
pub unsafe extern "C" fn MPI_Cart_map(
    comm: MPI_Comm,
    ndims: c_int,
    dims: *const c_int,
    periods: *const c_int,
    newrank: *mut c_int,
) -> c_int {
    let _ = periods;
    let r = self::comm(comm, "MPI_Cart_map").and_then(|c| {
        let d = ints(
            dims,
            crate::datatype::nonneg(ndims, "MPI_Cart_map")?,
            "MPI_Cart_map",
        )?;
        let n: i64 = d.iter().map(|&x| i64::from(x)).product();
        let me = c.comm.rank() as c_int;
        // SAFETY: the caller's contract.
        unsafe {
            out(
                newrank,
                if i64::from(me) < n { me } else { MPI_UNDEFINED },
                "MPI_Cart_map",
            )
        }
    });
    on_comm(comm, r)
}

/// `MPI_Graph_create`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Graph_create(
    comm_old: MPI_Comm,
    nnodes: c_int,
    indx: *const c_int,
    edges: *const c_int,
    reorder: c_int,
    comm_graph: *mut MPI_Comm,
) -> c_int {
    let _ = reorder;
    let r = (|| {
        let call = "MPI_Graph_create";
        let c = comm(comm_old, call)?;
        let n = crate::datatype::nonneg(nnodes, call)?;
        if n > c.comm.size() as usize {
            return Err(MpiError::invalid(
                MPI_ERR_ARG,
                format!("{call}: {n} nodes in a communicator of {}", c.comm.size()),
            ));
        }
        let index = ints(indx, n, call)?;
        let ne = index.last().copied().unwrap_or(0).max(0) as usize;
        let e = ints(edges, ne, call)?;
        if e.iter().any(|&x| x < 0 || x as usize >= n) {
            return Err(MpiError::invalid(
                MPI_ERR_ARG,
                format!("{call}: an edge leads outside the {n} nodes"),
            ));
        }
        let h = make(&c, n, Topo::Graph { index, edges: e })?;
        // SAFETY: the caller's contract.
        unsafe { out(comm_graph, h, call) }
    })();
    on_comm(comm_old, r)
}

fn graph(c: &CommObj, call: &'static str) -> Result<(Vec<c_int>, Vec<c_int>), MpiError> {
    match topo(c) {
        Some(Topo::Graph { index, edges }) => Ok((index, edges)),
        _ => Err(MpiError::invalid(
            MPI_ERR_TOPOLOGY,
            format!("{call}: the communicator has no graph topology"),
        )),
    }
}

fn graph_neighbors(index: &[c_int], edges: &[c_int], r: usize) -> Vec<c_int> {
    let lo = if r == 0 { 0 } else { index[r - 1] as usize };
    let hi = index.get(r).map_or(lo, |&x| x as usize);
    edges.get(lo..hi).unwrap_or(&[]).to_vec()
}

/// `MPI_Graphdims_get`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Graphdims_get(
    comm: MPI_Comm,
    nnodes: *mut c_int,
    nedges: *mut c_int,
) -> c_int {
    let r = self::comm(comm, "MPI_Graphdims_get").and_then(|c| {
        let (i, e) = graph(&c, "MPI_Graphdims_get")?;
        // SAFETY: the caller's contract.
        unsafe {
            out(nnodes, i.len() as c_int, "MPI_Graphdims_get")?;
            out(nedges, e.len() as c_int, "MPI_Graphdims_get")
        }
    });
    on_comm(comm, r)
}

/// `MPI_Graph_get`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Graph_get(
    comm: MPI_Comm,
    maxindex: c_int,
    maxedges: c_int,
    indx: *mut c_int,
    edges: *mut c_int,
) -> c_int {
    let r = self::comm(comm, "MPI_Graph_get").and_then(|c| {
        let (i, e) = graph(&c, "MPI_Graph_get")?;
        // SAFETY: the caller's contract.
        unsafe {
            put(indx, &i[..i.len().min(maxindex.max(0) as usize)]);
            put(edges, &e[..e.len().min(maxedges.max(0) as usize)]);
        }
        Ok(())
    });
    on_comm(comm, r)
}

/// `MPI_Graph_neighbors_count`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Graph_neighbors_count(
    comm: MPI_Comm,
    rank: c_int,
    nneighbors: *mut c_int,
) -> c_int {
    let r = self::comm(comm, "MPI_Graph_neighbors_count").and_then(|c| {
        let (i, e) = graph(&c, "MPI_Graph_neighbors_count")?;
        let r = usize::try_from(rank)
            .ok()
            .filter(|&r| r < i.len())
            .ok_or_else(|| MpiError::invalid(MPI_ERR_RANK, format!("rank {rank} is not a node")))?;
        // SAFETY: the caller's contract.
        unsafe {
            out(
                nneighbors,
                graph_neighbors(&i, &e, r).len() as c_int,
                "MPI_Graph_neighbors_count",
            )
        }
    });
    on_comm(comm, r)
}

/// `MPI_Graph_neighbors`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Graph_neighbors(
    comm: MPI_Comm,
    rank: c_int,
    maxneighbors: c_int,
    neighbors: *mut c_int,
) -> c_int {
    let r = self::comm(comm, "MPI_Graph_neighbors").and_then(|c| {
        let (i, e) = graph(&c, "MPI_Graph_neighbors")?;
        let r = usize::try_from(rank)
            .ok()
            .filter(|&r| r < i.len())
            .ok_or_else(|| MpiError::invalid(MPI_ERR_RANK, format!("rank {rank} is not a node")))?;
        let nb = graph_neighbors(&i, &e, r);
        // SAFETY: the caller's contract.
        unsafe { put(neighbors, &nb[..nb.len().min(maxneighbors.max(0) as usize)]) };
        Ok(())
    });
    on_comm(comm, r)
}

/// `MPI_Graph_map`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Graph_map(
    comm: MPI_Comm,
    nnodes: c_int,
    indx: *const c_int,
    edges: *const c_int,
    newrank: *mut c_int,
) -> c_int {
    let _ = (indx, edges);
    let r = self::comm(comm, "MPI_Graph_map").and_then(|c| {
        let me = c.comm.rank() as c_int;
        // SAFETY: the caller's contract.
        unsafe {
            out(
                newrank,
                if me < nnodes { me } else { MPI_UNDEFINED },
                "MPI_Graph_map",
            )
        }
    });
    on_comm(comm, r)
}

fn weights(p: *const c_int, n: usize, call: &'static str) -> Result<Option<Vec<c_int>>, MpiError> {
    if p as usize == MPI_UNWEIGHTED {
        return Ok(None);
    }
    if p as usize == MPI_WEIGHTS_EMPTY || n == 0 {
        return Ok(Some(Vec::new()));
    }
    Ok(Some(ints(p, n, call)?))
}

/// `MPI_Dist_graph_create_adjacent`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Dist_graph_create_adjacent(
    comm_old: MPI_Comm,
    indegree: c_int,
    sources: *const c_int,
    sourceweights: *const c_int,
    outdegree: c_int,
    destinations: *const c_int,
    destweights: *const c_int,
    info: MPI_Info,
    reorder: c_int,
    comm_dist_graph: *mut MPI_Comm,
) -> c_int {
    let _ = (info, reorder);
    let r = (|| {
        let call = "MPI_Dist_graph_create_adjacent";
        let c = comm(comm_old, call)?;
        let (ni, no) = (
            crate::datatype::nonneg(indegree, call)?,
            crate::datatype::nonneg(outdegree, call)?,
        );
        let t = Topo::Dist {
            sources: ints(sources, ni, call)?,
            sw: weights(sourceweights, ni, call)?,
            dests: ints(destinations, no, call)?,
            dw: weights(destweights, no, call)?,
        };
        let h = make(&c, c.comm.size() as usize, t)?;
        // SAFETY: the caller's contract.
        unsafe { out(comm_dist_graph, h, call) }
    })();
    on_comm(comm_old, r)
}

/// `MPI_Dist_graph_create`: each rank gives some edges; every rank learns its own in-
/// and out-edges (an allgather of the edge lists).
#[no_mangle]
pub unsafe extern "C" fn MPI_Dist_graph_create(
    comm_old: MPI_Comm,
    n: c_int,
    sources: *const c_int,
    degrees: *const c_int,
    destinations: *const c_int,
    weights_: *const c_int,
    info: MPI_Info,
    reorder: c_int,
    comm_dist_graph: *mut MPI_Comm,
) -> c_int {
    let _ = (info, reorder);
    let r = (|| {
        let call = "MPI_Dist_graph_create";
        let c = comm(comm_old, call)?;
        let n = crate::datatype::nonneg(n, call)?;
        let src = ints(sources, n, call)?;
        let deg = ints(degrees, n, call)?;
        let ne: usize = deg.iter().map(|&d| d.max(0) as usize).sum();
        let dst = ints(destinations, ne, call)?;
        let w = weights(weights_, ne, call)?;
        // (source, destination, weight) triplets of this rank, as little-endian i32s.
        let mut mine = Vec::with_capacity(ne * 12);
        let mut k = 0;
        for (s, &d) in src.iter().zip(&deg) {
            for _ in 0..d.max(0) {
                for v in [
                    *s,
                    dst[k],
                    w.as_ref().and_then(|w| w.get(k).copied()).unwrap_or(1),
                ] {
                    mine.extend_from_slice(&v.to_le_bytes());
                }
                k += 1;
            }
        }
        let all = c.comm.allgather_bytes(&mine)?;
        let me = c.comm.rank() as c_int;
        let (mut ins, mut iw, mut outs, mut ow) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for block in &all {
            for e in block.chunks_exact(12) {
                let v = |i: usize| c_int::from_le_bytes([e[i], e[i + 1], e[i + 2], e[i + 3]]);
                let (s, d, wt) = (v(0), v(4), v(8));
                if d == me {
                    ins.push(s);
                    iw.push(wt);
                }
                if s == me {
                    outs.push(d);
                    ow.push(wt);
                }
            }
        }
        let weighted = w.is_some();
        let t = Topo::Dist {
            sources: ins,
            sw: weighted.then_some(iw),
            dests: outs,
            dw: weighted.then_some(ow),
        };
        let h = make(&c, c.comm.size() as usize, t)?;
        // SAFETY: the caller's contract.
        unsafe { out(comm_dist_graph, h, call) }
    })();
    on_comm(comm_old, r)
}

/// `MPI_Dist_graph_neighbors_count`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Dist_graph_neighbors_count(
    comm: MPI_Comm,
    indegree: *mut c_int,
    outdegree: *mut c_int,
    weighted: *mut c_int,
) -> c_int {
    let r = self::comm(comm, "MPI_Dist_graph_neighbors_count").and_then(|c| {
        let (i, o, w) = match topo(&c) {
            Some(Topo::Dist {
                sources, dests, sw, ..
            }) => (sources.len(), dests.len(), sw.is_some()),
            _ => {
                return Err(MpiError::invalid(
                    MPI_ERR_TOPOLOGY,
                    "MPI_Dist_graph_neighbors_count: no distributed graph topology",
                ))
            }
        };
        // SAFETY: the caller's contract.
        unsafe {
            out(indegree, i as c_int, "MPI_Dist_graph_neighbors_count")?;
            out(outdegree, o as c_int, "MPI_Dist_graph_neighbors_count")?;
            out(weighted, c_int::from(w), "MPI_Dist_graph_neighbors_count")
        }
    });
    on_comm(comm, r)
}

/// `MPI_Dist_graph_neighbors`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Dist_graph_neighbors(
    comm: MPI_Comm,
    maxindegree: c_int,
    sources: *mut c_int,
    sourceweights: *mut c_int,
    maxoutdegree: c_int,
    destinations: *mut c_int,
    destweights: *mut c_int,
) -> c_int {
    let r = self::comm(comm, "MPI_Dist_graph_neighbors").and_then(|c| {
        let Some(Topo::Dist {
            sources: s,
            sw,
            dests,
            dw,
        }) = topo(&c)
        else {
            return Err(MpiError::invalid(
                MPI_ERR_TOPOLOGY,
                "MPI_Dist_graph_neighbors: no distributed graph topology",
            ));
        };
        let (ni, no) = (
            s.len().min(maxindegree.max(0) as usize),
            dests.len().min(maxoutdegree.max(0) as usize),
        );
        // SAFETY: the caller's contract.
        unsafe {
            put(sources, &s[..ni]);
            put(destinations, &dests[..no]);
            if let Some(w) = sw {
                if sourceweights as usize != MPI_UNWEIGHTED {
                    put(sourceweights, &w[..ni.min(w.len())]);
                }
            }
            if let Some(w) = dw {
                if destweights as usize != MPI_UNWEIGHTED {
                    put(destweights, &w[..no.min(w.len())]);
                }
            }
        }
        Ok(())
    });
    on_comm(comm, r)
}

/// The neighbourhood of this rank: (in-neighbours, out-neighbours), each with the key
/// its blocks travel with (`MPI_PROC_NULL` entries keep their place and move nothing).
/// Neighbours with the keys their blocks travel with.
type Sides = Vec<(c_int, u8)>;

fn neighbours(c: &CommObj, call: &'static str) -> Result<(Sides, Sides), MpiError> {
    let me = c.comm.rank() as c_int;
    match topo(c) {
        Some(Topo::Cart { dims, periods }) => {
            let (mut ins, mut outs) = (Vec::new(), Vec::new());
            for d in 0..dims.len() {
                let (lo, hi) = shift(&dims, &periods, me, d, 1);
                // Sent towards -d travels with key 2d, towards +d with 2d + 1; received
                // from -d is what its sender sent towards +d.
                let k = (2 * d % 256) as u8;
                ins.push((lo, k.wrapping_add(1)));
                ins.push((hi, k));
                outs.push((lo, k));
                outs.push((hi, k.wrapping_add(1)));
            }
            Ok((ins, outs))
        }
        Some(Topo::Graph { index, edges }) => {
            let nb: Vec<(c_int, u8)> = graph_neighbors(&index, &edges, me as usize)
                .into_iter()
                .map(|r| (r, 0))
                .collect();
            Ok((nb.clone(), nb))
        }
        Some(Topo::Dist { sources, dests, .. }) => Ok((
            sources.into_iter().map(|r| (r, 0)).collect(),
            dests.into_iter().map(|r| (r, 0)).collect(),
        )),
        None => Err(MpiError::invalid(
            MPI_ERR_TOPOLOGY,
            format!("{call}: the communicator has no topology"),
        )),
    }
}

/// The exchange of a neighbourhood collective: out-neighbour j gets `sends[j]`
/// (elements, type, byte offset from `sbuf`), in-neighbour i's block goes to `recvs[i]`.
#[allow(clippy::type_complexity)]
fn neighbor_xfer(
    c: Arc<CommObj>,
    sbuf: usize,
    sends: Vec<(usize, MPI_Datatype, isize)>,
    rbuf: usize,
    recvs: Vec<(usize, MPI_Datatype, isize)>,
    call: &'static str,
) -> Result<Start, MpiError> {
    let (ins, outs) = neighbours(&c, call)?;
    let mut x = Xfer {
        c,
        sends: Vec::new(),
        recvs: Vec::new(),
    };
    for (&(to, key), &(n, dt, off)) in outs.iter().zip(&sends) {
        let t = committed(dt, call)?;
        block(sbuf, off, n, &t, call, "sendbuf")?;
        if to != MPI_PROC_NULL {
            x.sends.push(OutB {
                to: to as u32,
                key,
                n,
                t,
                addr: (sbuf as isize + off) as usize,
            });
        }
    }
    for (&(from, key), &(n, dt, off)) in ins.iter().zip(&recvs) {
        let t = committed(dt, call)?;
        block(rbuf, off, n, &t, call, "recvbuf")?;
        if from != MPI_PROC_NULL {
            x.recvs.push(In {
                from: from as u32,
                key,
                n,
                t,
                addr: (rbuf as isize + off) as usize,
            });
        }
    }
    Ok(xfer_start(x))
}

fn degrees(c: &CommObj, call: &'static str) -> Result<(usize, usize), MpiError> {
    let (i, o) = neighbours(c, call)?;
    Ok((i.len(), o.len()))
}

fn allgather_start(
    comm: MPI_Comm,
    sbuf: usize,
    sc: i64,
    st: MPI_Datatype,
    rbuf: usize,
    rcounts: Option<(Vec<i64>, Vec<i64>)>,
    rc: i64,
    rt: MPI_Datatype,
    call: &'static str,
) -> Result<Start, MpiError> {
    let c = self::comm(comm, call)?;
    let (ni, no) = degrees(&c, call)?;
    let ext = committed(rt, call)?.extent;
    let sn = ccount(sc, call)?;
    let sends = vec![(sn, st, 0isize); no];
    let recvs = match rcounts {
        Some((k, d)) => k
            .iter()
            .zip(&d)
            .map(|(&k, &d)| Ok((ccount(k, call)?, rt, d as isize * ext)))
            .collect::<Result<Vec<_>, MpiError>>()?,
        None => {
            let n = ccount(rc, call)?;
            (0..ni).map(|i| (n, rt, (i * n) as isize * ext)).collect()
        }
    };
    neighbor_xfer(c, sbuf, sends, rbuf, recvs, call)
}

fn alltoall_start(
    comm: MPI_Comm,
    sbuf: usize,
    s: Vec<(usize, MPI_Datatype, isize)>,
    rbuf: usize,
    r: Vec<(usize, MPI_Datatype, isize)>,
    call: &'static str,
) -> Result<Start, MpiError> {
    neighbor_xfer(self::comm(comm, call)?, sbuf, s, rbuf, r, call)
}

/// Uniform blocks of `n` elements of `dt`, one per neighbour.
fn blocks(
    n: i64,
    dt: MPI_Datatype,
    k: usize,
    call: &'static str,
) -> Result<Vec<(usize, MPI_Datatype, isize)>, MpiError> {
    let ext = committed(dt, call)?.extent;
    let n = ccount(n, call)?;
    Ok((0..k).map(|i| (n, dt, (i * n) as isize * ext)).collect())
}

/// Blocks of given counts at element displacements.
///
/// # Safety
/// `counts` and `displs` hold `k` values.
unsafe fn vblocks<C: Copy + Into<i64>, D: Copy + Into<i64>>(
    counts: *const C,
    displs: *const D,
    dt: MPI_Datatype,
    k: usize,
    bytes: bool,
    call: &'static str,
) -> Result<Vec<(usize, MPI_Datatype, isize)>, MpiError> {
    let ext = if bytes {
        1
    } else {
        committed(dt, call)?.extent
    };
    // SAFETY: the caller's contract.
    let (cs, ds) = unsafe { (array(counts, k, call)?, array(displs, k, call)?) };
    cs.iter()
        .zip(ds)
        .map(|(&c, &d)| Ok((ccount(c.into(), call)?, dt, d.into() as isize * ext)))
        .collect()
}

macro_rules! neighbor {
    ($b:ident, $i:ident, $p:ident, $comm:ident; ($($a:ident: $t:ty),*), $make:expr) => {
        #[doc = concat!("`", stringify!($b), "`.")]
        #[no_mangle]
        pub unsafe extern "C" fn $b($($a: $t,)* $comm: MPI_Comm) -> c_int {
            let make: &dyn Fn() -> Result<Start, MpiError> = &$make;
            on_comm($comm, make().and_then(run))
        }

        #[doc = concat!("`", stringify!($i), "`.")]
        #[no_mangle]
        pub unsafe extern "C" fn $i($($a: $t,)* $comm: MPI_Comm, request: *mut MPI_Request) -> c_int {
            let make: &dyn Fn() -> Result<Start, MpiError> = &$make;
            // SAFETY: the caller's contract.
            on_comm($comm, make().and_then(|s| unsafe { nonblocking(s, $comm, request, stringify!($i)) }))
        }

        #[doc = concat!("`", stringify!($p), "`.")]
        #[no_mangle]
        pub unsafe extern "C" fn $p($($a: $t,)* $comm: MPI_Comm, info: MPI_Info, request: *mut MPI_Request) -> c_int {
            let _ = info;
            // The start, on any communicator handle: the collective's own (`pcoll.rs`).
            let args = crate::coll::pcoll::Args(move |$comm: MPI_Comm| -> Result<Start, MpiError> {
                let make: &dyn Fn() -> Result<Start, MpiError> = &$make;
                make()
            });
            let maker: crate::coll::pcoll::Maker = Box::new(move |h| args.make(h));
            // SAFETY: the caller's contract.
            on_comm($comm, unsafe { crate::coll::pcoll::persistent(maker, $comm, request, stringify!($p)) })
        }
    };
}

neighbor!(MPI_Neighbor_allgather, MPI_Ineighbor_allgather, MPI_Neighbor_allgather_init, comm;
    (sendbuf: *const c_void, sendcount: c_int, sendtype: MPI_Datatype, recvbuf: *mut c_void, recvcount: c_int, recvtype: MPI_Datatype),
    || allgather_start(comm, sendbuf as usize, sendcount.into(), sendtype, recvbuf as usize, None, recvcount.into(), recvtype, "MPI_Neighbor_allgather"));

neighbor!(MPI_Neighbor_allgather_c, MPI_Ineighbor_allgather_c, MPI_Neighbor_allgather_init_c, comm;
    (sendbuf: *const c_void, sendcount: MPI_Count, sendtype: MPI_Datatype, recvbuf: *mut c_void, recvcount: MPI_Count, recvtype: MPI_Datatype),
    || allgather_start(comm, sendbuf as usize, sendcount, sendtype, recvbuf as usize, None, recvcount, recvtype, "MPI_Neighbor_allgather_c"));

neighbor!(MPI_Neighbor_allgatherv, MPI_Ineighbor_allgatherv, MPI_Neighbor_allgatherv_init, comm;
(sendbuf: *const c_void, sendcount: c_int, sendtype: MPI_Datatype, recvbuf: *mut c_void, recvcounts: *const c_int, displs: *const c_int, recvtype: MPI_Datatype),
|| {
    let call = "MPI_Neighbor_allgatherv";
    let (ni, _) = degrees(&*self::comm(comm, call)?, call)?;
    // SAFETY: in-degree values each (the caller's contract).
    let (k, d) = unsafe { (array(recvcounts, ni, call)?.iter().map(|&x| i64::from(x)).collect(), array(displs, ni, call)?.iter().map(|&x| i64::from(x)).collect()) };
    allgather_start(comm, sendbuf as usize, sendcount.into(), sendtype, recvbuf as usize, Some((k, d)), 0, recvtype, call)
});

neighbor!(MPI_Neighbor_allgatherv_c, MPI_Ineighbor_allgatherv_c, MPI_Neighbor_allgatherv_init_c, comm;
(sendbuf: *const c_void, sendcount: MPI_Count, sendtype: MPI_Datatype, recvbuf: *mut c_void, recvcounts: *const MPI_Count, displs: *const MPI_Aint, recvtype: MPI_Datatype),
|| {
    let call = "MPI_Neighbor_allgatherv_c";
    let (ni, _) = degrees(&*self::comm(comm, call)?, call)?;
    // SAFETY: in-degree values each (the caller's contract).
    let (k, d) = unsafe { (array(recvcounts, ni, call)?.to_vec(), array(displs, ni, call)?.iter().map(|&x| x as i64).collect()) };
    allgather_start(comm, sendbuf as usize, sendcount, sendtype, recvbuf as usize, Some((k, d)), 0, recvtype, call)
});

neighbor!(MPI_Neighbor_alltoall, MPI_Ineighbor_alltoall, MPI_Neighbor_alltoall_init, comm;
(sendbuf: *const c_void, sendcount: c_int, sendtype: MPI_Datatype, recvbuf: *mut c_void, recvcount: c_int, recvtype: MPI_Datatype),
|| {
    let call = "MPI_Neighbor_alltoall";
    let (ni, no) = degrees(&*self::comm(comm, call)?, call)?;
    alltoall_start(comm, sendbuf as usize, blocks(sendcount.into(), sendtype, no, call)?, recvbuf as usize, blocks(recvcount.into(), recvtype, ni, call)?, call)
});

neighbor!(MPI_Neighbor_alltoall_c, MPI_Ineighbor_alltoall_c, MPI_Neighbor_alltoall_init_c, comm;
(sendbuf: *const c_void, sendcount: MPI_Count, sendtype: MPI_Datatype, recvbuf: *mut c_void, recvcount: MPI_Count, recvtype: MPI_Datatype),
|| {
    let call = "MPI_Neighbor_alltoall_c";
    let (ni, no) = degrees(&*self::comm(comm, call)?, call)?;
    alltoall_start(comm, sendbuf as usize, blocks(sendcount, sendtype, no, call)?, recvbuf as usize, blocks(recvcount, recvtype, ni, call)?, call)
});

neighbor!(MPI_Neighbor_alltoallv, MPI_Ineighbor_alltoallv, MPI_Neighbor_alltoallv_init, comm;
(sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const c_int, sendtype: MPI_Datatype, recvbuf: *mut c_void, recvcounts: *const c_int, rdispls: *const c_int, recvtype: MPI_Datatype),
|| {
    let call = "MPI_Neighbor_alltoallv";
    let (ni, no) = degrees(&*self::comm(comm, call)?, call)?;
    // SAFETY: degree values each (the caller's contract).
    let (s, r) = unsafe { (vblocks(sendcounts, sdispls, sendtype, no, false, call)?, vblocks(recvcounts, rdispls, recvtype, ni, false, call)?) };
    alltoall_start(comm, sendbuf as usize, s, recvbuf as usize, r, call)
});

neighbor!(MPI_Neighbor_alltoallv_c, MPI_Ineighbor_alltoallv_c, MPI_Neighbor_alltoallv_init_c, comm;
(sendbuf: *const c_void, sendcounts: *const MPI_Count, sdispls: *const MPI_Aint, sendtype: MPI_Datatype, recvbuf: *mut c_void, recvcounts: *const MPI_Count, rdispls: *const MPI_Aint, recvtype: MPI_Datatype),
|| {
    let call = "MPI_Neighbor_alltoallv_c";
    let (ni, no) = degrees(&*self::comm(comm, call)?, call)?;
    // SAFETY: degree values each (the caller's contract).
    let (s, r) = unsafe { (vblocks(sendcounts, sdispls.cast::<i64>(), sendtype, no, false, call)?, vblocks(recvcounts, rdispls.cast::<i64>(), recvtype, ni, false, call)?) };
    alltoall_start(comm, sendbuf as usize, s, recvbuf as usize, r, call)
});

/// Blocks of per-neighbour types at byte displacements.
///
/// # Safety
/// The arrays hold `k` values each.
unsafe fn wblocks<C: Copy + Into<i64>>(
    counts: *const C,
    displs: *const MPI_Aint,
    types: *const MPI_Datatype,
    k: usize,
    call: &'static str,
) -> Result<Vec<(usize, MPI_Datatype, isize)>, MpiError> {
    // SAFETY: the caller's contract.
    let (cs, ds, ts) = unsafe {
        (
            array(counts, k, call)?,
            array(displs, k, call)?,
            array(types, k, call)?,
        )
    };
    (0..k)
        .map(|i| Ok((ccount(cs[i].into(), call)?, ts[i], ds[i])))
        .collect()
}

neighbor!(MPI_Neighbor_alltoallw, MPI_Ineighbor_alltoallw, MPI_Neighbor_alltoallw_init, comm;
(sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const MPI_Aint, sendtypes: *const MPI_Datatype, recvbuf: *mut c_void, recvcounts: *const c_int, rdispls: *const MPI_Aint, recvtypes: *const MPI_Datatype),
|| {
    let call = "MPI_Neighbor_alltoallw";
    let (ni, no) = degrees(&*self::comm(comm, call)?, call)?;
    // SAFETY: degree values each (the caller's contract).
    let (s, r) = unsafe { (wblocks(sendcounts, sdispls, sendtypes, no, call)?, wblocks(recvcounts, rdispls, recvtypes, ni, call)?) };
    alltoall_start(comm, sendbuf as usize, s, recvbuf as usize, r, call)
});

neighbor!(MPI_Neighbor_alltoallw_c, MPI_Ineighbor_alltoallw_c, MPI_Neighbor_alltoallw_init_c, comm;
(sendbuf: *const c_void, sendcounts: *const MPI_Count, sdispls: *const MPI_Aint, sendtypes: *const MPI_Datatype, recvbuf: *mut c_void, recvcounts: *const MPI_Count, rdispls: *const MPI_Aint, recvtypes: *const MPI_Datatype),
|| {
    let call = "MPI_Neighbor_alltoallw_c";
    let (ni, no) = degrees(&*self::comm(comm, call)?, call)?;
    // SAFETY: degree values each (the caller's contract).
    let (s, r) = unsafe { (wblocks(sendcounts, sdispls, sendtypes, no, call)?, wblocks(recvcounts, rdispls, recvtypes, ni, call)?) };
    alltoall_start(comm, sendbuf as usize, s, recvbuf as usize, r, call)
});
