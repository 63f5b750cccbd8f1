"""Ranks waiting in a pipe or stream call that nothing will end; the test interrupts
them with SIGINT, again and again until the job ends: the handler raises
KeyboardInterrupt only while a rank is in a line marked interruptible (a signal landing
elsewhere is ignored), so the outcome does not depend on when a signal lands. Every rank
prints its pid (after the pipe or stream is open), then what happened. argv: MODE ...

- "pipe-write NAME RELEASE": the producer of "pipe-read": opens the pipe and writes no
  record until the file RELEASE exists (the test makes it once the consumer is gone);
  then writes one and closes, and says how that went.
- "pipe-read NAME": the consumer: every rank waits in `read()` for a record that does
  not come (interruptible on every rank); then a second read raises, saying why.
- "pipe-meet NAME": a consumer whose producer never comes: every rank waits in
  `pipe_reader` (rank 0 at the meeting, at NAME's directory or TCP port, the others for
  what rank 0 learns there); interruptible on every rank.
- "stream-recv": the job listens, opens a stream to itself and sends nothing: `recv()`
  waits for an ADU (rank 0 for the receiving thread, the others in the broadcast from
  rank 0); interruptible on rank 0. Then a second `recv()` raises on every rank.
- "stream-send ADDR": the job opens a stream (1 link, window 1) to a receiver at ADDR
  that the test holds, which welcomes the link and then reads nothing, and sends ADUs of
  4 MiB until a send waits for room in the link's window (rank 0, the link's owner,
  once the sockets are full; the others wait for it in the send's agreement);
  interruptible on every rank (a signal landing as a send returns raises after it: the
  sends go on). Then a second `send()` and `close()` raise on every rank. (The test runs
  it on one rank, whose only wait is the window's.)
- "stream-close ADDR": the same receiver; 64 MiB of ADUs sent within the window wait on
  the link's sending thread, and `close()` waits for them (interruptible). Then the
  stream is closed: a send raises ValueError."""
import linecache
import os
import signal
import sys
import time

import numpy as np
import spools

mode = sys.argv[1]
world = spools.init()
me, p = world.rank, world.size


def on_sigint(signum, frame):
    # A frame may have no line number (a frame of numpy's lazy loading): not ours.
    lineno = frame.f_lineno if frame else None
    line = linecache.getline(frame.f_code.co_filename, lineno) if lineno else ""
    if "# interruptible" in line:
        raise KeyboardInterrupt


signal.signal(signal.SIGINT, on_sigint)


def announce():
    print("pid %d %d %016x" % (me, os.getpid(), world.job), flush=True)


def say(text):
    print(text, flush=True)


if mode == "pipe-write":
    name, release = sys.argv[2], sys.argv[3]
    layout = "f64[12,10] block,* on %dx1" % p
    w = world.pipe_writer(name, layout)
    announce()
    deadline = time.monotonic() + 120
    while not os.path.exists(release) and time.monotonic() < deadline:
        time.sleep(0.02)
    try:
        w.write(np.zeros((-(-12 // p), 10)))
        w.close()
        say("closed")
    except spools.PeerGoneError as e:
        say("consumer gone: %s" % ("consumer rank" in str(e)))

elif mode == "pipe-read":
    r = world.pipe_reader(sys.argv[2], "f64[12,10] *,cyclic on 1x%d" % p)
    announce()
    try:
        r.read()  # interruptible
        say("read returned")
    except KeyboardInterrupt:
        say("interrupted")
    try:
        r.read()
        say("second read returned")
    except spools.TransportError as e:
        say("then: %s" % ("stopped in record 0" in str(e)))
    r.close()

elif mode == "pipe-meet":
    announce()
    try:
        world.pipe_reader(sys.argv[2], "f64[12,10] *,cyclic on 1x%d" % p)  # interruptible
        say("met")
    except KeyboardInterrupt:
        say("interrupted")
    except spools.SpoolsError as e:
        # Another rank was interrupted (rank 0 at the meeting): this rank's call fails.
        say("failed: %s" % type(e).__name__)

elif mode == "stream-recv":
    r = world.stream_listen("127.0.0.1:0")
    w = world.stream_open(r.address, links=1)
    announce()
    try:
        r.recv()  # interruptible
        say("recv returned")
    except KeyboardInterrupt:
        say("interrupted")
    except spools.TransportError as e:
        say("rank 0 interrupted: %s" % ("rank 0 was interrupted" in str(e)))
    try:
        r.recv()
        say("second recv returned")
    except spools.TransportError as e:
        say("then: %s" % ("the stream is closed" in str(e)))
    r.close()
    try:
        w.close()
    except spools.SpoolsError:
        pass  # the receiver went away first
    say("done")

elif mode == "stream-send":
    # A receiver the test holds: it welcomed the link and reads nothing.
    w = world.stream_open(sys.argv[2], links=1, tu=1 << 20, window=1)
    layout = "u8[%d] block on %d" % (4 << 20, p)
    share = np.ones((4 << 20) // p, dtype=np.uint8)  # (p divides it: 1, 2 or 4 ranks)
    announce()
    sent = 0
    while sent < 1000:  # far beyond what the sockets buffer
        try:
            w.send(share, layout)  # interruptible
            sent += 1
        except KeyboardInterrupt:
            if w.adus == sent + 1:
                # The send was done: the signal landed as it returned, and Python raised
                # it then. The job sends on (the other ranks' sends went through too).
                sent += 1
                continue
            say("interrupted")
            break
        except spools.SpoolsError:
            # Another rank's wait was interrupted: this rank's send fails with it.
            say("failed")
            break
    else:
        say("sent them all")
    try:
        w.send(share, layout)
        say("second send returned")
    except spools.TransportError as e:
        say("then: %s" % ("abandoned" in str(e)))
    try:
        w.close()
        say("closed")
    except spools.TransportError as e:
        say("close: %s" % ("abandoned" in str(e)))
    say("done")

elif mode == "stream-close":
    # The same receiver: the ADUs sent (64 MiB, more than the sockets buffer) wait on
    # the link's sending thread, within the window, and close() waits for them.
    w = world.stream_open(sys.argv[2], links=1, tu=1 << 20, window=16)
    layout = "u8[%d] block on %d" % (8 << 20, p)
    share = np.ones((8 << 20) // p, dtype=np.uint8)
    for _ in range(8):
        w.send(share, layout)
    announce()
    try:
        w.close()  # interruptible
        say("closed")
    except KeyboardInterrupt:
        say("interrupted")
    try:
        w.send(share, layout)
        say("second send returned")
    except ValueError as e:
        say("then: %s" % ("closed" in str(e)))
    say("done")

else:
    raise SystemExit("unknown mode %r" % mode)
