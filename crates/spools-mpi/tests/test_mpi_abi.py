"""Programs built by mpicc_abi against the MPI standard ABI, run on Spools' libmpi_abi.so.1
under `spools run` (see conftest.py)."""

import json
import os
import socket
import re
import shlex
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from conftest import HERE, REPO, mpicc_abi, run_job, spools_bin


@pytest.mark.parametrize("n", [2, 3])
def test_point_to_point_in_every_mode(build, spools_run, n):
    job = spools_run(n, build("p2p"))
    assert job.code == 0 and "FAIL" not in job.err, job
    assert job.out.splitlines() == ["ok p2p %d ranks at level 3" % n], job


@pytest.mark.parametrize("n", [2, 3])
def test_point_to_point_at_thread_level_single_takes_the_path_without_locks(build, spools_run, n):
    # Set, not inherited: an ambient SPOOLS_THREAD_LEVEL or progress thread would raise it.
    job = spools_run(n, build("p2p"), "single",
                     env={"SPOOLS_THREAD_LEVEL": "single", "SPOOLS_PROGRESS_THREAD": "0"})
    assert job.code == 0 and "FAIL" not in job.err, job
    assert job.out.splitlines() == ["ok p2p %d ranks at level 0" % n], job
    # SPOOLS_THREAD_LEVEL raises the level a program asks for, and MPI says so.
    job = spools_run(n, build("p2p"), "single", "multiple", env={"SPOOLS_THREAD_LEVEL": "multiple"})
    assert job.code == 0 and "FAIL" not in job.err, job
    assert job.out.splitlines() == ["ok p2p %d ranks at level 3" % n], job


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_collectives_on_world_self_dup_and_split(build, spools_run, n):
    job = spools_run(n, build("coll"))
    assert job.code == 0 and "FAIL" not in job.err, job
    assert job.out.splitlines() == ["ok coll %d ranks" % n], job


@pytest.mark.parametrize("n,hosts", [(1, 1), (2, 1), (3, 1), (4, 1), (4, 2), (5, 2)])
def test_nonblocking_and_persistent_collectives_against_each_ranks_own_result(
        build, spools_run, n, hosts):
    # Within one host they go through Spools' shared-memory engine; across the played
    # hosts through its hierarchical message algorithms; user operators through the
    # exchange.
    job = spools_run(n, build("icoll"), hosts, timeout=120)
    assert job.code == 0 and "FAIL" not in job.err, job
    assert job.out.splitlines() == ["ok icoll %d ranks %d hosts" % (n, hosts)], job


@pytest.mark.parametrize("n,hosts", [(1, 1), (2, 1), (3, 1), (5, 1), (4, 2)])
def test_nonblocking_and_persistent_v_collectives_against_each_ranks_own_result(
        build, spools_run, n, hosts):
    # Gatherv, scatterv, allgatherv and alltoallv on Spools' own (allgatherv through the
    # shared memory within one host), an exclusive scan with a user operator (the
    # exchange), and erroneous calls that end on every rank.
    job = spools_run(n, build("icollv"), hosts, timeout=120)
    assert job.code == 0 and "FAIL" not in job.err, job
    assert job.out.splitlines() == ["ok icollv %d ranks %d hosts" % (n, hosts)], job


@pytest.mark.parametrize("n,hosts", [(2, 1), (3, 1), (5, 1), (4, 2)])
def test_intercommunicator_collectives_in_every_form_against_each_ranks_own_result(
        build, spools_run, n, hosts):
    # Between the groups' leaders and within each group on Spools' own schedules
    # (Communicator::inter_*), from every root of both groups, with a barrier that must
    # not end before the other group entered.
    job = spools_run(n, build("intercoll"), hosts, timeout=120)
    assert job.code == 0 and "FAIL" not in job.err, job
    assert job.out.splitlines() == ["ok intercoll %d ranks %d hosts" % (n, hosts)], job


def test_errors_return_their_classes_and_messages(build, spools_run):
    job = spools_run(2, build("errors"))
    assert job.code == 0 and "FAIL" not in job.err, job
    assert job.out.splitlines() == ["ok errors 2 ranks"], job


@pytest.mark.parametrize("n", [1, 2, 3])
def test_erroneous_calls_fail_before_any_communication_on_every_rank(build, spools_run, n):
    job = spools_run(n, build("misuse"))
    assert job.code == 0 and "FAIL" not in job.err, job
    assert job.out.splitlines() == [f"ok misuse {n} ranks"], job


@pytest.mark.parametrize("n", [1, 2, 3])
def test_spawned_children_meet_their_parents_and_a_failed_spawn_fails_every_parent(
        build, spools_run, n):
    # The parents spawn 3 copies together, then one each alone on MPI_COMM_SELF (at
    # once), then two commands; p2p, bcast, merge and reduce on the intercommunicators,
    # groups compared across the two jobs; a missing command and a program that ends
    # before it joins fail with MPI_ERR_SPAWN on every parent (tests/spawn.c).
    job = spools_run(n, build("spawn"), timeout=120)
    assert job.code == 0 and "FAIL" not in job.err, job
    assert job.out.splitlines() == ["ok spawn %d ranks" % n], job


@pytest.mark.parametrize("n", [1, 2])
def test_a_spawned_child_that_dies_ends_the_job_and_leaves_nothing_in_dev_shm(
        build, spools_run, n):
    job = spools_run(n, build("spawn"), "killed", timeout=60)
    assert job.code != 0 and "FAIL" not in job.out, job
    assert "died" in job.err, job
    # The job's own files only (its id, which the spawned children share): another job
    # on the machine (a second test run) has segments in /dev/shm meanwhile.
    ids = [l.split()[1] for l in job.out.splitlines() if l.startswith("job ")]
    assert len(ids) == 1 and len(ids[0]) == 16, job
    left = [f for f in os.listdir("/dev/shm") if f.startswith("spools-%s" % ids[0])]
    assert not left, left


