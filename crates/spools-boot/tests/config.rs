//! Configuration: sources, precedence, errors, and the printed form read back.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use spools_boot::config::{
    Config, ConfigError, FenceChoice, ScanChoice, SingleCopyChoice, ThreadLevel, TransportChoice,
};
use spools_boot::identity::{parse_rendezvous, IdentityError, JobEnv, LauncherKind, Rendezvous};

/// A file in the system's temporary directory, removed when dropped (also when the test
/// fails). Unique per process, name and call.
struct TempFile(PathBuf);

impl TempFile {
    fn new(name: &str, text: &str) -> TempFile {
        static N: AtomicU64 = AtomicU64::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let p =
            std::env::temp_dir().join(format!("spools-cfg-{}-{n}-{name}.toml", std::process::id()));
        std::fs::write(&p, text).unwrap();
        TempFile(p)
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

impl std::ops::Deref for TempFile {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

#[test]
fn file_then_environment() {
    let f = TempFile::new(
        "a",
        "ring_size = \"1MiB\"\nspin_us = 7\ntransport = \"tcp\"\nprogress_thread = true\n",
    );
    let cfg =
        Config::from_sources(Some(&f), [("SPOOLS_SPIN_US", "9"), ("SPOOLS_RANK", "3")]).unwrap();
    assert_eq!(cfg.ring_size, 1 << 20);
    assert_eq!(cfg.spin_us, 9, "the environment overrides the file");
    assert_eq!(cfg.transport, TransportChoice::Tcp);
    assert!(cfg.progress_thread);
    assert_eq!(cfg.file.as_deref(), Some(&*f));
}

#[test]
fn printed_configuration_reads_back() {
    let cfg = Config::from_sources(
        None,
        [
            ("SPOOLS_SINGLE_COPY", "pipeline"),
            ("SPOOLS_BATCH", "64"),
            ("SPOOLS_FRAGMENT_SIZE", "16K"),
        ],
    )
    .unwrap();
    let f = TempFile::new("b", &cfg.to_string());
    let back = Config::from_sources(Some(&f), std::iter::empty()).unwrap();
    assert_eq!(Config { file: None, ..back }, cfg);
    assert_eq!(cfg.single_copy, SingleCopyChoice::Pipeline);
}

#[test]
fn bad_values_are_named() {
    for (k, v, want) in [
        ("SPOOLS_CELL_SIZE", "100", "power of two"),
        ("SPOOLS_RING_SIZE", "3MiB", "power of two"),
        ("SPOOLS_RING_SIZE", "12XB", "unknown size suffix"),
        ("SPOOLS_TRANSPORT", "udp", "auto, shm, tcp or ofi"),
        ("SPOOLS_LANES", "2", "from 3 to 64"),
        ("SPOOLS_SHORT_LIMIT", "25", "at most 24B"),
        ("SPOOLS_EAGER_LIMIT", "128KiB", "at most bulk_limit"),
        ("SPOOLS_COLL_SM_LIMIT", "65537", "at most 64KiB"),
        ("SPOOLS_SPIN_US", "-1", "non-negative"),
        ("SPOOLS_PROGRESS_THREAD", "maybe", "true or false"),
        ("SPOOLS_FRAGMENT_SIZE", "1K", "4KiB"),
    ] {
        let e = Config::from_sources(None, [(k, v)]).unwrap_err();
        let msg = e.to_string();
        assert!(matches!(e, ConfigError::Value { .. }), "{k}={v}: {e:?}");
        assert!(msg.contains(want), "{k}={v}: {msg}");
    }
}

#[test]
fn bad_files_are_reported() {
    let f = TempFile::new("c", "ring_sise = \"1MiB\"\n");
    let e = Config::from_sources(Some(&f), std::iter::empty()).unwrap_err();
    assert!(
        matches!(e, ConfigError::Toml { .. }) && e.to_string().contains("ring_sise"),
        "{e}"
    );
    let e = Config::from_sources(
        Some(std::path::Path::new("/nonexistent/spools.toml")),
        std::iter::empty(),
    )
    .unwrap_err();
    assert!(matches!(e, ConfigError::Read { .. }), "{e}");
}

#[test]
fn identity_from_each_launcher() {
    let cases = [
        ("SLURM_PROCID", "SLURM_NTASKS", LauncherKind::Slurm),
        (
            "OMPI_COMM_WORLD_RANK",
            "OMPI_COMM_WORLD_SIZE",
            LauncherKind::OpenMpi,
        ),
        ("PMI_RANK", "PMI_SIZE", LauncherKind::Pmi),
    ];
    for (rv, sv, kind) in cases {
        let env = |k: &str| match k {
            k if k == rv => Some("1".to_string()),
            k if k == sv => Some("3".to_string()),
            "SPOOLS_BOOTSTRAP" => Some("node1:7000".to_string()),
            "SPOOLS_SECRET" => Some("00112233445566778899aabbccddeeff".to_string()),
            _ => None,
        };
        let j = JobEnv::from_lookup(env).unwrap();
        assert_eq!((j.rank, j.size, j.launcher), (1, 3, kind));
        assert_eq!(j.rendezvous, Rendezvous::Addr("node1:7000".into()));
    }
}

#[test]
fn identity_through_the_launchers_interface() {
    use spools_boot::pmi::PmiKind;
    let job = |vars: &'static [(&'static str, &'static str)]| {
        JobEnv::from_lookup(move |k| {
            vars.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        })
    };
    // Nothing set but the launcher's own variables: its PMIx or PMI2.
    let j = job(&[
        ("OMPI_COMM_WORLD_RANK", "1"),
        ("OMPI_COMM_WORLD_SIZE", "4"),
        ("PMIX_NAMESPACE", "1234"),
    ])
    .unwrap();
    assert_eq!(j.rendezvous, Rendezvous::Pmi(PmiKind::Pmix));
    assert_eq!(
        j.rendezvous.describe(j.launcher),
        "PMIx (the launcher's)".to_string()
    );
    let j = job(&[
        ("SLURM_PROCID", "2"),
        ("SLURM_NTASKS", "4"),
        ("PMI_FD", "7"),
    ])
    .unwrap();
    assert_eq!(
        (j.rank, j.launcher, j.rendezvous.clone()),
        (2, LauncherKind::Slurm, Rendezvous::Pmi(PmiKind::Pmi2))
    );
    // SPOOLS_BOOTSTRAP wins over the launcher's interface.
    let j = job(&[
        ("SLURM_PROCID", "2"),
        ("SLURM_NTASKS", "4"),
        ("PMIX_NAMESPACE", "1234"),
        ("SPOOLS_BOOTSTRAP", "file:/shared/rdv"),
    ])
    .unwrap();
    assert_eq!(j.rendezvous, Rendezvous::File("/shared/rdv".into()));
    assert_eq!(
        j.rendezvous.describe(j.launcher),
        "SPOOLS_BOOTSTRAP=file:/shared/rdv".to_string()
    );
    // mpirun inside a Slurm allocation: Open MPI's variables, not the allocation's.
    let j = job(&[
        ("SLURM_PROCID", "0"),
        ("SLURM_NTASKS", "1"),
        ("OMPI_COMM_WORLD_RANK", "3"),
        ("OMPI_COMM_WORLD_SIZE", "4"),
        ("PMIX_NAMESPACE", "1234"),
    ])
    .unwrap();
    assert_eq!((j.rank, j.size, j.launcher), (3, 4, LauncherKind::OpenMpi));
    // One rank needs no rendezvous at all.
    let j = job(&[
        ("OMPI_COMM_WORLD_RANK", "0"),
        ("OMPI_COMM_WORLD_SIZE", "1"),
        ("PMIX_NAMESPACE", "1234"),
    ])
    .unwrap();
    assert_eq!(j.rendezvous, Rendezvous::Singleton);
    // Neither interface nor SPOOLS_BOOTSTRAP: the error says what to set.
    let e = job(&[("SLURM_PROCID", "0"), ("SLURM_NTASKS", "2")]).unwrap_err();
    let msg = e.to_string();
    for needed in [
        "Slurm started 2 ranks",
        "SPOOLS_BOOTSTRAP=file:PATH",
        "SPOOLS_SECRET",
        "--mpi=pmix",
    ] {
        assert!(msg.contains(needed), "{msg}");
    }
}

#[test]
fn identity_errors() {
    let e = JobEnv::from_lookup(|k| match k {
        "PMI_RANK" => Some("4".into()),
        "PMI_SIZE" => Some("4".into()),
        _ => None,
    })
    .unwrap_err();
    assert!(matches!(e, IdentityError::RankOutOfRange { .. }), "{e}");
    let e = JobEnv::from_lookup(|k| match k {
        "PMI_RANK" => Some("0".into()),
        "PMI_SIZE" => Some("2".into()),
        _ => None,
    })
    .unwrap_err();
    assert!(matches!(e, IdentityError::NoRendezvous { .. }), "{e}");
    let e = JobEnv::from_lookup(|k| match k {
        "PMI_RANK" => Some("0".into()),
        "PMI_SIZE" => Some("2".into()),
        "SPOOLS_BOOTSTRAP" => Some("h:1".into()),
        _ => None,
    })
    .unwrap_err();
    assert_eq!(e, IdentityError::NoSecret);
    assert!(parse_rendezvous("nohostport").is_err());
    assert!(parse_rendezvous("file:").is_err());
    assert!(parse_rendezvous("h:99999").is_err());
    assert_eq!(
        parse_rendezvous("file:/x/y").unwrap(),
        Rendezvous::File("/x/y".into())
    );
}

// ---------------------------------------------------------------------------------------
// Literal configuration files (tests/data/*.toml) and their expected typed values
// ---------------------------------------------------------------------------------------

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

/// What `tests/data/all-keys.toml` says, written out by hand.
fn all_keys() -> Config {
    Config {
        transport: TransportChoice::Tcp,
        ring_size: 1_048_576,
        high_ring_size: 524_288,
        cell_size: 128,
        bulk_limit: 1_048_576,
        fragment_size: 65_536,
        spin_us: 5,
        lanes: 5,
        single_copy: SingleCopyChoice::Cma,
        short_limit: 16,
        eager_limit: 262_144,
        coll_sm_limit: 1024,
        coll_sm_scan: ScanChoice::Doubling,
        coll_sm_fences: FenceChoice::Locked,
        batch: 32,
        progress_thread: true,
        thread_level: ThreadLevel::Funneled,
        bootstrap_timeout_s: 120,
        liveness_timeout_s: 30,
        file: Some(fixture("all-keys.toml")),
        coll_buffer: 4_194_304,
        net_timeout_s: 9,
        ofi_provider: Some("verbs;ofi_rxm".into()),
    }
}

/// The documented defaults (docs/configuration.md), written out by hand.
fn documented_defaults() -> Config {
    Config {
        transport: TransportChoice::Auto,
        ring_size: 262_144,
        high_ring_size: 131_072,
        cell_size: 64,
        bulk_limit: 65_536,
        fragment_size: 32_768,
        spin_us: 1000,
        lanes: 3,
        single_copy: SingleCopyChoice::Auto,
        short_limit: 24,
        eager_limit: 32_768,
        coll_sm_limit: 4096,
        coll_sm_scan: ScanChoice::Auto,
        coll_sm_fences: FenceChoice::Auto,
        batch: 256,
        progress_thread: false,
        thread_level: ThreadLevel::Multiple,
        bootstrap_timeout_s: 60,
        liveness_timeout_s: 0,
        file: None,
        coll_buffer: 16_777_216,
        net_timeout_s: 5,
        ofi_provider: None,
    }
}

#[test]
fn defaults_are_the_documented_ones() {
    assert_eq!(Config::default(), documented_defaults());
    assert_eq!(
        Config::from_sources(None, std::iter::empty()).unwrap(),
        documented_defaults()
    );
}

#[test]
fn a_file_with_every_key_gives_its_values() {
    let path = fixture("all-keys.toml");
    let cfg = Config::from_sources(Some(&path), std::iter::empty()).unwrap();
    assert_eq!(cfg, all_keys());
    // Every field differs from its default, so a key the file reader drops shows above.
    let d = documented_defaults();
    let differs = [
        cfg.transport != d.transport,
        cfg.ring_size != d.ring_size,
        cfg.high_ring_size != d.high_ring_size,
        cfg.cell_size != d.cell_size,
        cfg.bulk_limit != d.bulk_limit,
        cfg.coll_sm_scan != d.coll_sm_scan,
        cfg.coll_sm_fences != d.coll_sm_fences,
        cfg.fragment_size != d.fragment_size,
        cfg.spin_us != d.spin_us,
        cfg.lanes != d.lanes,
        cfg.single_copy != d.single_copy,
        cfg.short_limit != d.short_limit,
        cfg.eager_limit != d.eager_limit,
        cfg.coll_sm_limit != d.coll_sm_limit,
        cfg.batch != d.batch,
        cfg.progress_thread != d.progress_thread,
        cfg.thread_level != d.thread_level,
        cfg.bootstrap_timeout_s != d.bootstrap_timeout_s,
        cfg.liveness_timeout_s != d.liveness_timeout_s,
        cfg.coll_buffer != d.coll_buffer,
        cfg.net_timeout_s != d.net_timeout_s,
    ];
    assert!(differs.iter().all(|d| *d), "{differs:?}");
}

#[test]
fn a_file_with_some_keys_in_other_notations() {
    let path = fixture("other-notations.toml");
    let cfg = Config::from_sources(Some(&path), std::iter::empty()).unwrap();
    assert_eq!(
        cfg,
        Config {
            transport: TransportChoice::Shm,
            ring_size: 2_097_152,
            high_ring_size: 65_536,
            cell_size: 256,
            bulk_limit: 2_097_152,
            fragment_size: 4096,
            single_copy: SingleCopyChoice::Pipeline,
            coll_sm_scan: ScanChoice::Messages,
            progress_thread: false,
            file: Some(path),
            ..documented_defaults()
        }
    );
}

/// The environment overrides the file key by key; what it does not set comes from the file.
#[test]
fn environment_overrides_a_file_key_by_key() {
    let path = fixture("all-keys.toml");
    let cfg = Config::from_sources(
        Some(&path),
        [
            ("SPOOLS_TRANSPORT", "auto"),
            ("SPOOLS_RING_SIZE", "64KiB"),
            ("SPOOLS_PROGRESS_THREAD", "off"),
            ("SPOOLS_LIVENESS_TIMEOUT", "0"),
        ],
    )
    .unwrap();
    assert_eq!(
        cfg,
        Config {
            transport: TransportChoice::Auto,
            ring_size: 65_536,
            progress_thread: false,
            liveness_timeout_s: 0,
            ..all_keys()
        }
    );
}

#[test]
fn bad_fixture_files_name_the_file_and_the_key() {
    for (name, key, toml_error) in [
        ("unknown-key.toml", "ring_sise", true),
        ("wrong-type.toml", "spin_us", true),
        ("not-toml.toml", "", true),
        ("out-of-range.toml", "lanes", false),
    ] {
        let path = fixture(name);
        let e = Config::from_sources(Some(&path), std::iter::empty()).unwrap_err();
        let msg = e.to_string();
        assert_eq!(
            matches!(e, ConfigError::Toml { .. }),
            toml_error,
            "{name}: {e:?}"
        );
        if toml_error {
            assert!(msg.contains(&*path.to_string_lossy()), "{name}: {msg}");
        } else {
            assert!(matches!(e, ConfigError::Value { .. }), "{name}: {e:?}");
        }
        assert!(msg.contains(key), "{name}: {msg}");
    }
}

// ---------------------------------------------------------------------------------------
// SPOOLS_CONFIG: the real `Config::load` in a child process with a controlled environment
// ---------------------------------------------------------------------------------------

const CHILD: &str = "SPOOLS_CONFIG_TEST_CHILD";

/// Not a test of its own: the body of the child process started by `load`, which runs only
/// this test (by exact name) with `SPOOLS_CONFIG_TEST_CHILD` set. It prints what
/// `Config::load` returns, in `Debug` form (not the `Display` form under test elsewhere).
#[test]
fn child_loads_the_configuration() {
    if std::env::var_os(CHILD).is_none() {
        return;
    }
    match Config::load() {
        // On lines of their own (the test harness prints the test's name before them), the
        // error's own line breaks escaped.
        Ok(cfg) => println!("\nLOADED {cfg:?}"),
        Err(e) => println!("\nFAILED {}", e.to_string().replace('\n', "\\n")),
    }
}

/// Runs `Config::load` in a child process with exactly these `SPOOLS_*` variables (the
/// caller's own are removed), and returns its one line of answer. Bounded: the child is
/// killed after 60 s.
fn load(vars: &[(&str, &str)]) -> String {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "--exact",
        "child_loads_the_configuration",
        "--nocapture",
        "--test-threads=1",
    ]);
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("SPOOLS_") {
            cmd.env_remove(k);
        }
    }
    cmd.env(CHILD, "1").envs(vars.iter().copied());
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the child process did not finish within 60 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "child failed: {:?}", out.status);
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("LOADED ") || l.starts_with("FAILED "))
        .collect();
    assert_eq!(lines.len(), 1, "child output: {text}");
    lines[0].to_string()
}

