"""mpi4py.futures on Spools: `spools run -n 1 -- python examples/mpi/pool_mpi4py.py`
spawns 4 worker processes (MPI_Comm_spawn) and maps 1000 small tasks over them, as
`MPIPoolExecutor` does on any MPI. Arguments: WORKERS TASKS (default 4 1000). Prints
"ok pool W workers T tasks", and the time of the whole pool (spawn, map, shutdown) on
standard error."""

import sys
import time

from mpi4py.futures import MPIPoolExecutor


def square(x):
    return x * x


if __name__ == "__main__":
    workers = int(sys.argv[1]) if len(sys.argv) > 1 else 4
    tasks = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
    t0 = time.perf_counter()
    with MPIPoolExecutor(max_workers=workers) as pool:
        got = list(pool.map(square, range(tasks), chunksize=1))
    elapsed = time.perf_counter() - t0
    assert got == [x * x for x in range(tasks)], "wrong results"
    print(f"ok pool {workers} workers {tasks} tasks")
    print(f"pool of {workers} workers, {tasks} tasks: {elapsed:.3f} s", file=sys.stderr)