def test_a_spawned_child_that_stays_stopped_ends_the_job_past_the_liveness_timeout(
        build, spools_run):
    job = spools_run(1, build("spawn"), "stopped", timeout=60,
                     env={"SPOOLS_LIVENESS_TIMEOUT": "1"})
    assert job.code != 0 and "FAIL" not in job.out, job
    assert "rank 0's spawned process 1" in job.err and "stayed stopped" in job.err, job


def test_spawned_children_run_on_the_jobs_hosts_and_their_output_is_forwarded_tagged(
        build, spools_run, hosts):
    # Under --hosts, spools run starts the children through its agent, spread as the
    # ranks are (child i on rank i's host) or on the host the info key "host" names; a
    # host that is not the job's fails with MPI_ERR_SPAWN on every parent; the children's
    # output is forwarded tagged [spawn,child] (tests/spawn.c "hosts").
    net = hosts(2)
    job = spools_run(2, build("spawn"), "hosts", "h2", timeout=120,
                     opts=["--tag-output", *net.run_args("h1:1,h2:1")])
    assert job.code == 0 and "FAIL" not in job.err, job
    lines = job.out.splitlines()
    assert "[0] spawned on h1,h2,h1,h2" in lines, job
    assert "[0] named host: h2" in lines, job
    hellos = sorted(l for l in lines if "hello" in l)
    want = sorted(["[1,%d] hello from child %d" % (i, i) for i in range(4)]
                  + ["[2,0] hello from child 0"])
    assert hellos == want, job
    assert lines[-1] == "[0] ok spawn-hosts 2 ranks", job


def test_spawned_children_of_a_job_on_this_host_take_its_name_and_no_other(
        build, spools_run):
    job = spools_run(2, build("spawn"), "hosts", "localhost", timeout=120)
    assert job.code == 0 and "FAIL" not in job.err, job
    lines = [l for l in job.out.splitlines() if not l.startswith("hello")]
    me = socket.gethostname()
    assert lines == ["spawned on %s" % ",".join([me] * 4), "named host: %s" % me,
                     "ok spawn-hosts 2 ranks"], job


def test_a_spawn_under_open_mpi_s_mpirun_goes_through_its_pmix_spawn(build):
    # Spools' library under Debian's Open MPI mpirun (the ranks meet through its PMIx):
    # the first round of tests/spawn.c (3 children of both parents: messages, a
    # broadcast, a merge, groups) with the children started by PMIx_Spawn (the debug log
    # names the spawn's namespace), and a missing command failing with MPI_ERR_SPAWN
    # before mpirun is asked (it would end the whole job). One spawn only: Open MPI
    # 4.1.4's mpirun itself crashes (SIGSEGV) in about one run in eight of spawn.c's
    # five spawns in a row here, with Spools' ranks as with its own.
    run = shutil.which("mpirun.openmpi")
    if not run:
        if os.environ.get("SPOOLS_REQUIRE_MPI") == "1":
            pytest.fail("Open MPI's mpirun.openmpi missing but SPOOLS_REQUIRE_MPI=1")
        pytest.skip("Open MPI's mpirun.openmpi missing")
    env = dict(os.environ, SPOOLS_LOG="debug", LD_LIBRARY_PATH=str(Path(spools_bin()).parent))
    job = run_job([run, "--allow-run-as-root", "--oversubscribe", "-n", "2",
                   "-x", "LD_LIBRARY_PATH", "-x", "SPOOLS_LOG", str(build("spawn")), "once"],
                  env=env, timeout=180)
    assert job.code == 0 and "FAIL" not in job.err, job
    assert job.out.splitlines() == ["ok spawn-once 2 ranks"], job
    spawns = re.findall(r"spools: (\d+) processes started through Open MPI's PMIx spawn", job.err)
    assert spawns == ["3"], job


def test_a_spawn_under_a_launcher_without_pmix_fails_on_every_parent_naming_why(
        build, tmp_path):
    # Two ranks as Open MPI's mpirun would start them, but meeting through a rendezvous
    # file and with no PMIx server: each gets MPI_ERR_SPAWN saying so, nobody waits.
    prog, procs = build("spawn"), []
    for r in range(2):
        env = dict(os.environ, OMPI_COMM_WORLD_RANK=str(r), OMPI_COMM_WORLD_SIZE="2",
                   SPOOLS_BOOTSTRAP="file:%s" % (tmp_path / "rdv"),
                   LD_LIBRARY_PATH=str(Path(spools_bin()).parent))
        for k in ("PMIX_NAMESPACE", "PMI_FD", "SPOOLS_RANK", "SPOOLS_SIZE"):
            env.pop(k, None)
        procs.append(subprocess.Popen([str(prog), "refused"], env=env, text=True,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE))
    outs = []
    try:
        for p in procs:
            outs.append((p.wait(timeout=120),) + p.communicate(timeout=10))
    finally:
        for p in procs:
            p.kill()
    for code, out, err in outs:
        assert code == 0 and "FAIL" not in err, (code, out, err)
        assert out.startswith("refused: "), (out, err)
        assert "started by Open MPI" in out and "no PMIx server" in out, out
    assert outs[0][1] == outs[1][1], outs


