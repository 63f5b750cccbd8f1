"""The mpi4py side of the Python benchmarks: the programs a user writes with mpi4py's
buffer (upper-case) API on numpy arrays. Run under Open MPI's launcher:

    mpirun --oversubscribe -n 2 python bench/python/bench_mpi4py.py pingpong
    mpirun --oversubscribe -n 4 python bench/python/bench_mpi4py.py coll
    mpirun --oversubscribe -n 4 python bench/python/bench_mpi4py.py redist

or, unchanged, with mpi4py built against the MPI standard ABI (target/mpi-venv, see
scripts/mpi-abi-env.sh) on Spools' libmpi_abi.so.1:

    spools run -n 2 -- target/mpi-venv/bin/python bench/python/bench_mpi4py.py pingpong

Rank 0 prints one line `BENCH {json}` (read by run.py) with the first line of
MPI.Get_library_version() as "library", after checking that every rank loaded the same
library. Every case checks its result once against a numpy reference before it is timed
(see common.py for the timing discipline).
"""

import os
import sys

import numpy as np
from mpi4py import MPI

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common as c  # noqa: E402

IMPL = "mpi4py"


def slowest(comm, dt):
    return comm.allreduce(dt, op=MPI.MAX)


def pingpong(comm):
    rank = comm.Get_rank()
    c.check(comm.Get_size() == 2, "pingpong runs on 2 ranks")
    results = {}
    for name, n, warm, reps in c.PINGPONG:
        buf = np.zeros(n, dtype=np.float64)
        ref = np.arange(n, dtype=np.float64) + 1.0
        if rank == 0:
            buf[:] = ref
            comm.Send(buf, dest=1, tag=1)
            comm.Recv(buf, source=1, tag=1)
            c.check(np.array_equal(buf, 2.0 * ref), "mpi4py pingpong %s echo" % name)
        else:
            comm.Recv(buf, source=0, tag=1)
            c.check(np.array_equal(buf, ref), "mpi4py pingpong %s receive" % name)
            buf *= 2.0
            comm.Send(buf, dest=0, tag=1)

        def loop(k):
            if rank == 0:
                for _ in range(k):
                    comm.Send(buf, dest=1, tag=0)
                    comm.Recv(buf, source=1, tag=0)
            else:
                for _ in range(k):
                    comm.Recv(buf, source=0, tag=0)
                    comm.Send(buf, dest=0, tag=0)

        loop(warm)
        times = []
        for _ in range(c.PINGPONG_BATCHES):
            comm.Barrier()
            t0 = c.clock()
            loop(reps)
            times.append((c.clock() - t0) / reps / 2.0)
        one_way = c.median(times)
        results[name] = {"one_way_us": one_way * 1e6, "mb_s": n * 8 / one_way / 1e6}
    return results


def coll(comm):
    rank, size = comm.Get_rank(), comm.Get_size()
    results = {}
    for name, op, n, warm, reps in c.COLL:
        if op == "allreduce":
            a = np.full(n, rank + 1.0)
            out = np.empty(n)
            comm.Allreduce(a, out, op=MPI.SUM)
            c.check(np.all(out == size * (size + 1) / 2.0), "mpi4py %s" % name)

            def call(a=a, out=out):
                comm.Allreduce(a, out, op=MPI.SUM)

        else:
            ref = np.arange(n, dtype=np.float64) + 3.0
            a = ref.copy() if rank == 0 else np.zeros(n)
            comm.Bcast(a, root=0)
            c.check(np.array_equal(a, ref), "mpi4py %s" % name)

            def call(a=a):
                comm.Bcast(a, root=0)

        for _ in range(warm):
            call()
        times = []
        for _ in range(c.COLL_BATCHES):
            comm.Barrier()
            t0 = c.clock()
            for _ in range(reps):
                call()
            times.append(slowest(comm, (c.clock() - t0) / reps))
        results[name] = {"us": c.median(times) * 1e6}
    return results


# --- the redistribution a user writes with mpi4py ------------------------------------------


def as_index(ix):
    """A contiguous run of indices as a slice (a view, no gather), else the index array."""
    if len(ix) > 0 and ix[-1] - ix[0] + 1 == len(ix):
        return slice(int(ix[0]), int(ix[-1]) + 1)
    return ix


def take(a, ri, ci):
    r, col = as_index(ri), as_index(ci)
    if isinstance(r, slice) or isinstance(col, slice):
        return a[r, col]
    return a[np.ix_(r, col)]


