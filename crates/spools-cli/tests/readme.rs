//! The README's claims, each run as a user would: `spools demo heat` and its bit-identical
//! check, `spools info`, `spools secret`, and the examples of `crates/spools/examples`
//! under `spools run`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{spools, Output};

/// Runs the `spools` binary with `args` and `env` (and none of the caller's `SPOOLS_*`
/// variables), bounded.
fn run(args: &[&str], env: &[(&str, &str)]) -> Output {
    common::spools_command(args, env, Duration::from_secs(120))
}

// ---- spools demo heat ----

const N: usize = 24;

/// The heat demo's grid after `steps` steps, computed here element by element from its
/// definition (hot square 100 in the middle third, warm columns 25 where `j % 64 < 4`,
/// edges held at 0; each interior point moves by 0.2 times the discrete Laplacian).
fn heat_model(steps: u64) -> Vec<f64> {
    let at = |i: usize, j: usize| i * N + j;
    let mut u = vec![0.0f64; N * N];
    for i in 1..N - 1 {
        for j in 1..N - 1 {
            u[at(i, j)] = if (N / 3..2 * N / 3).contains(&i) && (N / 3..2 * N / 3).contains(&j) {
                100.0
            } else if j % 64 < 4 {
                25.0
            } else {
                0.0
            };
        }
    }
    for _ in 0..steps {
        let old = u.clone();
        for i in 1..N - 1 {
            for j in 1..N - 1 {
                let c = old[at(i, j)];
                let sum = (old[at(i - 1, j)] + old[at(i + 1, j)])
                    + (old[at(i, j - 1)] + old[at(i, j + 1)]);
                u[at(i, j)] = c + 0.2 * (sum - 4.0 * c);
            }
        }
    }
    u
}