def test_a_spawn_under_srun_whose_pmix_has_no_spawn_fails_on_every_parent_naming_why(
        build, tmp_path):
    # Debian's Slurm (a one-node cluster, scripts/slurm-cluster.sh): `srun --mpi=pmix`
    # gives the ranks a PMIx server without a spawn, which every parent hears of.
    if not shutil.which("srun"):
        if os.environ.get("SPOOLS_REQUIRE_SLURM") == "1":
            pytest.fail("srun missing but SPOOLS_REQUIRE_SLURM=1")
        pytest.skip("no Slurm (srun)")
    if os.geteuid() != 0:
        pytest.skip("the test cluster's slurmd runs as root")
    cluster = tmp_path / "slurm"
    cluster.mkdir()
    script = str(REPO / "scripts" / "slurm-cluster.sh")
    env = dict(os.environ, SPOOLS_SLURM_OWNER=str(os.getpid()))
    r = subprocess.run(["bash", script, "start", str(cluster)], env=env, capture_output=True,
                       text=True, timeout=180)
    assert r.returncode == 0, r
    try:
        env = dict(os.environ, SLURM_CONF=str(cluster / "slurm.conf"),
                   LD_LIBRARY_PATH=str(Path(spools_bin()).parent))
        for k in ("SPOOLS_RANK", "SPOOLS_SIZE", "SPOOLS_BOOTSTRAP", "PMIX_NAMESPACE"):
            env.pop(k, None)
        job = run_job(["srun", "-n", "2", "--mpi=pmix", "-t", "2", str(build("spawn")),
                       "refused"], env=env, timeout=150)
    finally:
        subprocess.run(["bash", script, "stop", str(cluster)], capture_output=True, timeout=120)
    assert job.code == 0 and "FAIL" not in job.err, job
    lines = job.out.splitlines()
    assert len(lines) == 2 and lines[0] == lines[1], job
    assert "started by Slurm" in lines[0] and "PMIx spawn failed" in lines[0], job


@pytest.mark.parametrize("n", [2, 3, 4])
def test_ports_names_and_joins_connect_groups_and_bad_meetings_fail_every_rank(
        build, spools_run, n):
    # Accept and connect both ways between rank 0 and the rest, published names, a
    # join over a socket of the program's own; a closed port and a name that is not a
    # port's fail with MPI_ERR_PORT on every rank of the group (tests/dynproc.c).
    job = spools_run(n, build("dynproc"), timeout=120)
    assert job.code == 0 and "FAIL" not in job.err, job
    assert job.out.splitlines() == ["ok dynproc %d ranks" % n], job


@pytest.mark.parametrize("n", [1, 2, 3])
def test_large_count_collectives_meet_whatever_counts_a_rank_does_not_use(build, spools_run, n):
    job = spools_run(n, build("large_counts"), timeout=60)
    assert job.code == 0 and "FAIL" not in job.err, job
    assert job.out.splitlines() == ["ok large_counts %d ranks" % n], job


def test_comm_create_and_compare_of_intercommunicators(build, spools_run):
    job = spools_run(4, build("intercomms"), timeout=60)
    assert job.code == 0 and "FAIL" not in job.err, job
    assert job.out.splitlines() == ["ok intercomms 4 ranks"], job


@pytest.mark.parametrize("n", [4, 6])
def test_comm_idup_never_blocks_at_the_call_on_overlapping_and_intercommunicators(build, spools_run, n):
    job = spools_run(n, build("idup"), timeout=60)
    assert job.code == 0 and "FAIL" not in job.err, job
    assert job.out.splitlines() == [f"ok idup {n} ranks"], job


def test_a_wait_for_a_cancelled_send_ends_at_once(build, spools_run):
    job = spools_run(2, build("cancel_send"), timeout=60)
    assert job.code == 0 and "FAIL" not in job.err, job
    assert job.out.splitlines() == ["ok cancel_send"], job


@pytest.mark.parametrize("n", [1, 3])
def test_generalized_requests_complete_from_another_thread_with_the_programs_status(
    build, spools_run, n
):
    job = spools_run(n, build("grequest"), timeout=60)
    assert job.code == 0 and "FAIL" not in job.err, job
    assert job.out.splitlines() == [f"ok grequest {n} ranks"], job


@pytest.mark.parametrize("n", [1, 2, 3])
def test_partitioned_sends_marked_by_threads_meet_receives_of_other_partition_counts(
    build, spools_run, n
):
    job = spools_run(n, build("partitioned"), timeout=60)
    assert job.code == 0 and "FAIL" not in job.err, job
    assert job.out.splitlines() == [f"ok partitioned {n} ranks"], job


@pytest.mark.parametrize("n", [1, 3])
def test_external32_packs_big_endian_at_the_standards_sizes_and_files_hold_it(
    build, spools_run, tmp_path, n
):
    job = spools_run(n, build("external32"), str(tmp_path / "e32"), timeout=60)
    assert job.code == 0 and "FAIL" not in job.err, job
    assert job.out.splitlines() == [f"ok external32 {n} ranks"], job


@pytest.mark.parametrize("n", [1, 4])
def test_agree_gives_every_rank_the_and_of_all_flags(build, spools_run, n):
    job = spools_run(n, build("agree"), timeout=60)
    assert job.code == 0 and "FAIL" not in job.err, job
    assert job.out.splitlines() == [f"ok agree {n} ranks"], job


def test_matched_probes_and_receives_of_six_threads_never_match_one_message_twice(build, spools_run):
    job = spools_run(2, build("mprobe_threads"), timeout=60)
    assert job.code == 0 and "FAIL" not in job.err, job
    assert job.out.splitlines() == ["ok mprobe_threads 2 ranks x 6 threads"], job


