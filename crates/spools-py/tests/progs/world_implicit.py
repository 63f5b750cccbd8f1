"""Under a launcher, `import spools` starts the rank (unless SPOOLS_PY_INIT=0); init()
returns that same World; the runtime is finalised at exit without a call."""
import os

import numpy as np
import spools

if os.environ.get("SPOOLS_PY_INIT") == "0":
    assert not spools.initialized()
    world = spools.init()
    how = "explicit"
else:
    assert spools.initialized(), "import did not start the rank"
    world = spools.init()
    how = "implicit"
assert world is spools.init()
me, n = world.rank, world.size
got = np.zeros(1, dtype=np.int64)
r = world.Irecv(got, (me - 1) % n, 1)
world.Send(np.array([me], dtype=np.int64), (me + 1) % n, 1)
r.wait()
assert got[0] == (me - 1) % n
print("%s rank %d of %d" % (how, me, n))
# No finalize: the atexit hook does it.
