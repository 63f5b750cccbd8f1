"""The README's Python examples: the tour is examples/python/tour.py, word for word, and
it runs; the jobs sending frames (streams and live-view sections) run into `spools recv`."""

import os

import pytest

from conftest import REPO


def readme_block():
    text = (REPO / "README.md").read_text()
    start = text.index("## Python")
    body = text.index("```python\n", start) + len("```python\n")
    return text[body : text.index("```", body)]


def test_tour_is_the_readme_block():
    tour = (REPO / "examples" / "python" / "tour.py").read_text()
    # The file adds a docstring in front of the README's code, nothing else.
    assert tour.endswith(readme_block())
    assert tour.startswith('"""') and tour.count('"""') == 2


@pytest.mark.parametrize("n", [1, 4])
def test_tour_runs(run, n):
    run(n, REPO / "examples" / "python" / "tour.py", timeout=180)


def section_python_block(title):
    """The first ```python block of the README's section `title`."""
    text = (REPO / "README.md").read_text()
    start = text.index("\n" + title + "\n")
    end = text.index("\n## ", start + 1)
    body = text.index("```python\n", start) + len("```python\n")
    assert body < end, "no python block in " + title
    return text[body : text.index("```", body)]


@pytest.mark.parametrize("title,streams,frames,fmt,size", [
    ("## Streams out of and into the job", 2, 30, 2, (320, 240)),
    ("## Watching a job live", 1, 50, 4, (256, 256)),
])
def test_readme_frame_jobs_run(run, tmp_path, title, streams, frames, fmt, size):
    """The README's Python jobs sending frames run, on 3 ranks, into `spools recv`: every
    frame arrives, with its header."""
    from test_streams import decode_frame, finish, start_listener, spools_bin
    out = tmp_path / "out"
    out.mkdir()
    p, addr = start_listener(spools_bin(), "recv", "tcp:127.0.0.1:0", "--out", str(out) + "/",
                             marker="listening on ", stream="err")
    code = section_python_block(title)
    assert code.count("tcp:127.0.0.1:7000") == 1
    job = tmp_path / "job.py"
    job.write_text(code.replace("tcp:127.0.0.1:7000", "tcp:" + addr))
    run(3, job, timeout=180)
    rc, _, err = finish(p)
    assert rc == 0, err
    assert sorted(os.listdir(out)) == sorted("s%d-a%d" % (s, k) for s in range(1, streams + 1)
                                             for k in range(frames))
    for name in os.listdir(out):
        h = decode_frame((out / name).read_bytes())
        assert (h["format"], (h["width"], h["height"])) == (fmt, size), (name, h)
        assert h["frame"] == int(name.split("-a")[1])