@pytest.mark.parametrize("n", [1, 3])
def test_user_reductions_on_mpi_bottom_with_absolute_addresses(build, spools_run, n):
    job = spools_run(n, build("bottom_ops"), timeout=60)
    assert job.code == 0 and "FAIL" not in job.err, job
    assert job.out.splitlines() == ["ok bottom_ops %d ranks" % n], job


# The calls of null_buffers.c that rank 0 expects MPI_ERR_BUFFER from: its 139 BUF
# checks, 18 of them in the one-sided loop that runs twice (own window, then a peer's).
NULL_BUFFER_CALLS = 139 + 18


@pytest.mark.parametrize("n", [2, 3])
def test_null_buffers_are_mpi_err_buffer_not_a_crash(build, spools_run, tmp_path, n):
    # Every kind of data-moving call given a NULL buffer (or MPI_IN_PLACE where it is not
    # allowed) with a nonzero count returns MPI_ERR_BUFFER instead of killing the rank
    # with SIGSEGV; the count is rank 0's calls that returned it (each checked in C).
    job = spools_run(n, build("null_buffers"), str(tmp_path))
    assert job.code == 0 and "FAIL" not in job.err, job
    assert job.out.splitlines() == [
        "ok null_buffers %d ranks: %d calls gave MPI_ERR_BUFFER" % (n, NULL_BUFFER_CALLS)], job


def test_thread_multiple_with_four_threads_sending_at_once(build, spools_run):
    job = spools_run(3, build("threads"))
    assert job.code == 0 and "FAIL" not in job.err, job
    assert job.out.splitlines() == ["ok threads 3 ranks x 4 threads"], job


def test_abort_on_one_rank_ends_the_job_with_its_code(build, spools_run):
    job = spools_run(3, build("abort"), timeout=60)
    assert job.code == 42, job
    assert "aborting" in job.out and "FAIL" not in job.out, job
    assert "MPI_Abort was called with error code 42" in job.err, job


def test_a_rank_killed_mid_collective_ends_the_job(build, spools_run):
    job = spools_run(3, build("killed"), timeout=60)
    assert job.code != 0 and "FAIL" not in job.out, job
    assert "rank 1" in job.err and "SIGKILL" in job.err, job


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_one_sided_windows_of_every_flavour_with_races_pscw_and_shared_stores(build, spools_run, n):
    # `range`: Spools reports a put outside the target's window (MPICH does not check).
    job = spools_run(n, build("rma"), "range")
    assert job.code == 0 and "FAIL" not in job.err, job
    assert job.out.splitlines() == ["ok rma %d ranks" % n], job


@pytest.mark.parametrize("n", [2, 3])
def test_one_sided_windows_by_memory_messages_as_between_hosts(build, spools_run, n):
    # SPOOLS_MPI_WIN_MESSAGES=1: every access to another rank is a memory message served
    # by the target's progress engine, as between hosts (shared windows stay shared).
    job = spools_run(n, build("rma"), "range", env={"SPOOLS_MPI_WIN_MESSAGES": "1"})
    assert job.code == 0 and "FAIL" not in job.err, job
    assert job.out.splitlines() == ["ok rma %d ranks" % n], job
    job = spools_run(3, build("rma_killed"), timeout=60, env={"SPOOLS_MPI_WIN_MESSAGES": "1"})
    assert job.code != 0 and "FAIL" not in job.out, job
    assert "rank 1" in job.err and "SIGKILL" in job.err, job


def test_a_passive_target_computing_outside_mpi_is_served(build, spools_run):
    # Within a host the accesses are copies into shared memory; as memory messages the
    # target's progress thread serves them while it computes.
    job = spools_run(2, build("rma_passive"))
    assert job.out.splitlines() == ["ok rma_passive 2 ranks"] and job.code == 0, job
    job = spools_run(2, build("rma_passive"),
                     env={"SPOOLS_MPI_WIN_MESSAGES": "1", "SPOOLS_PROGRESS_THREAD": "1"})
    assert job.out.splitlines() == ["ok rma_passive 2 ranks"] and job.code == 0, job


def test_windows_and_files_across_hosts(build, spools_run, hosts, tmp_path):
    # Ranks in network namespaces playing two hosts: every window access to the other
    # host is a memory message its progress engine serves (no forcing), shared windows
    # are per host; a darray file is written by 4 ranks on two hosts (the exchange
    # engine's reshuffle crossing them over TCP) and read by 3 with another view.
    net = hosts(2)
    job = spools_run(3, build("rma"), "range", opts=net.run_args("h1:2,h2:1"))
    assert job.code == 0 and "FAIL" not in job.err, job
    assert job.out.splitlines() == ["ok rma 3 ranks"], job
    # A target on the other host computing outside MPI: its progress thread serves.
    job = spools_run(2, build("rma_passive"), opts=net.run_args("h1:1,h2:1"),
                     env={"SPOOLS_PROGRESS_THREAD": "1"})
    assert job.out.splitlines() == ["ok rma_passive 2 ranks"] and job.code == 0, job
    job = spools_run(4, build("io"), str(tmp_path), "write", "mn",
                     opts=net.run_args("h1:2,h2:2"))
    assert job.code == 0 and "FAIL" not in job.err, job
    assert job.out.splitlines() == ["ok io-write 4 ranks"], job
    job = spools_run(3, build("io"), str(tmp_path), "read", "mn",
                     opts=net.run_args("h1:1,h2:2"))
    assert job.code == 0 and "FAIL" not in job.err, job
    assert job.out.splitlines() == ["ok io-read 3 ranks"], job