/// The values of a `.npy` file of little-endian f64 in C order with shape `(N, N)`,
/// parsed here (magic, version 1, header length, header dictionary).
fn read_npy(path: &Path) -> Vec<f64> {
    let b = std::fs::read(path).unwrap();
    assert_eq!(&b[..6], b"\x93NUMPY", "{}", path.display());
    let hlen = u16::from_le_bytes([b[8], b[9]]) as usize;
    let header = String::from_utf8_lossy(&b[10..10 + hlen]);
    assert!(header.contains("'descr': '<f8'"), "{header}");
    assert!(header.contains("'fortran_order': False"), "{header}");
    assert!(header.contains(&format!("'shape': ({N}, {N})")), "{header}");
    let data = &b[10 + hlen..];
    assert_eq!(data.len(), N * N * 8, "{}", path.display());
    data.chunks_exact(8)
        .map(|c| f64::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

fn heat_args(dir: &Path) -> Vec<String> {
    [
        "demo",
        "heat",
        "--n",
        "24",
        "--steps",
        "6",
        "--every",
        "3",
        "--ranks",
        "4",
        "--readers",
        "3",
        "--dir",
    ]
    .iter()
    .map(|s| s.to_string())
    .chain([dir.to_string_lossy().into_owned()])
    .collect()
}

/// `spools demo heat`, small: the simulation job writes its snapshots, the checking job
/// (another rank count and distribution) finds every value bit-identical; the snapshots
/// hold, bit for bit, what this test computes by itself; and the checking job, run again
/// after one value of one snapshot is changed by one unit in the last place, fails and
/// counts exactly that value.
#[test]
fn demo_heat_is_bit_identical_and_its_check_can_fail() {
    let dir = common::tempdir("heat");
    let args = heat_args(&dir);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = run(&args, &[]);
    common::assert_ok(&o);
    assert!(
        o.stdout
            .contains("heat: 24x24 f64, 6 steps, 4 ranks as 2x2 blocks, snapshot every 3 steps"),
        "{o:?}"
    );
    assert!(
        o.stdout
            .contains("every value is bit-identical to the one-process computation"),
        "{o:?}"
    );
    for step in [3, 6] {
        let got = read_npy(&dir.join(format!("heat-{step:05}.npy")));
        let want = heat_model(step);
        let differ = (0..N * N)
            .filter(|&k| got[k].to_bits() != want[k].to_bits())
            .count();
        assert_eq!(
            differ, 0,
            "step {step}: {differ} values differ from the model"
        );
    }
    assert!(dir.join("heat-final.raid5").exists());

    // One value of the first snapshot, one ulp off: the checking job alone must fail.
    let snap = dir.join("heat-00003.npy");
    let mut bytes = std::fs::read(&snap).unwrap();
    let k = (N / 2) * N + N / 2;
    let off = bytes.len() - N * N * 8 + k * 8;
    let v = f64::from_le_bytes(bytes[off..off + 8].try_into().unwrap());
    assert!(v != 0.0, "the hot square's centre is warm");
    bytes[off..off + 8].copy_from_slice(&f64::from_bits(v.to_bits() + 1).to_le_bytes());
    std::fs::write(&snap, &bytes).unwrap();
    let mut check = vec!["run", "-n", "3", "--"];
    let exe = spools();
    check.push(exe.to_str().unwrap());
    check.extend(args.iter().copied());
    check.extend(["--role", "check"]);
    let o = run(&check, &[]);
    assert_ne!(o.code(), Some(0), "{o:?}");
    assert!(
        o.stderr
            .contains("1 values differ from the one-process computation"),
        "{o:?}"
    );
    assert!(!o.stdout.contains("bit-identical"), "{o:?}");
}

// ---- spools info ----

/// The configuration section of `spools info`: the lines from the `# configuration` line
/// to the first empty one.
fn config_section(info: &str) -> String {
    info.lines()
        .skip_while(|l| !l.starts_with("# configuration"))
        .skip(1)
        .take_while(|l| !l.is_empty())
        .map(|l| format!("{l}\n"))
        .collect()
}

/// `spools info` prints the effective configuration: the defaults alone; then a TOML file
/// (`SPOOLS_CONFIG`) overriding defaults and the environment overriding the file, each
/// value where the documentation says, the transport built with it, the log level of
/// `SPOOLS_LOG`; and the printed configuration, as a file, gives the same configuration
/// back.
#[test]
fn spools_info_prints_the_configuration_in_effect() {
    let o = run(&["info"], &[]);
    common::assert_ok(&o);
    for line in [
        "# configuration: defaults < SPOOLS_* environment (SPOOLS_CONFIG not set)",
        "ring_size = \"256KiB\"\n",
        "batch = 256\n",
        "progress_thread = false\n",
        "level           = info ",
        "shared_memory   = up to 4KiB ",
        "light_fences    = ",
        "rings           262144 B low / 131072 B high priority, 64 B cells, 3 lanes per sender",
        "# job: 1 rank(s), launcher none (singleton)",
    ] {
        assert!(
            o.stdout.contains(line),
            "defaults: no {line:?} in\n{}",
            o.stdout
        );
    }

    let dir = common::tempdir("info");
    let file = dir.join("spools.toml");
    std::fs::write(&file, "batch = 17\nring_size = \"64KiB\"\nlanes = 5\n").unwrap();
    let f = file.to_str().unwrap();
    let env = [
        ("SPOOLS_CONFIG", f),
        ("SPOOLS_RING_SIZE", "1MiB"),
        ("SPOOLS_PROGRESS_THREAD", "1"),
        ("SPOOLS_LOG", "warn"),
    ];
    let o = run(&["info"], &env);
    common::assert_ok(&o);
    for line in [
        format!("# configuration: defaults < {f} < SPOOLS_* environment"),
        "ring_size = \"1MiB\"\n".into(),
        "batch = 17\n".into(),
        "lanes = 5\n".into(),
        "progress_thread = true\n".into(),
        "level           = warn ".into(),
        "rings           1048576 B low / 131072 B high priority, 64 B cells, 5 lanes per sender"
            .into(),
    ] {
        assert!(
            o.stdout.contains(&line),
            "configured: no {line:?} in\n{}",
            o.stdout
        );
    }

    // The configuration section is a configuration file that gives itself back.
    let printed = config_section(&o.stdout);
    assert!(printed.lines().count() >= 15, "{printed}");
    let copy = dir.join("copy.toml");
    std::fs::write(&copy, &printed).unwrap();
    let again = run(&["info"], &[("SPOOLS_CONFIG", copy.to_str().unwrap())]);
    common::assert_ok(&again);
    assert_eq!(config_section(&again.stdout), printed);
}

/// Under `spools run -n 2`, `spools info` sees the job: two ranks, both on this host's
/// shared memory, and a route to rank 1.
#[test]
fn spools_info_under_spools_run_sees_the_job() {
    let exe = spools();
    let o = run(
        &["run", "-n", "2", "--", exe.to_str().unwrap(), "info"],
        &[],
    );
    common::assert_ok(&o);
    for line in [
        "# job: 2 rank(s)",
        "shm: ranks on this host [0, 1]",
        "  rank 1: ",
    ] {
        assert!(o.stdout.contains(line), "no {line:?} in\n{}", o.stdout);
    }
}

// ---- spools secret ----

/// `spools secret` prints a fresh job secret for `SPOOLS_SECRET`: 32 lowercase hex digits
/// (16 bytes), different every time, and random-looking: over eight secrets (128 bytes)
/// the bytes take many distinct values and about half the bits are set. (Random bytes
/// take about 100 distinct values, sd 5, and set 512 of 1024 bits, sd 16: the bounds are
/// many deviations away, while a constant, a counter or a clock would fail them.)
#[test]
fn spools_secret_prints_fresh_random_secrets() {
    let mut all = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for _ in 0..8 {
        let o = run(&["secret"], &[]);
        common::assert_ok(&o);
        let s = o.stdout.strip_suffix('\n').expect("one line");
        assert_eq!(s.len(), 32, "{s:?}");
        assert!(
            s.bytes()
                .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c)),
            "{s:?}"
        );
        assert!(seen.insert(s.to_string()), "{s} printed twice");
        for i in 0..16 {
            all.push(u8::from_str_radix(&s[2 * i..2 * i + 2], 16).unwrap());
        }
    }
    let distinct = all.iter().collect::<std::collections::HashSet<_>>().len();
    assert!(distinct >= 60, "{distinct} distinct byte values in {all:?}");
    let ones: u32 = all.iter().map(|b| b.count_ones()).sum();
    assert!(
        (400..=624).contains(&ones),
        "{ones} of 1024 bits set in {all:?}"
    );
}

