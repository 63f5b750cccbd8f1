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



# ---- end layout ----

# ---- files (open, File) ----



# ---- end files ----

# ---- pipes (PipeWriter, PipeReader) ----



# ---- end pipes ----

# ---- streams ----



# ---- end streams ----
