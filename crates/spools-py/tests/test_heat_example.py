"""examples/python/heat.py against the Rust demo (`spools demo heat`): the same sizes,
steps and arithmetic, so every snapshot file (and the final RAID-5 file's manifest and
units) must be byte-for-byte identical."""

import subprocess

import spools
from conftest import REPO, spools_bin

EXAMPLE = REPO / "examples" / "python" / "heat.py"
# A grid that does not split evenly over 2x2 blocks; snapshots at 50, 100 and the end.
ARGS = ["--n", "97", "--steps", "120", "--every", "50"]


def files(d):
    return sorted(p.relative_to(d) for p in d.rglob("*") if p.is_file())


def test_heat_example_matches_the_rust_demo_bit_for_bit(run, tmp_path):
    rs, py = tmp_path / "rust", tmp_path / "python"
    demo = subprocess.run(
        [spools_bin(), "demo", "heat", *ARGS, "--ranks", "4", "--readers", "2", "--dir", str(rs)],
        capture_output=True, text=True, timeout=180,
    )
    assert demo.returncode == 0, demo.stdout + demo.stderr
    assert "bit-identical" in demo.stdout, demo.stdout
    job = run(4, EXAMPLE, *ARGS, "--dir", py)
    assert job.lines(0)[0].startswith("heat.py: 97x97 f64, 120 steps, 4 ranks as 2x2 blocks"), job
    names = files(rs)
    snaps = [str(n) for n in names if str(n).endswith(".npy")]
    assert snaps == ["heat-00050.npy", "heat-00100.npy", "heat-00120.npy"], names
    assert files(py) == names
    for n in names:
        assert (rs / n).read_bytes() == (py / n).read_bytes(), n
    # The final RAID-5 file holds the last snapshot's grid.
    with spools.open(py / "heat-00120.npy") as f, spools.open(py / "heat-final.raid5") as g:
        assert f.shape == (97, 97) and (f[()] == g[()]).all()


def test_heat_example_snapshots_do_not_depend_on_the_decomposition(run, tmp_path):
    """Each point's update is the same expression whatever block holds it: 1 and 3
    ranks (1x3 blocks, columns split unevenly) write the same snapshots as 4."""
    runs = {}
    for n in (1, 3, 4):
        d = tmp_path / str(n)
        run(n, EXAMPLE, "--n", "61", "--steps", "60", "--every", "25", "--dir", d)
        runs[n] = {p.name: p.read_bytes() for p in sorted(d.glob("heat-*.npy"))}
    assert list(runs[4]) == ["heat-00025.npy", "heat-00050.npy", "heat-00060.npy"]
    assert runs[1] == runs[4] and runs[3] == runs[4]
