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
    def send(self, buf: Buffer, dest: int, tag: int = 0) -> None: ...
    def recv(self, buf: Buffer, source: int = -1, tag: int = -1) -> Status: ...
    def isend(self, buf: Buffer, dest: int, tag: int = 0) -> Request: ...
    def irecv(self, buf: Buffer, source: int = -1, tag: int = -1) -> Request: ...
    def sendrecv(
        self,
        sendbuf: Buffer,
        dest: int,
        recvbuf: Buffer,
        source: int = -1,
        sendtag: int = 0,
        recvtag: int = -1,
    ) -> Status: ...
    def probe(self, source: int = -1, tag: int = -1) -> Status: ...
    def iprobe(self, source: int = -1, tag: int = -1) -> Optional[Status]: ...
    def send_obj(self, obj: Any, dest: int, tag: int = 0) -> None: ...
    def recv_obj(self, source: int = -1, tag: int = -1) -> Any: ...
    # ---- end p2p ----

    # ---- coll: collectives (coll.rs) ----



    # ---- end coll ----

    # ---- am: RPC (am.rs) ----



    # ---- end am ----

    # ---- io: redistribution and files (files.rs) ----



    # ---- end io ----

class World(Comm):
    @property
    def job(self) -> int: ...
    def finalize(self) -> None: ...
    def abort(self, code: int = 1, message: Optional[str] = None) -> None: ...

# ---- p2p classes (Request, Status) ----
from typing import List, Sequence, Tuple

# A buffer: any C-contiguous object with the buffer protocol (numpy array, bytearray,
# memoryview; bytes for sending), used in place.
Buffer = Any

class Status:
    @property
    def source(self) -> int: ...
    @property
    def tag(self) -> int: ...
    @property
    def count(self) -> int: ...
    @property
    def cancelled(self) -> bool: ...
    def get_count(self, dtype: Any) -> int: ...

class Request:
    def wait(self) -> Status: ...
    def test(self) -> bool: ...
    def cancel(self) -> bool: ...
    @property
    def status(self) -> Optional[Status]: ...

def wait_all(requests: Sequence[Request]) -> List[Status]: ...
def wait_any(requests: Sequence[Request]) -> Tuple[int, Status]: ...
# ---- end p2p classes ----

# ---- coll classes ----



# ---- end coll classes ----

# ---- am classes ----



# ---- end am classes ----

# ---- layout (Layout) ----



# ---- end layout ----

# ---- files (open, File) ----



# ---- end files ----

# ---- pipes (PipeWriter, PipeReader) ----



# ---- end pipes ----

# ---- streams ----



# ---- end streams ----