// ---- the examples ----

/// An example program of the `spools` crate, as `cargo test` (the whole workspace's, which
/// the test command runs) builds it: `target/<profile>/examples/NAME`, beside this test's
/// `deps` directory. It is run as a program under `spools run` (what the README shows),
/// which a test built from its source could not do. Built by the same `cargo test
/// --workspace` before any test runs, so it is as fresh as this test; refused when older
/// than its source (a leftover of an earlier build).
fn example(name: &str) -> PathBuf {
    let exe = common::current_exe();
    let profile_dir = exe.parent().and_then(Path::parent).unwrap();
    let bin = profile_dir.join("examples").join(name);
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../spools/examples")
        .join(format!("{name}.rs"));
    let built = std::fs::metadata(&bin).and_then(|m| m.modified());
    let written = std::fs::metadata(&src).and_then(|m| m.modified()).unwrap();
    match built {
        Ok(t) if t >= written => bin,
        Ok(_) => panic!(
            "{} is older than {}: build the examples (`cargo test --workspace` does; or `cargo build -p spools --examples`)",
            bin.display(),
            src.display()
        ),
        Err(e) => panic!(
            "{}: {e}: build the examples (`cargo test --workspace` does; or `cargo build -p spools --examples`)",
            bin.display()
        ),
    }
}

/// Example `name` under `spools run -n 3 --tag-output` (three ranks, so that left and
/// right neighbours differ), which must succeed.
fn run_example(name: &str) -> Output {
    let bin = example(name);
    let o = run(
        &[
            "run",
            "-n",
            "3",
            "--tag-output",
            "--",
            bin.to_str().unwrap(),
        ],
        &[],
    );
    common::assert_ok(&o);
    o
}

/// `hello` under `spools run -n 3 --tag-output`: every rank is greeted by both others with
/// their rank times 100, and finds in its region what its left neighbour put there.
#[test]
fn the_hello_example_runs_under_spools_run() {
    let o = run_example("hello");
    for me in 0..3u32 {
        for from in (0..3u32).filter(|&f| f != me) {
            let line = format!(
                "[{me}] got a greeting from rank {from} (it says {})\n",
                from * 100
            );
            assert!(o.stdout.contains(&line), "no {line:?} in\n{}", o.stdout);
        }
        let left = (me + 2) % 3;
        let line = format!(
            "[{me}] rank {me} of 3: 2 greetings; my region says \"written by rank {left}\"\n"
        );
        assert!(o.stdout.contains(&line), "no {line:?} in\n{}", o.stdout);
    }
}

/// `messaging` under `spools run -n 3` (its own assertions check what each rank
/// received): every rank got its left neighbour's MiB, the allreduce of 1.5 per rank, its
/// place in the even or odd row, and the RPC's answer (the length of "hello").
#[test]
fn the_messaging_example_runs_under_spools_run() {
    let o = run_example("messaging");
    // Rows by rank parity, ordered by rank: {0, 2} and {1}.
    for (me, left, row_rank, row_size) in [(0, 2, 0, 2), (1, 0, 0, 1), (2, 1, 1, 2)] {
        let line = format!(
            "[{me}] rank {me}: got 1 MiB from rank {left}, allreduce 4.5, rank {row_rank} of {row_size} in my row, rpc said 5\n"
        );
        assert!(o.stdout.contains(&line), "no {line:?} in\n{}", o.stdout);
    }
}
