//! Configuration: sources, precedence, errors, and the printed form read back.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use spools_boot::config::{Config, ConfigError, SingleCopyChoice, TransportChoice};
use spools_boot::identity::{parse_rendezvous, IdentityError, JobEnv, LauncherKind, Rendezvous};

fn temp_file(name: &str, text: &str) -> std::path::PathBuf {
    let p = std::env::temp_dir().join(format!("spools-cfg-{}-{name}.toml", std::process::id()));
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn file_then_environment() {
    let f = temp_file(
        "a",
        "ring_size = \"1MiB\"\nspin_us = 7\ntransport = \"tcp\"\nprogress_thread = true\n",
    );
    let cfg =
        Config::from_sources(Some(&f), [("SPOOLS_SPIN_US", "9"), ("SPOOLS_RANK", "3")]).unwrap();
    assert_eq!(cfg.ring_size, 1 << 20);
    assert_eq!(cfg.spin_us, 9, "the environment overrides the file");
    assert_eq!(cfg.transport, TransportChoice::Tcp);
    assert!(cfg.progress_thread);
    assert_eq!(cfg.file.as_deref(), Some(f.as_path()));
    let _ = std::fs::remove_file(f);
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
    let f = temp_file("b", &cfg.to_string());
    let back = Config::from_sources(Some(&f), std::iter::empty()).unwrap();
    assert_eq!(Config { file: None, ..back }, cfg);
    assert_eq!(cfg.single_copy, SingleCopyChoice::Pipeline);
    let _ = std::fs::remove_file(f);
}

#[test]
fn bad_values_are_named() {
    for (k, v, want) in [
        ("SPOOLS_CELL_SIZE", "100", "power of two"),
        ("SPOOLS_RING_SIZE", "3MiB", "power of two"),
        ("SPOOLS_RING_SIZE", "12XB", "unknown size suffix"),
        ("SPOOLS_TRANSPORT", "udp", "auto, shm or tcp"),
        ("SPOOLS_LANES", "2", "from 3 to 64"),
        ("SPOOLS_SHORT_LIMIT", "25", "at most 24B"),
        ("SPOOLS_EAGER_LIMIT", "128KiB", "at most bulk_limit"),
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
    let f = temp_file("c", "ring_sise = \"1MiB\"\n");
    let e = Config::from_sources(Some(&f), std::iter::empty()).unwrap_err();
    assert!(
        matches!(e, ConfigError::Toml { .. }) && e.to_string().contains("ring_sise"),
        "{e}"
    );
    let _ = std::fs::remove_file(&f);
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
