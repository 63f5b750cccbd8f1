"""Ctrl-C ends a call that waits for a rank that does not serve it: rank 1 computes in
Python (no Spools call, no progress thread) while rank 0 calls it; the test sends SIGINT
to rank 0, whose call raises KeyboardInterrupt; it then ends the job."""
import os
import signal
import sys
import time

import spools

world = spools.init()
world.register_rpc("never", lambda: 0)
world.barrier()
if world.rank == 0:
    armed = False

    def on_sigint(sig, frame):
        # Ctrl-C as Python's own handler, once the call is under way (the test sends
        # SIGINT until the job ends: one before the call is ignored).
        if armed:
            raise KeyboardInterrupt

    signal.signal(signal.SIGINT, on_sigint)
    print("pid %d" % os.getpid(), flush=True)
    try:
        armed = True
        world.call(1, "never")
    except KeyboardInterrupt:
        print("interrupted", flush=True)
        world.abort(3, "interrupted on purpose")
    print("not interrupted", flush=True)
else:
    deadline = time.monotonic() + 60  # bounded: the test ends the job long before
    while time.monotonic() < deadline:
        sum(range(1000))
    sys.exit(1)
