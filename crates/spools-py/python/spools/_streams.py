"""Streams out of and into a job (the classes are in src/streams.rs:
``Comm.stream_open`` -> ``spools.StreamWriter``, ``Comm.stream_listen`` ->
``spools.StreamReader``).

Out of the job, to ``spools recv tcp:0.0.0.0:5000 --out frames/`` or any receiver of
the stream protocol::

    world = spools.init()
    layout = "u8[1080,1920,3] block,*,* on 4x1x1"
    with world.stream_open("tcp:viz-host:5000", links=4) as s:
        for frame in frames:                 # this rank's rows of each frame
            s.send(frame, layout)            # one ADU, collective

Into the job, from ``spools send a.bin b.bin tcp:HOST:PORT`` or another job::

    r = world.stream_listen("0.0.0.0:7000", layout="f64[1024] block on 4")
    for part in r:                            # this rank's share of each ADU
        ...
"""

__all__ = []
