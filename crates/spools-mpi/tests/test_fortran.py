"""Spools' Fortran layer (crates/spools-mpi/fortran: mpif.h, modules `mpi` and `mpi_f08`,
libmpifort_spools.so.1 and the `mpifort` wrapper that `make -C crates/spools-mpi` builds):
the programs of tests/fortran built by that mpifort and run as real jobs under
`spools run`, alone with nothing set, on MPICH's libmpi_abi.so.1 (the layer is written to
the standard ABI, not to Spools), and the BT-IO-style program against Debian's Open MPI
(its own mpifort and mpirun): the same output line and the same file, byte for byte."""

import os
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from conftest import HERE, REPO, run_job, spools_bin

FORTRAN = HERE / "fortran"
EXAMPLES = REPO / "examples" / "mpi"


def mpifort():
    path = Path(os.environ.get("SPOOLS_MPIFORT") or Path(spools_bin()).parent / "mpifort")
    if not path.exists():
        pytest.fail("no %s: `make -C crates/spools-mpi` builds it where gfortran is installed "
                    "(scripts/test-mpi.sh does both)" % path)
    return str(path)


@pytest.fixture(scope="session")
def fbuild(tmp_path_factory):
    """fbuild(FILE) compiles tests/fortran/FILE (or examples/mpi/FILE) with Spools' mpifort
    (once)."""
    out = tmp_path_factory.mktemp("fortran-programs")
    built = {}

    def make(name):
        if name not in built:
            exe = out / Path(name).stem
            src = FORTRAN / name if (FORTRAN / name).exists() else EXAMPLES / name
            r = subprocess.run([mpifort(), "-O1", "-o", str(exe), str(src)],
                               capture_output=True, text=True, cwd=out)
            assert r.returncode == 0, "mpifort %s failed:\n%s%s" % (name, r.stdout, r.stderr)
            built[name] = exe
        return built[name]

    return make


def test_mpifort_show_prints_the_compile_and_link_commands():
    r = subprocess.run([mpifort(), "-show", "prog.f90", "-o", "prog"], capture_output=True,
                       text=True)
    assert r.returncode == 0, r
    words = r.stdout.split()
    assert words[0].endswith("gfortran") and "prog.f90" in words, r.stdout
    assert "-lmpifort_spools" in words and "-l:libmpi_abi.so.1" in words, r.stdout
    assert any(w.startswith("-I") for w in words), r.stdout
    r = subprocess.run([mpifort(), "-show", "-c", "prog.f90"], capture_output=True, text=True)
    assert r.returncode == 0 and "-lmpifort_spools" not in r.stdout, r


@pytest.mark.parametrize("n", [1, 2, 3])
def test_a_fixed_form_ring_with_mpif_h(fbuild, spools_run, n):
    job = spools_run(n, fbuild("ring.f"))
    assert job.code == 0 and job.out.splitlines() == ["ok ring %d ranks" % n], job


def test_a_program_built_by_mpifort_runs_alone_with_nothing_set(fbuild):
    env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    job = run_job([str(fbuild("ring.f"))], env=env)
    assert job.code == 0 and job.out.splitlines() == ["ok ring 1 ranks"], job


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_collectives_and_user_operators_written_in_fortran(fbuild, spools_run, n):
    job = spools_run(n, fbuild("coll.f90"))
    assert job.code == 0 and job.out.splitlines() == ["ok coll %d ranks" % n], job


@pytest.mark.parametrize("n", [1, 2, 3])
def test_derived_datatypes_mpi_bottom_and_waitany_from_fortran(fbuild, spools_run, n):
    job = spools_run(n, fbuild("types.f90"))
    assert job.code == 0 and job.out.splitlines() == ["ok types %d ranks" % n], job


@pytest.mark.parametrize("n", [1, 2, 3])
def test_module_mpi_f08_typed_handles_optional_ierror_sections_and_io(
        fbuild, spools_run, tmp_path, n):
    path = tmp_path / "f08.dat"
    job = spools_run(n, fbuild("f08.f90"), path)
    assert job.code == 0 and job.out.splitlines() == ["ok f08 %d ranks" % n], job
    assert path.read_bytes() == struct.pack("<%di" % (5 * n),
                                            *[r * 10 + i for r in range(n) for i in range(1, 6)])