def test_a_target_killed_holding_window_locks_ends_the_job(build, spools_run):
    job = spools_run(3, build("rma_killed"), timeout=60)
    assert job.code != 0 and "FAIL" not in job.out, job
    assert "rank 1" in job.err and "SIGKILL" in job.err, job


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_mpi_io_views_pointers_collectives_nonblocking_and_errors(build, spools_run, tmp_path, n):
    job = spools_run(n, build("io"), str(tmp_path))
    assert job.code == 0 and "FAIL" not in job.err, job
    assert job.out.splitlines() == ["ok io %d ranks" % n], job


@pytest.mark.parametrize("writers,readers", [(4, 3), (3, 4)])
def test_a_darray_file_written_by_m_ranks_is_read_by_n_with_another_view(
        build, spools_run, tmp_path, writers, readers):
    job = spools_run(writers, build("io"), str(tmp_path), "write", "mn")
    assert job.code == 0 and "FAIL" not in job.err, job
    assert job.out.splitlines() == ["ok io-write %d ranks" % writers], job
    job = spools_run(readers, build("io"), str(tmp_path), "read", "mn")
    assert job.code == 0 and "FAIL" not in job.err, job
    assert job.out.splitlines() == ["ok io-read %d ranks" % readers], job


def test_a_rank_killed_during_write_all_ends_the_job(build, spools_run, tmp_path):
    job = spools_run(3, build("io_killed"), str(tmp_path), timeout=60)
    assert job.code != 0 and "FAIL" not in job.out, job
    assert "rank 1" in job.err and "SIGKILL" in job.err, job


@pytest.mark.parametrize("n", [1, 2, 3])
def test_nonblocking_collective_file_accesses_progress_while_a_rank_waits_in_recv(
        build, spools_run, tmp_path, n):
    # Without progress outside the file's own calls, rank 0's MPI_Test loop never ends.
    job = spools_run(n, build("io_progress"), str(tmp_path), timeout=60)
    assert job.code == 0 and "FAIL" not in job.err, job
    assert job.out.splitlines() == ["ok io_progress %d ranks" % n], job


@pytest.mark.parametrize("n", [2, 3])
def test_two_phase_accesses_move_in_rounds_of_cb_buffer_size(build, spools_run, tmp_path, n):
    # An hindexed view of uneven blocks, with cb_buffer_size=64 KiB and without (1 MiB): the
    # file as written, the bytes read back, counts cut at the end of a shortened file,
    # and a peak memory that does not grow with the domain under the hint.
    job = spools_run(n, build("io_rounds"), str(tmp_path), timeout=120)
    assert job.code == 0 and "FAIL" not in job.err, job
    assert job.out.splitlines() == ["ok io_rounds %d ranks" % n], job


@pytest.mark.parametrize("n", [1, 2, 3])
def test_shared_file_pointers_of_many_files_stay_apart_and_start_anew(
        build, spools_run, tmp_path, n):
    job = spools_run(n, build("io_pointers"), str(tmp_path), timeout=120)
    assert job.code == 0 and "FAIL" not in job.err, job
    assert job.out.splitlines() == ["ok io_pointers %d ranks" % n], job


@pytest.mark.parametrize("n", [1, 2, 3])
def test_a_file_error_on_one_rank_has_that_ranks_class_on_every_rank(
        build, spools_run, tmp_path, n):
    job = spools_run(n, build("io_classes"), str(tmp_path), timeout=60)
    assert job.code == 0 and "FAIL" not in job.err, job
    assert job.out.splitlines() == ["ok io_classes %d ranks" % n], job


