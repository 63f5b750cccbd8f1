//! Signal files ([`signal_file`]) written by many threads at once: each lands whole, under
//! its own name, with no temporary file left beside it.

use spools_testkit::{signal_file, tempdir};

/// Many writers at once, of files whose names differ only past a dot: every file ends
/// whole, with its own contents, and no temporary file is left.
#[test]
fn concurrent_signal_files_do_not_share_a_temporary_file() {
    let dir = tempdir("signal");
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let d = dir.path().to_path_buf();
            std::thread::spawn(move || {
                (0..100).try_for_each(|k| {
                    let body = format!("{t} {k}");
                    signal_file(&d.join(format!("pid.{t}")), body.as_bytes())
                })
            })
        })
        .collect();
    for t in threads {
        assert_eq!(t.join().ok(), Some(Ok(())));
    }
    let mut names: Vec<String> = std::fs::read_dir(dir.path())
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    let want: Vec<String> = (0..8).map(|t| format!("pid.{t}")).collect();
    assert_eq!(names, want);
    for t in 0..8 {
        let got = std::fs::read_to_string(dir.path().join(format!("pid.{t}"))).ok();
        assert_eq!(got, Some(format!("{t} 99")));
    }
}
