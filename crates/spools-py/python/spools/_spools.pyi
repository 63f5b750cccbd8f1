"""Type stubs of the extension module `spools._spools` (re-exported by `spools`)."""

from typing import Any, Optional

ANY_SOURCE: int
ANY_TAG: int

def init() -> World: ...
def initialized() -> bool: ...
def finalized() -> bool: ...
def finalize() -> None: ...

class Comm:
    @property
    def rank(self) -> int: ...
    @property
    def size(self) -> int: ...
    def same_host(self, rank: int) -> bool: ...
    def barrier(self) -> None: ...
    def split(self, color: Optional[int], key: int = 0) -> Optional[Comm]: ...
    def dup(self) -> Comm: ...

    # ---- p2p: messaging (p2p.rs) ----



    # ---- end p2p ----

    # ---- coll: collectives (coll.rs) ----



    # ---- end coll ----

    # ---- am: RPC (am.rs) ----



    # ---- end am ----

    # ---- io: redistribution and files (files.rs) ----

    def redistribute(
        self,
        a: Buffer,
        src: LayoutLike,
        dst: LayoutLike,
        out: Optional[numpy.ndarray] = None,
    ) -> numpy.ndarray: ...
    def write_file(
        self,
        path: StrPath,
        a: Buffer,
        layout: LayoutLike,
        format: str = "npy",
        dirs: Optional[Sequence[StrPath]] = None,
        sync: bool = True,
        node_local: bool = False,
    ) -> Dict[str, Any]: ...
    def read_file(
        self,
        path: StrPath,
        layout: LayoutLike,
        out: Optional[numpy.ndarray] = None,
    ) -> numpy.ndarray: ...

    # ---- end io ----

class World(Comm):
    @property
    def job(self) -> int: ...
    def finalize(self) -> None: ...
    def abort(self, code: int = 1, message: Optional[str] = None) -> None: ...

# ---- p2p classes (Request, Status) ----



# ---- end p2p classes ----

# ---- coll classes ----



# ---- end coll classes ----

# ---- am classes ----



# ---- end am classes ----

# ---- layout (Layout) ----

import os
from typing import Dict, List, Sequence, Tuple, Union

import numpy

Buffer = Any  # a C-contiguous object with the buffer protocol (numpy array, bytearray, memoryview)
StrPath = Union[str, "os.PathLike[str]"]
LayoutLike = Union["Layout", str]

class Layout:
    def __init__(self, spec: LayoutLike) -> None: ...
    @property
    def dtype(self) -> numpy.dtype: ...
    @property
    def shape(self) -> Optional[Tuple[int, ...]]: ...
    @property
    def units(self) -> int: ...
    @property
    def grid(self) -> Tuple[int, ...]: ...
    @property
    def order(self) -> Optional[str]: ...
    @property
    def itemsize(self) -> int: ...
    @property
    def nbytes(self) -> Optional[int]: ...
    def local_shape(self, unit: int) -> Tuple[int, ...]: ...
    def local_nbytes(self, unit: int) -> int: ...
    def coords(self, unit: int) -> Tuple[int, ...]: ...
    def extents(self, unit: int, bytes: bool = False) -> List[Tuple[int, int, int]]: ...
    def plan(self, other: LayoutLike) -> Dict[str, Any]: ...
    def __eq__(self, other: object) -> bool: ...
    def __hash__(self) -> int: ...

# ---- end layout ----

# ---- files (open, File) ----

class _FileReader:
    def __init__(self, path: StrPath) -> None: ...
    @property
    def format(self) -> str: ...
    @property
    def nbytes(self) -> int: ...
    @property
    def descr(self) -> Optional[str]: ...
    @property
    def shape(self) -> Optional[Tuple[int, ...]]: ...
    @property
    def fortran(self) -> bool: ...
    @property
    def dataset(self) -> Optional[str]: ...
    @property
    def striping(self) -> Optional[str]: ...
    @property
    def closed(self) -> bool: ...
    def read_into(self, offset: int, out: Buffer) -> int: ...
    def close(self) -> None: ...

# spools.open(path, dtype=None, shape=None, layout=None) -> spools.File is pure Python
# (spools/_io.py).

# ---- end files ----

# ---- pipes (PipeWriter, PipeReader) ----



# ---- end pipes ----

# ---- streams ----



# ---- end streams ----
