//! [`Tmpfs`]: a small file system of its own for a test (a full disk on demand), mounted
//! as root and unmounted when dropped, with every command bounded in time.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use crate::job::grouped;
use crate::wait::wait_bounded;

/// How long `mount` and `umount` may take.
const LIMIT: Duration = Duration::from_secs(120);

/// A tmpfs mounted for one test, unmounted (lazily, so a busy file cannot keep it) when
/// dropped.
#[derive(Debug)]
pub struct Tmpfs(PathBuf);

impl Tmpfs {
    /// Mounts a tmpfs of `size` (`mount`'s syntax: `256k`, `1m`) at `at`, made if missing.
    ///
    /// # Errors
    /// `mount`'s complaint when it fails (not root, no tmpfs).
    pub fn mount(at: &Path, size: &str) -> Result<Tmpfs, String> {
        std::fs::create_dir_all(at).map_err(|e| e.to_string())?;
        let mut c = grouped("mount");
        c.args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(at)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let o = wait_bounded(c.spawn().map_err(|e| e.to_string())?, LIMIT);
        if o.status.success() {
            Ok(Tmpfs(at.to_path_buf()))
        } else {
            Err(o.stderr)
        }
    }

    /// Where it is mounted.
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let mut c = grouped("umount");
        c.arg("-l")
            .arg(&self.0)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if let Ok(child) = c.spawn() {
            wait_bounded(child, LIMIT);
        }
    }
}

/// What is in `dir` (recursively), as sorted relative paths.
pub fn listing(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                todo.push(p.clone());
            }
            if let Ok(rel) = p.strip_prefix(dir) {
                out.push(rel.display().to_string());
            }
        }
    }
    out.sort();
    out
}