def put(out, ri, ci, block):
    r, col = as_index(ri), as_index(ci)
    if isinstance(r, slice) or isinstance(col, slice):
        out[r, col] = block
    else:
        out[np.ix_(r, col)] = block


def redistribute(comm, a, src, dst, n=c.N):
    """Moves this rank's part `a` of an n x n float64 array distributed as `src` to its
    part under `dst` (each a pair (dists, grid) such as ("block,*", (4, 1))): send counts
    per destination, packing with numpy indexing, one Alltoallv, unpacking."""
    me, size = comm.Get_rank(), comm.Get_size()
    (sdists, sgrid), (ddists, dgrid) = src, dst
    sd, dd = sdists.split(","), ddists.split(",")
    # Who owns each global row and column under each distribution.
    s_row_owner, _ = c.owner_and_local(n, sgrid[0], sd[0])
    s_col_owner, _ = c.owner_and_local(n, sgrid[1], sd[1])
    d_row_owner, _ = c.owner_and_local(n, dgrid[0], dd[0])
    d_col_owner, _ = c.owner_and_local(n, dgrid[1], dd[1])

    # Pack: for every destination, the rows and columns of `a` it owns.
    my_rows, my_cols = c.global_indices(me, sdists, sgrid, n)
    pieces, sendcounts = [], []
    for d in range(size):
        dr, dc = c.coords(d, dgrid)
        ri = np.nonzero(d_row_owner[my_rows] == dr)[0]
        ci = np.nonzero(d_col_owner[my_cols] == dc)[0]
        pieces.append(take(a, ri, ci).ravel())
        sendcounts.append(len(ri) * len(ci))
    sendbuf = np.concatenate(pieces)

    # What comes from every source, and where it goes in the result.
    out_rows, out_cols = c.global_indices(me, ddists, dgrid, n)
    places, recvcounts = [], []
    for s in range(size):
        sr, sc = c.coords(s, sgrid)
        ri = np.nonzero(s_row_owner[out_rows] == sr)[0]
        ci = np.nonzero(s_col_owner[out_cols] == sc)[0]
        places.append((ri, ci))
        recvcounts.append(len(ri) * len(ci))
    recvbuf = np.empty(sum(recvcounts))
    sdispls = np.concatenate(([0], np.cumsum(sendcounts)[:-1]))
    rdispls = np.concatenate(([0], np.cumsum(recvcounts)[:-1]))
    comm.Alltoallv(
        [sendbuf, (sendcounts, sdispls), MPI.DOUBLE],
        [recvbuf, (recvcounts, rdispls), MPI.DOUBLE],
    )

    # Unpack.
    out = np.empty((len(out_rows), len(out_cols)))
    for s, (ri, ci) in enumerate(places):
        off = rdispls[s]
        put(out, ri, ci, recvbuf[off : off + recvcounts[s]].reshape(len(ri), len(ci)))
    return out


def redist(comm):
    me = comm.Get_rank()
    results = {}
    for name, sdists, sgrid, ddists, dgrid in c.REDIST:
        src = (sdists, c.parse_grid(sgrid))
        dst = (ddists, c.parse_grid(dgrid))
        rows, cols = c.global_indices(me, *src)
        a = c.reference(rows, cols)
        out = redistribute(comm, a, src, dst)
        orows, ocols = c.global_indices(me, *dst)
        c.check(np.array_equal(out, c.reference(orows, ocols)), "mpi4py redistribution %s" % name)
        for _ in range(c.REDIST_WARMUP):
            redistribute(comm, a, src, dst)
        times = []
        for _ in range(c.REDIST_BATCHES):
            comm.Barrier()
            t0 = c.clock()
            redistribute(comm, a, src, dst)
            times.append(slowest(comm, c.clock() - t0))
        results[name] = {"ms": c.median(times) * 1e3}
    return results


def main():
    test = sys.argv[1]
    comm = MPI.COMM_WORLD
    library = MPI.Get_library_version().replace("\0", "").splitlines()[0]
    libraries = comm.allgather(library)
    c.check(all(lib == library for lib in libraries), "the ranks loaded different MPI libraries: %s" % libraries)
    results = {"pingpong": pingpong, "coll": coll, "redist": redist}[test](comm)
    if comm.Get_rank() == 0:
        c.emit(IMPL, test, comm.Get_size(), results, {"library": library})


if __name__ == "__main__":
    main()
