//! `spools cat`, `ls`, `fsck`, `repair`: single-process tools for parallel files.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Result};
use clap::Args;
use spools_io::file::tools;

/// A parallel file (canonical, `.npy`, a striped file's manifest, a Zarr array or an HDF5
/// file).
#[derive(Args, Debug)]
pub(crate) struct FileArg {
    /// The file; FILE:/NAME names the dataset NAME of an HDF5 file (e.g.
    /// field.h5:/group/sub/temperature), needed when it holds several.
    file: PathBuf,
}

/// A progress bar with rate on stderr when it is a terminal; silent otherwise.
struct Progress {
    on: bool,
    start: Instant,
    last: Option<Instant>,
    what: &'static str,
}

impl Progress {
    fn new(what: &'static str) -> Self {
        Progress {
            on: std::io::stderr().is_terminal(),
            start: Instant::now(),
            last: None,
            what,
        }
    }

    fn update(&mut self, done: u64, total: u64) {
        if !self.on
            || self
                .last
                .is_some_and(|t| t.elapsed().as_millis() < 100 && done < total)
        {
            return;
        }
        self.last = Some(Instant::now());
        let frac = if total == 0 {
            1.0
        } else {
            done as f64 / total as f64
        };
        let width = 30;
        let fill = (frac * width as f64) as usize;
        let rate = done as f64 / self.start.elapsed().as_secs_f64().max(1e-9) / 1e6;
        eprint!(
            "\r{} [{}{}] {:5.1}% {:8.1} MB/s",
            self.what,
            "#".repeat(fill),
            "-".repeat(width - fill),
            frac * 100.0,
            rate
        );
        if done >= total {
            eprintln!();
        }
    }
}

pub(crate) fn cat(a: &FileArg) -> Result<()> {
    let mut p = Progress::new("cat");
    // The bar would garble a terminal that also shows the data.
    p.on &= !std::io::stdout().is_terminal();
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::with_capacity(1 << 20, stdout.lock());
    let rebuilt = tools::cat(&a.file, &mut out, &mut |d, t| p.update(d, t))?;
    match out.flush() {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => return Err(e.into()),
        _ => {}
    }
    if rebuilt > 0 {
        eprintln!(
            "spools cat: rebuilt {rebuilt} damaged block(s) from parity; run `spools repair`"
        );
    }
    Ok(())
}

pub(crate) fn ls(a: &FileArg) -> Result<()> {
    println!("{}", tools::describe(&a.file)?);
    Ok(())
}

pub(crate) fn fsck(a: &FileArg) -> Result<()> {
    let mut p = Progress::new("fsck");
    let rep = tools::fsck(&a.file, &mut |d, t| p.update(d, t))?;
    // Consecutive blocks of one unit with the same problem are reported as one range.
    let mut i = 0;
    while i < rep.bad.len() {
        let b = &rep.bad[i];
        let mut j = i + 1;
        while j < rep.bad.len() && rep.bad[j].unit == b.unit && rep.bad[j].problem == b.problem {
            j += 1;
        }
        let last = &rep.bad[j - 1];
        if j - i == 1 {
            println!(
                "unit {} ({}): block at offset {}: {}",
                b.unit,
                b.path.display(),
                b.offset,
                b.problem
            );
        } else {
            println!(
                "unit {} ({}): {} blocks at offsets {}..={}: {}",
                b.unit,
                b.path.display(),
                j - i,
                b.offset,
                last.offset,
                b.problem
            );
        }
        i = j;
    }
    for r in &rep.parity_mismatch {
        println!("stripe row {r}: parity does not match the data");
    }
    for w in &rep.wrong_size {
        println!("unit {} ({}): {}", w.unit, w.path.display(), w.problem);
    }
    for c in &rep.chunks {
        println!(
            "shard {}: chunk {:?}: {}",
            c.key.display(),
            c.chunk,
            c.problem
        );
    }
    let unlisted = rep.chunks_damaged.saturating_sub(rep.chunks.len() as u64);
    if unlisted > 0 {
        println!("... and {unlisted} more damaged or lost chunk(s), not listed");
    }
    let zarr = a.file.join("zarr.json").is_file();
    if zarr && rep.chunks_damaged == 0 {
        println!(
            "{}: {} chunks, every shard index and chunk checksum good",
            a.file.display(),
            rep.blocks
        );
        return Ok(());
    }
    if zarr {
        bail!(
            "{}: {} damaged or lost chunk(s) of {}",
            a.file.display(),
            rep.chunks_damaged,
            rep.blocks
        );
    }
    if rep.bad.is_empty() && rep.parity_mismatch.is_empty() && rep.wrong_size.is_empty() {
        println!(
            "{}: {} blocks, all checksums and parity good",
            a.file.display(),
            rep.blocks
        );
        Ok(())
    } else {
        bail!(
            "{}: {} damaged block(s), {} parity mismatch(es) in {} blocks, {} unit file(s) not as recorded",
            a.file.display(),
            rep.bad.len(),
            rep.parity_mismatch.len(),
            rep.blocks,
            rep.wrong_size.len()
        )
    }
}

pub(crate) fn repair(a: &FileArg) -> Result<()> {
    let mut p = Progress::new("repair");
    let rep = tools::repair(&a.file, &mut |d, t| p.update(d, t))?;
    for (u, off) in &rep.blocks {
        println!("rebuilt unit {u} block at offset {off}");
    }
    for (u, len) in &rep.truncated {
        println!("cut unit {u} back to its recorded length (it held {len} bytes)");
    }
    println!(
        "{}: {} block(s) rebuilt{}",
        a.file.display(),
        rep.blocks.len(),
        if rep.truncated.is_empty() {
            String::new()
        } else {
            format!(", {} unit file(s) cut back", rep.truncated.len())
        }
    );
    Ok(())
}
