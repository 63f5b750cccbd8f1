"""Every rank prints its pid, then waits in a receive that no message matches (or, with
`argv[1] == "wait"`, in Request.wait of such an irecv); the test interrupts one (it
sends SIGINT until the job ends: one landing before the call is ignored)."""
import os
import signal
import sys

import numpy as np
import spools

world = spools.init()
world.barrier()
armed = False


def on_sigint(sig, frame):
    # Ctrl-C as Python's own handler, once the call is under way: the test sends SIGINT
    # until the job ends, and one landing before the call is ignored.
    if armed:
        raise KeyboardInterrupt


signal.signal(signal.SIGINT, on_sigint)
buf = np.zeros(1)
print("pid %d %d %016x" % (world.rank, os.getpid(), world.job), flush=True)
if len(sys.argv) > 1 and sys.argv[1] == "wait":
    req = world.Irecv(buf, spools.ANY_SOURCE, 99)
    armed = True
    req.wait()
else:
    armed = True
    world.Recv(buf, spools.ANY_SOURCE, 99)
print("recv returned", flush=True)
