"""Python peers of bench/io/run.py --only formats: one process writes (or reads) an
f32[n,n,n] array, every element its global index, with zarr-python (Zarr v3, shards of
shard^3 holding chunks of chunk^3, raw or zstd level 1, a CRC32C per chunk as Spools
writes) or h5py (one contiguous dataset "data"). Prints {"seconds": S}: the whole write
(array creation included) or the whole read; the data is made before the clock starts.

    python formats_py.py zarr|h5py write|read PATH N [SHARD CHUNK none|zstd]
"""

import json
import shutil
import sys
import time

import numpy as np


def main():
    lib, mode, path, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    want = np.arange(n**3, dtype=np.uint64).astype(np.float32).reshape(n, n, n)
    if lib == "zarr":
        import zarr
        import zarr.codecs

        shard, chunk, codec = int(sys.argv[5]), int(sys.argv[6]), sys.argv[7]
        if mode == "write":
            shutil.rmtree(path, ignore_errors=True)
            comp = [zarr.codecs.Crc32cCodec()]
            if codec == "zstd":
                comp.insert(0, zarr.codecs.ZstdCodec(level=1))
            t = time.perf_counter()
            a = zarr.create_array(store=path, shape=want.shape, chunks=(chunk,) * 3,
                                  shards=(shard,) * 3, dtype=np.float32, compressors=comp,
                                  fill_value=0, zarr_format=3)
            a[...] = want
            secs = time.perf_counter() - t
        else:
            t = time.perf_counter()
            got = zarr.open_array(path, mode="r")[...]
            secs = time.perf_counter() - t
            assert np.array_equal(got, want)
    else:
        import h5py

        if mode == "write":
            t = time.perf_counter()
            with h5py.File(path, "w") as f:
                f.create_dataset("data", data=want)
            secs = time.perf_counter() - t
        else:
            t = time.perf_counter()
            with h5py.File(path, "r") as f:
                got = f["data"][...]
            secs = time.perf_counter() - t
            assert np.array_equal(got, want)
    print(json.dumps({"seconds": secs}))


if __name__ == "__main__":
    main()