#[test]
fn spools_config_names_the_file_and_the_environment_overrides_it() {
    let path = fixture("all-keys.toml");
    let p = path.to_str().unwrap();
    // Defaults only.
    assert_eq!(load(&[]), format!("LOADED {:?}", documented_defaults()));
    // The file named by SPOOLS_CONFIG over the defaults.
    assert_eq!(
        load(&[("SPOOLS_CONFIG", p)]),
        format!("LOADED {:?}", all_keys())
    );
    // SPOOLS_* variables over the file; other SPOOLS_ variables are not configuration.
    assert_eq!(
        load(&[
            ("SPOOLS_CONFIG", p),
            ("SPOOLS_SPIN_US", "9"),
            ("SPOOLS_SINGLE_COPY", "pipeline"),
            ("SPOOLS_RANK", "1"),
        ]),
        format!(
            "LOADED {:?}",
            Config {
                spin_us: 9,
                single_copy: SingleCopyChoice::Pipeline,
                ..all_keys()
            }
        )
    );
    // Variables without a file: over the defaults.
    assert_eq!(
        load(&[("SPOOLS_BATCH", "8")]),
        format!(
            "LOADED {:?}",
            Config {
                batch: 8,
                ..documented_defaults()
            }
        )
    );
}

#[test]
fn a_bad_spools_config_file_is_a_clear_error() {
    // A misspelt key: the error names the file and the key, whatever the environment sets.
    let bad = fixture("unknown-key.toml");
    let got = load(&[
        ("SPOOLS_CONFIG", bad.to_str().unwrap()),
        ("SPOOLS_RING_SIZE", "1MiB"),
    ]);
    assert!(
        got.starts_with("FAILED configuration file ")
            && got.contains(bad.to_str().unwrap())
            && got.contains("ring_sise"),
        "{got}"
    );
    // A missing file: the error names it.
    let got = load(&[("SPOOLS_CONFIG", "/nonexistent/spools.toml")]);
    assert!(
        got.starts_with("FAILED cannot read configuration file /nonexistent/spools.toml"),
        "{got}"
    );
    // A value out of range in the file: the error names the key and the value.
    let got = load(&[(
        "SPOOLS_CONFIG",
        fixture("out-of-range.toml").to_str().unwrap(),
    )]);
    assert!(got.starts_with("FAILED lanes = \"2\""), "{got}");
}
