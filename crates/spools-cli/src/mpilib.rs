//! Spools' `libmpi_abi.so.1` (the MPI standard ABI, crates/spools-mpi) for the ranks of
//! `spools run`: found beside the `spools` executable (a build's target/<profile>/, where
//! `make -C crates/spools-mpi` puts it) or in `../lib` (an installation), or named by
//! `SPOOLS_MPI_LIB` (a directory), and put first on the ranks' `LD_LIBRARY_PATH`, so
//! that a program built by any `mpicc_abi` runs on Spools with nothing else set.
//!
//! A Python interpreter that finds the `spools` package gets the package's extension
//! instead, which carries the same library: then mpi4py (built against the standard ABI)
//! and `spools` in one program are one runtime, whichever is imported first (a link named
//! `libmpi_abi.so.1` to the extension, in a directory of the user's own
//! (`$XDG_RUNTIME_DIR/spools/` or `~/.cache/spools/`), goes first on the path).

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

/// The library's file name: the standard ABI's soname.
const SONAME: &str = "libmpi_abi.so.1";

/// The directory holding Spools' `libmpi_abi.so.1`, if there is one.
pub(crate) fn dir() -> Option<PathBuf> {
    let mut candidates = Vec::new();
    if let Some(d) = std::env::var_os("SPOOLS_MPI_LIB") {
        candidates.push(PathBuf::from(d));
    }
    if let Some(bin) = std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(PathBuf::from))
    {
        candidates.push(bin.join("../lib"));
        candidates.push(bin);
    }
    candidates
        .into_iter()
        .find(|d| d.join(SONAME).is_file())
        .and_then(|d| d.canonicalize().ok())
}

/// Prints the `spools` package's extensions the interpreter's own import would load: its
/// suffixes in the import system's order (`EXTENSION_SUFFIXES`: this interpreter's ABI
/// tag first, then abi3, then plain `.so`), never another interpreter's build that sorts
/// first.
const FIND: &str = "import importlib.util as u, importlib.machinery as m, os\n\
        s = u.find_spec('spools')\n\
        for d in (s.submodule_search_locations or []) if s else []:\n\
        \x20   for x in m.EXTENSION_SUFFIXES:\n\
        \x20       f = os.path.join(d, '_spools' + x)\n\
        \x20       if os.path.isfile(f):\n\
        \x20           print(f)\n";

/// The `spools` package's extension as the Python interpreter `program` finds it (any
/// installation: a virtual environment, editable, user site, `PYTHONPATH`): the
/// interpreter is asked, without importing the package.
fn python_extension(program: &OsStr) -> Option<PathBuf> {
    let name = Path::new(program).file_name()?.to_str()?;
    if !name.starts_with("python") {
        return None;
    }

    let mut child = std::process::Command::new(program)
        .args(["-c", FIND])
        .env_remove("PYTHONSTARTUP")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .ok()?;
    // A bounded wait: a program named python* that is no interpreter must not hold the
    // launch (it is then started as any other program).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
        }
    }
    let mut text = String::new();
    std::io::Read::read_to_string(&mut child.stdout.take()?, &mut text).ok()?;
    let first = text.lines().next()?;
    Path::new(first).canonicalize().ok()
}

/// A directory of this user's holding `libmpi_abi.so.1`, a link to `ext`
/// (`$XDG_RUNTIME_DIR/spools/` or `~/.cache/spools/`).
fn link_dir(ext: &Path) -> Option<PathBuf> {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    ext.hash(&mut h);
    // A directory of this user's own (not a shared temporary one, where another user
    // could make it first and put a library of theirs in the ranks).
    let base = std::env::var_os("XDG_RUNTIME_DIR")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    let d = base.join(format!("spools/mpi-{:016x}", h.finish()));
    let link = d.join(SONAME);
    if std::fs::read_link(&link).ok().as_deref() == Some(ext) {
        return Some(d);
    }
    std::fs::create_dir_all(&d).ok()?;
    // Made under another name and renamed over: ranks of other jobs never see it half made.
    let tmp = d.join(format!(".{SONAME}.{}", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    std::os::unix::fs::symlink(ext, &tmp).ok()?;
    std::fs::rename(&tmp, &link).ok()?;
    Some(d)
}

/// Puts the library's directory first on `LD_LIBRARY_PATH` (inherited by the ranks this
/// process starts), when the library is found; for a Python interpreter with the
/// `spools` package, the package's extension (see the module's documentation).
pub(crate) fn put_first(program: Option<&OsStr>) {
    let python = program
        .and_then(python_extension)
        .and_then(|ext| link_dir(&ext));
    // The link's directory is on this host only: ranks on other hosts (`--hosts`) find
    // the library's own directory next.
    let mut paths: Vec<PathBuf> = python.into_iter().chain(dir()).collect();
    if paths.is_empty() {
        return;
    }
    if let Some(old) = std::env::var_os("LD_LIBRARY_PATH") {
        paths.extend(std::env::split_paths(&old));
    }
    if let Ok(joined) = std::env::join_paths(paths) {
        std::env::set_var("LD_LIBRARY_PATH", joined);
    }
}

/// What `spools info` says about it.
pub(crate) fn describe() -> String {
    match dir() {
        Some(d) => format!("{}", d.join(SONAME).display()),
        None => "not found (make -C crates/spools-mpi, or SPOOLS_MPI_LIB=DIR)".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::FIND;

    #[test]
    fn the_extension_found_is_the_one_the_interpreter_would_import() {
        let Ok(out) = std::process::Command::new("python3")
            .args([
                "-c",
                "import importlib.machinery as m; print(m.EXTENSION_SUFFIXES[-1])",
            ])
            .output()
        else {
            eprintln!("skipped: no python3");
            return;
        };
        let plain = String::from_utf8_lossy(&out.stdout).trim().to_string();
        let dir = std::env::temp_dir().join(format!("spools-ext-{}", std::process::id()));
        let pkg = dir.join("spools");
        std::fs::create_dir_all(&pkg).unwrap();
        std::fs::write(pkg.join("__init__.py"), "").unwrap();
        // Another interpreter's build, which sorts before the plain one.
        std::fs::write(pkg.join("_spools.aaa-other-abi.so"), "").unwrap();
        std::fs::write(pkg.join(format!("_spools{plain}")), "").unwrap();
        let found = std::process::Command::new("python3")
            .args(["-c", FIND])
            .env("PYTHONPATH", &dir)
            .output()
            .unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        let first = String::from_utf8_lossy(&found.stdout);
        let first = first.lines().next().unwrap_or_default();
        assert!(first.ends_with(&format!("_spools{plain}")), "{first:?}");
    }
}
