"""Rank `argv[1]` waits in a collective of the world (`argv[2]`: allreduce, the wait of
an iallreduce, scatter, gatherv, the drop of an unwaited iallreduce, that drop while a
TypeError propagates from the statement that made the request) that the other ranks
never join: they wait in a barrier of a duplicate communicator that the target never
joins. Every rank prints its pid first; the test interrupts the target with SIGINT,
again and again until the job ends: the handler raises KeyboardInterrupt only while the
target is in the line marked interruptible (a SIGINT landing before is ignored), so the
outcome does not depend on when the signal lands. Arrays are made before the
interruptible line: a signal landing inside numpy's array call raised there, where
Python can only print the exception as ignored (a second traceback, seen for gatherv)."""

import linecache
import os
import signal
import sys

import numpy as np
import spools

world = spools.init()
target, how = int(sys.argv[1]), sys.argv[2]
delivered_again = False


def on_sigint(signum, frame):
    global delivered_again
    # A frame may have no line number (seen: a frame of `re`'s parser while numpy loads
    # its C API, lazily, during the first array call): then the line is not ours.
    lineno = frame.f_lineno if frame else None
    line = linecache.getline(frame.f_code.co_filename, lineno) if lineno else ""
    if "# interruptible" in line:
        # The drop of a request cannot raise: its interrupt is delivered again, and
        # that second delivery raises wherever it lands.
        delivered_again = how == "drop"
        raise KeyboardInterrupt
    if delivered_again:
        delivered_again = False
        raise KeyboardInterrupt


signal.signal(signal.SIGINT, on_sigint)
other = world.dup()
world.barrier()
print("pid %d %d %016x" % (world.rank, os.getpid(), world.job), flush=True)
if world.rank != target:
    other.barrier()
elif how == "allreduce":
    ones = np.ones(1000)
    world.Allreduce(ones)  # interruptible
elif how == "wait":
    ones, add = np.ones(10), (lambda a, b: a + b)
    world.Iallreduce(ones, op=add).wait()  # interruptible
elif how == "scatter":
    world.Scatter(None, root=(target + 1) % world.size)  # interruptible
elif how == "drop":
    req = world.Iallreduce(np.ones(10), op=lambda a, b: a + b)
    del req  # interruptible
    len("")  # a call: the interrupt delivered again raises here at the latest
elif how == "unwind":
    # The TypeError propagates while the request, a temporary, is dropped: the drop
    # waits for the collective until the Ctrl-C ends it, and the TypeError goes on. (A
    # first signal landing between the two calls raises KeyboardInterrupt there, and
    # that one propagates through the drop instead.)
    ones, add = np.ones(10), (lambda a, b: a + b)
    world.Iallreduce(ones, op=add).wait(1)  # interruptible
else:
    ones = np.ones((world.rank, 2))
    world.Gatherv(ones, root=target)  # interruptible
print("collective returned", flush=True)
