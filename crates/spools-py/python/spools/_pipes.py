"""Parallel pipes between two separately launched programs (the classes are in
src/pipes.rs: ``spools.PipeWriter``, ``spools.PipeReader``, ``Comm.pipe_writer``,
``Comm.pipe_reader``).

The producer (``spools run -n 2 -- python3 produce.py``) writes records, each a whole
distributed dataset of which every rank gives its share::

    import numpy as np
    import spools

    world = spools.init()
    layout = "f64[512,512] block,* on 2x1"          # rows in blocks over 2 ranks
    with world.pipe_writer("pipe:frames", layout) as w:
        for step in range(10):
            w.write(np.full((256, 512), step, dtype=np.float64))

The consumer (``spools run -n 3 -- python3 consume.py``), with its own distribution::

    world = spools.init()
    for frame in world.pipe_reader("pipe:frames", "f64[512,512] *,cyclic on 1x3"):
        ...   # this rank's columns of the record: a numpy array of its local shape

Names: ``pipe:NAME`` (meeting files in ``SPOOLS_PIPE_DIR``), ``tcp:HOST:PORT``,
``stdout``/``stdin`` (the canonical byte stream), or ``None`` for the launcher's choice
(``SPOOLS_PIPE_OUT``/``SPOOLS_PIPE_IN``: ``spools run ... | spools run ...``).
"""

__all__ = []
