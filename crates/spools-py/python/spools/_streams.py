"""Streams out of and into a job (the classes are in src/streams.rs and src/streams/:
``Comm.stream_open`` -> ``spools.StreamWriter``, ``Comm.stream_connect`` ->
``spools.StreamConnection``, ``Comm.stream_listen`` -> ``spools.StreamReader``;
``spools.FrameStyle``).

Out of the job, to ``spools recv tcp:0.0.0.0:5000 --out frames/`` or any receiver of
the stream protocol::

    world = spools.init()
    layout = "u8[1080,1920,3] block,*,* on 4x1x1"
    with world.stream_open("tcp:viz-host:5000", links=4) as s:
        for frame in frames:                 # this rank's rows of each frame
            s.send(frame, layout)            # one ADU, collective

Frames into ``spools view tcp:0.0.0.0:7000`` (the framebuffer protocol: the header is
built from the layout), several streams on one connection, two of them in lock step::

    style = spools.FrameStyle("temperature", colormap="inferno", lo=0.0, hi=100.0)
    with world.stream_connect("tcp:viz-host:7000", links=2) as c:
        t = c.open_stream()                               # stream 1
        l, r = c.open_stream(group=1), c.open_stream(group=1)
        for step in range(100):
            c.send_frame(t, field, "f64[768,768] block,block on 2x2", style)
            c.send_frames(1, [(l, left, rgb), (r, right, rgb)])   # frame n of both

Into the job, from ``spools send a.bin b.bin tcp:HOST:PORT`` or another job::

    r = world.stream_listen("0.0.0.0:7000", layout="f64[1024] block on 4")
    for part in r:                            # this rank's share of each ADU
        ...
"""

__all__ = []