@pytest.mark.parametrize("n", [1, 2])
def test_spawn_and_spawn_multiple_from_module_mpi_f08_with_character_arguments(
        fbuild, spools_run, n):
    job = spools_run(n, fbuild("spawn.f90"), timeout=120)
    assert job.code == 0 and "FAIL" not in job.out + job.err, job
    assert job.out.splitlines() == ["ok spawn f08 %d ranks" % n], job


@pytest.mark.parametrize("n", [1, 2])
def test_attributes_keyvals_and_error_handlers_written_in_fortran(fbuild, spools_run, n):
    job = spools_run(n, fbuild("attrs.f90"))
    assert job.code == 0 and job.out.splitlines() == ["ok attrs"], job


def btio_expected(n, steps):
    """The file examples/mpi/btio.f90 writes, computed here: records of 5 doubles, x
    fastest."""
    vals = [c + 10.0 * i + 1e3 * j + 1e5 * k + 1e7 * t
            for t in range(1, steps + 1) for k in range(1, n + 1) for j in range(1, n + 1)
            for i in range(1, n + 1) for c in range(1, 6)]
    return struct.pack("<%dd" % len(vals), *vals), sum(vals)


@pytest.mark.parametrize("n", [1, 3, 4])
def test_btio_style_collective_io_through_subarray_views(fbuild, spools_run, tmp_path, n):
    path = tmp_path / "bt.dat"
    job = spools_run(n, fbuild("btio.f90"), path, 13, 3)
    data, total = btio_expected(13, 3)
    assert job.code == 0, job
    line = job.out.strip()
    assert line.startswith("btio grid 13^3 ranks %d " % n), job
    assert line.endswith("steps 3 bytes %d sum %.1f" % (len(data), total)), job
    assert path.read_bytes() == data


def test_the_layer_runs_on_another_implementations_abi_library(fbuild, tmp_path):
    """The layer calls only the standard ABI: MPICH's libmpi_abi.so.1 (PyPI's wheel, first on
    LD_LIBRARY_PATH) under MPICH's own launcher runs the same programs."""
    venv = REPO / "target" / "mpi-venv"
    env = dict(os.environ, LD_LIBRARY_PATH=str(venv / "lib"))
    for prog in ("coll", "f08"):
        job = run_job([str(venv / "bin" / "mpiexec"), "-n", "3", str(fbuild(prog + ".f90")),
                       str(tmp_path / "f08.dat")], env=env)
        assert job.code == 0 and job.out.splitlines() == ["ok %s 3 ranks" % prog], job
    path = tmp_path / "bt.dat"
    job = run_job([str(venv / "bin" / "mpiexec"), "-n", "4", str(fbuild("btio.f90")),
                   str(path), "13", "2"], env=env)
    assert job.code == 0 and path.read_bytes() == btio_expected(13, 2)[0], job


def test_btio_on_spools_and_on_open_mpi_give_the_same_line_and_file(
        fbuild, spools_run, tmp_path):
    """The same source built by Debian's Open MPI mpifort and run by its mpirun."""
    ompi_fc, ompi_run = shutil.which("mpifort.openmpi"), shutil.which("mpirun.openmpi")
    if not (ompi_fc and ompi_run):
        if os.environ.get("SPOOLS_REQUIRE_MPI") == "1":
            pytest.fail("Open MPI's mpifort.openmpi or mpirun.openmpi missing but "
                        "SPOOLS_REQUIRE_MPI=1 (scripts/install-mpi.sh installs them)")
        pytest.skip("Open MPI's mpifort.openmpi or mpirun.openmpi missing")
    exe = tmp_path / "btio-ompi"
    r = subprocess.run([ompi_fc, "-O1", "-o", str(exe), str(EXAMPLES / "btio.f90")],
                       capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0, r
    ours, theirs = tmp_path / "spools.dat", tmp_path / "ompi.dat"
    a = spools_run(4, fbuild("btio.f90"), ours, 13, 3)
    b = run_job([ompi_run, "--allow-run-as-root", "--oversubscribe", "-n", "4", str(exe),
                 str(theirs), "13", "3"])
    assert a.code == 0 and b.code == 0, (a, b)
    assert a.out.strip() == b.out.strip() and a.out.strip(), (a, b)
    assert ours.read_bytes() == theirs.read_bytes()
