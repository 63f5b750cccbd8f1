"""An RPC function that calls sys.exit(3): the caller (rank 0) gets a RemoteError with
remote_type "SystemExit", and the serving rank (rank 1) goes on and ends normally, so the
job exits 0; so does one that calls sys.exit(4) and catches its own SystemExit. Prints
"caller saw SystemExit" on rank 0 and "ok" on every rank."""
import sys

import numpy as np

import spools

world = spools.init()
me = world.rank


@world.rpc
def leave():
    sys.exit(3)


@world.rpc
def leave_and_stay():
    try:
        sys.exit(4)
    except SystemExit:
        return "stayed"


world.barrier()  # every rank has registered
if me == 0:
    try:
        world.call(1, "leave")
    except spools.RemoteError as e:
        assert e.rank == 1 and e.name == "leave", (e.rank, e.name)
        assert e.remote_type == "SystemExit", e.remote_type
        assert e.remote_message == "3", e.remote_message
        print("caller saw SystemExit")
    else:
        raise AssertionError("no RemoteError")
    assert world.call(1, "leave_and_stay") == "stayed"
    world.Send(np.zeros(1), dest=1, tag=9)
elif me == 1:
    # The call is served during this wait; the rank's own program goes on after it.
    world.Recv(np.empty(1), source=0, tag=9)
world.barrier()
print("ok")