def test_the_readmes_mpi_io_example_writes_with_4_ranks_and_reads_with_3(spools_run, tmp_path):
    exe = tmp_path / "darray_io"
    r = subprocess.run([mpicc_abi(), "-std=gnu11", "-Wall", "-Wextra", "-Werror", "-O1", "-o",
                        str(exe), str(REPO / "examples" / "mpi" / "darray_io.c")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    data = tmp_path / "a.dat"
    job = spools_run(4, exe, "write", str(data))
    assert job.code == 0, job
    assert "wrote 1000x600 ints" in job.out and "0 wrong values" in job.out, job
    assert sorted(l for l in job.out.splitlines() if l.startswith("rank")) == [
        "rank %d of 4: wrote 150000 ints (grid 2x2)" % r for r in range(4)], job
    # The plain row-major file a serial program would write: element i holds i.
    raw = data.read_bytes()
    assert len(raw) == 4 * 1000 * 600
    ints = memoryview(raw).cast("i")
    assert all(ints[i] == i for i in range(0, 600000, 997)) and ints[599999] == 599999
    job = spools_run(3, exe, "read", str(data))
    assert job.code == 0, job
    assert job.out.count("all as written") == 3 and "0 wrong values" in job.out, job


def test_the_checksum_hint_writes_a_sidecar_that_spools_fsck_verifies(build, spools_run, tmp_path):
    data = tmp_path / "s.dat"
    job = spools_run(3, build("io_sums"), str(data), "sums")
    assert job.out.splitlines() == ["ok io_sums sums 3 ranks"], job
    assert (tmp_path / "s.dat.spools-sums").is_file()
    fsck = subprocess.run([spools_bin(), "fsck", str(data)], capture_output=True, text=True, timeout=60)
    assert fsck.returncode == 0 and "all checksums and parity good" in fsck.stdout, fsck
    # One byte changed in the second MiB: fsck names that block.
    with open(data, "r+b") as f:
        f.seek(2_000_000)
        b = f.read(1)
        f.seek(2_000_000)
        f.write(bytes([b[0] ^ 0xFF]))
    fsck = subprocess.run([spools_bin(), "fsck", str(data)], capture_output=True, text=True, timeout=60)
    assert fsck.returncode != 0 and "offset 1048576: checksum mismatch" in fsck.stdout, fsck
    # Written again without the hint: the stale sidecar is gone.
    job = spools_run(2, build("io_sums"), str(data), "plain")
    assert job.out.splitlines() == ["ok io_sums plain 2 ranks"], job
    assert not (tmp_path / "s.dat.spools-sums").exists()


@pytest.mark.parametrize("then", ["removed", "rewritten"])
def test_a_read_only_open_racing_a_commit_elsewhere_reads_the_version_committed(
        build, spools_run, tmp_path, then):
    # Rank 0 reads the manifest of version A of a set opened read-only with the layout
    # hint; before the ranks open A's unit files, a commit elsewhere replaces the set
    # with version B (SPOOLS_TEST_RUN_AFTER_LOOK, run once by rank 0 right after its
    # look) and A's units are removed, or rewritten in place as a later commit reusing
    # their names would (zeros of the same length: no unit is missing). Rank 0 looks
    # again after the ranks' opening and finds the manifest changed: the ranks start
    # over and read B whole, where they failed or read A's checksums against zeros.
    exe, data = build("io_raid"), tmp_path / "a.dat"
    prep = tmp_path / "prep" / "a.dat"
    prep.parent.mkdir()
    for path, steps in ((data, ["write"]), (prep, ["write", "update"])):
        for step in steps:
            job = spools_run(2, exe, str(path), step)
            assert job.out.splitlines() == [f"ok io_raid {step} 2 ranks"], job
    a, b = json.loads(data.read_text()), json.loads(prep.read_text())
    a_units = [data.parent / u["path"] for u in a["units"]]
    assert {u["path"] for u in a["units"]}.isdisjoint(u["path"] for u in b["units"]), (a, b)
    q = shlex.quote
    after = {
        "removed": ["rm " + " ".join(q(str(p)) for p in a_units)],
        "rewritten": [f"head -c {p.stat().st_size} /dev/zero > {q(str(p))}" for p in a_units],
    }[then]
    commit = " && ".join([
        "cp " + " ".join(q(str(prep.parent / u["path"])) for u in b["units"]) + " " + q(str(data.parent)),
        f"cp {q(str(prep))} {q(str(data.parent / '.a.next'))}",
        f"mv {q(str(data.parent / '.a.next'))} {q(str(data))}",
        *after,
    ])
    job = spools_run(3, exe, str(data), "read", "updated",
                     env={"SPOOLS_TEST_RUN_AFTER_LOOK": commit})
    assert job.out.splitlines() == ["ok io_raid read 3 ranks"], job
    # The commit did run in the open: the manifest is B's, A's units gone or zeros.
    assert json.loads(data.read_text()) == b
    if then == "removed":
        assert not any(p.exists() for p in a_units)
    else:
        assert all(p.read_bytes() == bytes(p.stat().st_size) for p in a_units)


def test_the_layout_hint_keeps_a_raid5_set_that_spools_tools_verify_and_repair(
        build, spools_run, tmp_path):
    # Written by 4 ranks through a darray view with spools_layout=raid5(unit=4KiB,count=3)
    # (a sync and a close: two versions), the file is a manifest and unit files, no
    # working file left; spools fsck verifies it and spools cat gives the array's bytes.
    exe, data = build("io_raid"), tmp_path / "a.dat"
    n = 301 * 257

    def tool(*args):
        return subprocess.run([spools_bin(), *args], capture_output=True, timeout=120)

    def manifest():
        return json.loads(data.read_text())

    job = spools_run(4, exe, str(data), "write")
    assert job.out.splitlines() == ["ok io_raid write 4 ranks"], job
    m = manifest()
    assert m["format"] == "spools-parallel-file" and m["size"] == 4 * n, m
    assert m["layout"].startswith("raid5(") and len(m["units"]) == 3 and m["version"] == 2, m
    assert not list(tmp_path.glob(".*spools-open")), list(tmp_path.iterdir())
    fsck = tool("fsck", str(data))
    assert fsck.returncode == 0 and b"all checksums and parity good" in fsck.stdout, fsck
    cat = tool("cat", str(data))
    assert cat.returncode == 0 and cat.stdout == struct.pack("<%di" % n, *range(n)), cat.stderr
    # A lost unit: 3 ranks still read every element (rebuilt from parity), then
    # spools repair rebuilds the unit and fsck is clean again.
    lost = data.parent / m["units"][1]["path"]
    lost.unlink()
    job = spools_run(3, exe, str(data), "read")
    assert job.out.splitlines() == ["ok io_raid read 3 ranks"], job
    assert tool("fsck", str(data)).returncode != 0
    rep = tool("repair", str(data))
    assert rep.returncode == 0 and lost.exists(), rep
    fsck = tool("fsck", str(data))
    assert fsck.returncode == 0 and b"all checksums and parity good" in fsck.stdout, fsck
    # Opened again for update by 2 ranks: a new version with the changed elements.
    job = spools_run(2, exe, str(data), "update")
    assert job.out.splitlines() == ["ok io_raid update 2 ranks"], job
    assert manifest()["version"] == 3
    cat = tool("cat", str(data))
    want = [-1 - i if i < 10 else i for i in range(n)]
    assert cat.returncode == 0 and cat.stdout == struct.pack("<%di" % n, *want), cat.stderr
    job = spools_run(3, exe, str(data), "read", "updated")
    assert job.out.splitlines() == ["ok io_raid read 3 ranks"], job
    # Rank 0 killed in the commit of a close, once every unit file of the next version
    # is written and durable but before the manifest names them: the version before
    # stays whole (fsck clean, the same bytes), and the set opens again.
    before = manifest()
    job = spools_run(2, exe, str(data), "crash", env={"SPOOLS_TEST_CRASH_AT": "before-manifest"})
    assert job.code != 0 and "ok io_raid" not in job.out, job
    assert manifest() == before
    fsck = tool("fsck", str(data))
    assert fsck.returncode == 0 and b"all checksums and parity good" in fsck.stdout, fsck
    cat = tool("cat", str(data))
    assert cat.returncode == 0 and cat.stdout == struct.pack("<%di" % n, *want), cat.stderr
    job = spools_run(3, exe, str(data), "read", "updated")
    assert job.out.splitlines() == ["ok io_raid read 3 ranks"], job
    # A block damaged in place: opened for writing, the set's next version is filled
    # with the block rebuilt from parity, and commits clean.
    m = manifest()
    unit = data.parent / m["units"][2]["path"]
    raw = bytearray(unit.read_bytes())
    raw[5000] ^= 0xFF
    unit.write_bytes(raw)
    assert tool("fsck", str(data)).returncode != 0
    job = spools_run(2, exe, str(data), "update")
    assert job.out.splitlines() == ["ok io_raid update 2 ranks"], job
    assert manifest()["version"] == m["version"] + 1
    fsck = tool("fsck", str(data))
    assert fsck.returncode == 0 and b"all checksums and parity good" in fsck.stdout, fsck
    cat = tool("cat", str(data))
    assert cat.returncode == 0 and cat.stdout == struct.pack("<%di" % n, *want), cat.stderr
    # Hints that are not striped layouts fail on every rank and make nothing.
    other = tmp_path / "b.dat"
    job = spools_run(2, exe, str(other), "badhint")
    assert job.out.splitlines() == ["ok io_raid badhint 2 ranks"], job
    assert not other.exists() and not list(tmp_path.glob(".b.dat*"))
    # MPI_File_delete takes the unit files of both versions' slots with the manifest.
    job = spools_run(1, exe, str(data), "delete")
    assert job.out.splitlines() == ["ok io_raid delete 1 ranks"], job
    assert list(tmp_path.iterdir()) == [], list(tmp_path.iterdir())


def row_bytes(layout):
    """The data bytes of one stripe row of a `raid5(...)` or `stripe(...)` layout."""
    u, scale, count = re.search(r"unit=(\d+)(KiB|B),count=(\d+)", layout).groups()
    unit, count = int(u) * (1024 if scale == "KiB" else 1), int(count)
    return unit * (count - 1 if layout.startswith("raid5") else count)


@pytest.mark.parametrize("layout,ranks", [("raid5(unit=4KiB,count=3)", 3), ("raid5(unit=1000B,count=4)", 2),
                                          ("stripe(unit=3000B,count=2)", 4)])
def test_a_set_is_read_and_written_in_place_by_every_rank(build, tmp_path, spools_run, layout, ranks):
    """The `spools_layout` hint's set edited in place: holes, sizes, a sync, set_size down
    and up and atomic mode (io_raid.c's edit step), committed at close to exactly the bytes
    written; a plain file opened with the hint becomes a set of its bytes."""
    exe, data = build("io_raid"), tmp_path / "e.dat"
    job = spools_run(ranks, exe, str(data), "edit", layout)
    assert job.out.splitlines() == ["ok io_raid edit %d ranks" % ranks], job
    end = (ranks - 1) * 20000 + 5000 + 1000
    want = bytearray(end + 3000)
    for r in range(ranks):
        want[r * 20000 + 5000:r * 20000 + 6000] = bytes([r + 1]) * 1000
        want[r * 20000:r * 20000 + 4] = struct.pack("<i", 0x01020304 * (r + 1))
    want[end - 500:end] = bytes(500)
    m = json.loads(data.read_text())
    assert m["version"] == 2 and m["size"] == len(want) and m["layout"] == layout, m
    # At rest the set holds one version: the manifest and its unit files.
    files = sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("e.dat"))
    assert files == sorted(["e.dat"] + [u["path"] for u in m["units"]]), files
    tool = lambda *a: subprocess.run([spools_bin(), *a], capture_output=True, timeout=120)
    fsck = tool("fsck", str(data))
    assert fsck.returncode == 0 and b"all checksums" in fsck.stdout, fsck
    cat = tool("cat", str(data))
    assert cat.returncode == 0 and cat.stdout == bytes(want), cat.stderr
    # Cut to a whole number of stripe rows (twice, a sync between: the second a cut to
    # the size it has): every parity block stays, fsck is clean.
    row = row_bytes(layout)
    to = row * (len(want) // row - 1)
    job = spools_run(ranks, exe, str(data), "cut", to, layout)
    assert job.out.splitlines() == ["ok io_raid cut %d ranks" % ranks], job
    fsck = tool("fsck", str(data))
    assert fsck.returncode == 0 and b"all checksums" in fsck.stdout, fsck
    cat = tool("cat", str(data))
    assert cat.returncode == 0 and cat.stdout == bytes(want[:to]), cat.stderr
    plain = tmp_path / "p.dat"
    body = bytes((i * 7 + i // 4099) % 251 for i in range(50001))
    plain.write_bytes(body)
    job = spools_run(ranks, exe, str(plain), "touch")
    assert job.out.splitlines() == ["ok io_raid touch %d ranks" % ranks], job
    assert json.loads(plain.read_text())["version"] == 1
    cat = tool("cat", str(plain))
    assert cat.returncode == 0 and cat.stdout == body, cat.stderr
    # A reader of the set keeps its version while a writer commits twice (the unit files
    # of a new version are made anew, not reused under the reader).
    job = spools_run(ranks, exe, str(plain), "two")
    assert job.out.splitlines() == ["ok io_raid two %d ranks" % ranks], job
    assert json.loads(plain.read_text())["version"] == 4
    cat = tool("cat", str(plain))
    assert cat.returncode == 0 and cat.stdout == struct.pack("<i", 4242) + body[4:], cat.stderr
    # Deleted on close: the set and both slots' unit files, or a plain file.
    other = tmp_path / "q.dat"
    other.write_bytes(body)
    for f in (plain, other):
        job = spools_run(ranks, exe, str(f), "doc")
        assert job.out.splitlines() == ["ok io_raid doc %d ranks" % ranks], job
    left = sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith("e.dat"))
    assert left == [], left


@pytest.mark.parametrize("layout,ranks,seed", [("raid5(unit=1000B,count=3)", 3, 1), ("raid5(unit=4KiB,count=4)", 2, 2),
                                               ("stripe(unit=700B,count=3)", 2, 3), ("raid5(unit=512B,count=2)", 4, 4)])
def test_random_edits_of_a_set_in_place_match_a_mirror(build, tmp_path, spools_run, layout, ranks, seed):
    """Random writes by every rank, set_size (to the size the set has, too) and syncs on a
    set under the `spools_layout` hint (io_raid.c's random step): after every sync the
    file reads back as the mirror and `spools fsck` passes; at the end `spools cat` gives
    the mirror."""
    exe, data = build("io_raid"), tmp_path / "r.dat"
    job = spools_run(ranks, exe, str(data), "random", seed, 100, layout, spools_bin(), row_bytes(layout))
    assert job.out.splitlines() == ["ok io_raid random %d ranks" % ranks], job
    want = (tmp_path / "r.dat.want").read_bytes()
    cat = subprocess.run([spools_bin(), "cat", str(data)], capture_output=True, timeout=120)
    if want:
        fsck = subprocess.run([spools_bin(), "fsck", str(data)], capture_output=True, timeout=120)
        assert fsck.returncode == 0, fsck
    assert cat.returncode == 0 and cat.stdout == want, (len(cat.stdout), len(want), cat.stderr)


def test_an_unsupported_function_is_fatal_by_default_and_named(build, tmp_path, spools_run):
    src = tmp_path / "unsupported.c"
    src.write_text("#include <mpi.h>\n"
                   "int main(int c, char **v) { MPI_Init(&c, &v);\n"
                   "  MPI_Abi_set_fortran_info(MPI_INFO_NULL);\n"
                   "  return 0; }\n")
    exe = tmp_path / "unsupported"
    subprocess.run([mpicc_abi(), "-o", str(exe), str(src)], check=True)
    job = spools_run(2, exe, timeout=60)
    assert job.code != 0, job
    assert "MPI_Abi_set_fortran_info is not supported by Spools" in job.err, job


def test_every_function_of_the_abi_is_exported_with_its_profiling_name():
    """Every function mpi_abi.h declares (MPI_ and PMPI_) is a dynamic symbol of Spools'
    library, which has the standard's soname."""
    lib = REPO / "target" / "debug" / "libmpi_abi.so.1"
    header = Path(mpicc_abi()).parent.parent / "include" / "mpi_abi.h"
    functions = set(re.findall(r"^[A-Za-z_][A-Za-z0-9_ ]*\**\s*\b(P?MPIX?_[A-Za-z0-9_]+)\(",
                               header.read_text(), re.M))
    nm = subprocess.run(["nm", "-D", "--defined-only", str(lib)], capture_output=True,
                        text=True, check=True).stdout
    exported = {l.split()[-1] for l in nm.splitlines() if " T " in l}
    missing = sorted(functions - exported)
    assert len(functions) > 1200 and not missing, missing
    soname = subprocess.run(["readelf", "-d", str(lib)], capture_output=True, text=True).stdout
    assert "Library soname: [libmpi_abi.so.1]" in soname, soname


def test_constants_sizes_and_layouts_match_another_implementations_header(tmp_path):
    """The oracle: a C program compiled against the wheel's mpi_abi.h prints every
    constant, sizeof and MPI_Status offset that Spools defines; each must be equal."""
    ours = subprocess.run(["cargo", "run", "-q", "--locked", "-p", "spools-mpi", "--example",
                           "abi_table"], cwd=REPO, capture_output=True, text=True, check=True)
    rows = [l.split() for l in ours.stdout.splitlines()]
    assert len(rows) > 250, rows
    c = ["#include <mpi.h>", "#include <stdio.h>", "#include <stddef.h>", "int main(void) {"]
    for kind, name, _ in rows:
        if kind == "const":
            c.append('  printf("const %s %%lld\\n", (long long)(intptr_t)(%s));' % (name, name))
        elif kind == "sizeof":
            c.append('  printf("sizeof %s %%zu\\n", sizeof(%s));' % (name, name))
        else:
            c.append('  printf("offsetof %s %%zu\\n", offsetof(MPI_Status, %s));' % (name, name))
    c += ["  return 0;", "}"]
    src = tmp_path / "abi.c"
    src.write_text("\n".join(c) + "\n")
    exe = tmp_path / "abi"
    r = subprocess.run([mpicc_abi(), "-Wall", "-o", str(exe), str(src)], capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stderr
    theirs = subprocess.run([str(exe)], capture_output=True, text=True,
                            env=dict(os.environ, LD_LIBRARY_PATH=str(REPO / "target" / "debug")))
    assert theirs.returncode == 0, theirs.stderr
    mine = {(k, n): v for k, n, v in rows}
    other = {(k, n): v for k, n, v in (l.split() for l in theirs.stdout.splitlines())}
    differ = {key: (mine[key], other.get(key)) for key in mine if other.get(key) != mine[key]}
    assert not differ, differ
