//! The PMIx structures Spools passes through `dlopen`ed `libpmix` have the sizes and
//! offsets of the installed header (`pmix_common.h`, from Debian's libpmix-dev, which
//! Open MPI's development package brings). Without the header the test says so and
//! passes, unless `SPOOLS_REQUIRE_MPI=1` (CI), where it fails.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::process::Command;

const PROBE: &str = r#"
#include <stdio.h>
#include <stddef.h>
#include <pmix.h>
int main(void) {
    printf("%zu %zu %zu %zu %zu %zu %d %d %d %d %d %d %d %d %u %d\n", sizeof(pmix_proc_t),
           sizeof(pmix_value_t), sizeof(pmix_info_t), sizeof(pmix_app_t),
           offsetof(pmix_value_t, data),
           offsetof(pmix_info_t, value), PMIX_BOOL, PMIX_STRING, PMIX_SIZE, PMIX_INT,
           PMIX_UINT, PMIX_UINT32, PMIX_UINT64, PMIX_GLOBAL, PMIX_RANK_WILDCARD,
           PMIX_MAX_KEYLEN);
    return 0;
}
"#;

#[test]
fn pmix_structures_match_the_installed_header() {
    let cflags = Command::new("pkg-config")
        .args(["--cflags", "pmix"])
        .output()
        .ok()
        .filter(|o| o.status.success());
    let Some(cflags) = cflags else {
        if std::env::var("SPOOLS_REQUIRE_MPI").is_ok_and(|v| v == "1") {
            panic!("pkg-config --cflags pmix failed but SPOOLS_REQUIRE_MPI=1: install Debian's pkgconf and libpmix-dev (scripts/install-mpi.sh does)");
        }
        eprintln!("SKIPPED: pkg-config finds no pmix (install Debian's pkgconf and libpmix-dev)");
        return;
    };
    let dir = std::env::temp_dir().join(format!("spools-pmix-abi-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("probe.c");
    let bin = dir.join("probe");
    std::fs::write(&src, PROBE).unwrap();
    let cc = Command::new("cc")
        .args(String::from_utf8_lossy(&cflags.stdout).split_whitespace())
        .arg(&src)
        .arg("-o")
        .arg(&bin)
        .output()
        .unwrap();
    assert!(cc.status.success(), "{cc:?}");
    let out = Command::new(&bin).output().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let got: Vec<u64> = String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .map(|w| w.parse().unwrap())
        .collect();
    let [proc_, value, info, app] = spools_boot::pmi::PMIX_ABI_SIZES.map(|s| s as u64);
    // proc, value, info, app sizes; where the value's union and the info's value start; the
    // type tags (bool, string, size, int, uint, uint32, uint64), scope and wildcard rank
    // the code uses; the key length.
    let want = [
        8,
        520,
        1,
        3,
        4,
        6,
        11,
        14,
        15,
        3,
        u64::from(u32::MAX - 1),
        511,
    ];
    assert_eq!(got[..4], [proc_, value, info, app]);
    assert_eq!(got[4..], want);
}
