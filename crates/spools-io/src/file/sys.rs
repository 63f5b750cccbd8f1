//! File system calls with errors that name the file.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::Path;

use crate::error::FileError;

/// Opens `path` for writing, creating it (and its directory) if needed; never truncates.
pub(crate) fn open_write(path: &Path) -> Result<File, FileError> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| FileError::io("create directory", dir, e))?;
    }
    OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map_err(|e| FileError::io("open for writing", path, e))
}

/// Opens `path` for reading.
pub(crate) fn open_read(path: &Path) -> Result<File, FileError> {
    File::open(path).map_err(|e| FileError::io("open", path, e))
}

/// Writes all of `data` at `offset`.
pub(crate) fn write_at(f: &File, path: &Path, data: &[u8], offset: u64) -> Result<(), FileError> {
    f.write_all_at(data, offset)
        .map_err(|e| FileError::io("write", path, e))
}

/// Reads `buf.len()` bytes at `offset`; a short file is [`FileError::SizeMismatch`]-like
/// `UnexpectedEof`.
pub(crate) fn read_at(f: &File, path: &Path, buf: &mut [u8], offset: u64) -> Result<(), FileError> {
    f.read_exact_at(buf, offset)
        .map_err(|e| FileError::io("read", path, e))
}

/// Reads up to `len` bytes at `offset`, fewer where the file ends.
pub(crate) fn read_upto(
    f: &File,
    path: &Path,
    len: usize,
    offset: u64,
) -> Result<Vec<u8>, FileError> {
    let mut buf = vec![0u8; len];
    let mut got = 0;
    while got < len {
        match f.read_at(&mut buf[got..], offset + got as u64) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(FileError::io("read", path, e)),
        }
    }
    buf.truncate(got);
    Ok(buf)
}

/// Makes `f`'s data durable.
pub(crate) fn sync(f: &File, path: &Path) -> Result<(), FileError> {
    f.sync_data().map_err(|e| FileError::io("sync", path, e))
}

/// Sets `path`'s length, creating it if needed.
pub(crate) fn set_len(path: &Path, len: u64) -> Result<File, FileError> {
    let f = open_write(path)?;
    let cur = f
        .metadata()
        .map_err(|e| FileError::io("stat", path, e))?
        .len();
    if cur != len {
        f.set_len(len)
            .map_err(|e| FileError::io("set length of", path, e))?;
    }
    Ok(f)
}

/// Replaces `path` with `data` atomically and durably: a temporary file in the same
/// directory, synced, renamed over `path`, and the directory synced.
pub(crate) fn replace(path: &Path, data: &[u8]) -> Result<(), FileError> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.tmp{}", std::process::id()));
    let f = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&tmp)
        .map_err(|e| FileError::io("create", &tmp, e))?;
    write_at(&f, &tmp, data, 0)?;
    f.sync_all().map_err(|e| FileError::io("sync", &tmp, e))?;
    std::fs::rename(&tmp, path).map_err(|e| FileError::io("rename over", path, e))?;
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| FileError::io("sync directory", dir, e))
}
