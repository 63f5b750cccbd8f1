"""The MPI ABI's test driver: compiles the C programs of this directory with the
standard ABI's compiler wrapper (`mpicc_abi` of PyPI's mpich wheel, installed by
scripts/test-mpi.sh into target/mpi-venv: $SPOOLS_MPICC_ABI), once per session, and runs
them as real jobs under `spools run -n N`, which puts Spools' libmpi_abi.so.1 first for
its ranks. Every job has a bounded wait: one that outlives it is killed with its whole
process group and fails the test. The programs check their results in C (check.h: a
failed check prints FAIL and ends the job with MPI_Abort)."""

import itertools
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
JOB_TIMEOUT = 120
# Seconds a timed-out job's launcher has to stop its ranks and clean up before the group
# is killed.
STOP_GRACE = 20


def spools_bin():
    return os.environ.get("SPOOLS_BIN") or str(REPO / "target" / "debug" / "spools")


def mpicc_abi():
    cc = os.environ.get("SPOOLS_MPICC_ABI")
    if not cc or not Path(cc).exists():
        pytest.fail("no mpicc_abi: run the tests through scripts/test-mpi.sh (it installs "
                    "PyPI's mpich wheel into target/mpi-venv and sets SPOOLS_MPICC_ABI)")
    return cc


class Job:
    def __init__(self, cmd, code, out, err, seconds):
        self.cmd, self.code, self.out, self.err, self.seconds = cmd, code, out, err, seconds

    def __repr__(self):
        return "job %s: exit %r after %.2f s\n--- stdout\n%s--- stderr\n%s" % (
            " ".join(self.cmd), self.code, self.seconds, self.out, self.err)


def run_job(cmd, env=None, timeout=JOB_TIMEOUT):
    """Runs `cmd` in its own process group. If it outlives `timeout`, its leader (the
    launcher) is told to stop first, so that it ends its ranks and removes what the job
    left in /dev/shm (a rank's heap segments outlive it until the launcher sweeps them);
    then, after at most STOP_GRACE seconds, the whole group is killed."""
    start = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True, env=env)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.kill(p.pid, signal.SIGTERM)
        try:
            out, err = p.communicate(timeout=STOP_GRACE)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            out, err = p.communicate()
        else:
            # Anything of the group the launcher left behind goes too.
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        pytest.fail("job timed out after %d s (hung): %s\n%s\n%s" % (timeout, cmd, out, err))
    return Job(cmd, p.returncode, out, err, time.monotonic() - start)


@pytest.fixture(scope="session")
def build(tmp_path_factory):
    """build(NAME) compiles NAME.c with mpicc_abi (once) and gives the program's path."""
    out = tmp_path_factory.mktemp("mpi-programs")
    built = {}

    def make(name):
        if name not in built:
            exe = out / name
            r = subprocess.run([mpicc_abi(), "-std=gnu11", "-Wall", "-Wextra", "-Werror",
                                "-O1", "-o", str(exe), str(HERE / (name + ".c")), "-lpthread"],
                               capture_output=True, text=True)
            assert r.returncode == 0, "mpicc_abi %s.c failed:\n%s%s" % (name, r.stdout, r.stderr)
            built[name] = exe
        return built[name]

    return make


@pytest.fixture
def spools_run():
    """spools_run(N, PROG, *ARGS) runs a job of N ranks and gives the finished Job."""

    def go(n, prog, *args, timeout=JOB_TIMEOUT, env=None, opts=()):
        e = dict(os.environ)
        e.update(env or {})
        return run_job([spools_bin(), "run", "-n", str(n), *opts, "--", str(prog),
                        *map(str, args)], env=e, timeout=timeout)

    return go


_NET_SEQ = itertools.count(40)


class NetHosts:
    """Network namespaces playing hosts h1, h2, ... on one machine, as the Rust test kit's
    `spools_testkit::Hosts` makes them (a bridge, a veth and an address per host, a host
    name of its own through a UTS namespace; the same names, so that its sweep removes
    what a killed test left). `run_args(LIST)` are the `spools run` options that place
    the ranks on them; `close()` kills what runs in them and removes them."""

    def __init__(self, n, workdir):
        self.pid, self.seq = os.getpid(), next(_NET_SEQ)
        v = (self.pid * 8 + self.seq) % (64 * 256)
        self.bridge = "spb%dx%d" % (self.pid, self.seq)
        self.bridge_ip = "10.%d.%d.1" % (160 + v // 256, v % 256)
        self.prefix = "spools-%d-%d-" % (self.pid, self.seq)
        self.netns, self.veths = [], []
        self.agent = Path(workdir) / "agent"
        try:
            self._ip("link", "add", self.bridge, "type", "bridge")
            self._ip("addr", "add", self.bridge_ip + "/24", "dev", self.bridge)
            self._ip("link", "set", self.bridge, "up")
            for i in range(1, n + 1):
                ns, veth = "%sh%d" % (self.prefix, i), "spv%dx%dh%d" % (self.pid, self.seq, i)
                self._ip("netns", "add", ns)
                self.netns.append(ns)
                self._ip("link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns)
                self.veths.append(veth)
                self._ip("link", "set", veth, "master", self.bridge)
                self._ip("link", "set", veth, "up")
                self._ip("-n", ns, "link", "set", "lo", "up")
                self._ip("-n", ns, "addr", "add", self.bridge_ip[:-1] + "%d/24" % (1 + i),
                         "dev", "eth0")
                self._ip("-n", ns, "link", "set", "eth0", "up")
            self.agent.write_text(
                "#!/bin/sh\n# Runs \"$@\" on host $1: in namespace %s$1, with host name $1.\n"
                "h=$1; shift\n"
                "exec ip netns exec \"%s$h\" unshare --uts sh -c 'hostname \"$0\" && exec \"$@\"'"
                " \"$h\" \"$@\"\n" % (self.prefix, self.prefix))
            self.agent.chmod(0o755)
        except Exception:
            self.close()
            raise

    @staticmethod
    def _ip(*args):
        r = subprocess.run(["ip", *args], stdin=subprocess.DEVNULL, capture_output=True,
                           text=True, timeout=30)
        if r.returncode != 0:
            raise RuntimeError("ip %s: %s" % (" ".join(args), r.stderr.strip()))

    def run_args(self, hosts):
        return ["--hosts", hosts, "--agent", "%s {host} {cmd}" % self.agent,
                "--bootstrap-ip", self.bridge_ip]

    def close(self):
        for ns in self.netns:
            until = time.monotonic() + 10
            while time.monotonic() < until:
                r = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True)
                pids = r.stdout.split()
                if not pids:
                    break
                subprocess.run(["kill", "-KILL", *pids], stderr=subprocess.DEVNULL)
                time.sleep(0.01)
        for veth in self.veths:
            subprocess.run(["ip", "link", "del", veth], capture_output=True)
        for ns in self.netns:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        subprocess.run(["ip", "link", "del", self.bridge], capture_output=True)


@pytest.fixture
def hosts(tmp_path):
    """hosts(N) makes N hosts (NetHosts), removed after the test. Without root the test
    skips, saying why; with SPOOLS_REQUIRE_NETNS=1 (CI) that is a failure instead."""
    made = []

    def make(n):
        try:
            if os.geteuid() != 0:
                raise RuntimeError("network namespaces need root")
            made.append(NetHosts(n, tmp_path))
        except (RuntimeError, OSError, subprocess.SubprocessError) as e:
            if os.environ.get("SPOOLS_REQUIRE_NETNS") == "1":
                pytest.fail("network namespaces unavailable but SPOOLS_REQUIRE_NETNS=1: %s" % e)
            pytest.skip("network namespaces unavailable: %s" % e)
        return made[-1]

    yield make
    for h in made:
        h.close()
