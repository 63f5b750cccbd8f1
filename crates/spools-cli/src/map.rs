//! `spools map SPEC --unit K [--json]`.

use std::io::Write;

use anyhow::{Context, Result};
use clap::Args;

use crate::out;

/// Arguments of `spools map`.
#[derive(Args, Debug)]
pub(crate) struct MapArgs {
    /// The layout spec (see SPECS below).
    spec: String,
    /// The unit whose extents to show.
    #[arg(long)]
    unit: u64,
    #[arg(
        long,
        help = "Print one JSON document: {\"unit\",\"units\",\"elem_size\",\"extents\":[[global,local,len],...]}, offsets and lengths in elements (bytes for byte-stream layouts)"
    )]
    json: bool,
}

pub(crate) fn run(args: &MapArgs) -> Result<()> {
    let layout = crate::spec::parse("layout", &args.spec)?;
    let e = layout.elem_size();
    let extents = layout
        .extents(args.unit)
        .with_context(|| format!("cannot map unit {} of {layout}", args.unit))?
        .map(|x| (x.global / e, x.local / e, x.len / e));
    let mut w = out::stdout();
    if args.json {
        write!(
            w,
            "{{\"unit\":{},\"units\":{},\"elem_size\":{e},\"extents\":[",
            args.unit,
            layout.units()
        )?;
        out::triples(&mut w, extents)?;
        writeln!(w, "]}}")?;
    } else {
        let what = if e == 1 { "bytes" } else { "elements" };
        let local = layout.local_bytes(args.unit)? / e;
        writeln!(w, "{layout}")?;
        writeln!(
            w,
            "unit {} of {}: {local} {what} of local storage ({e} bytes each)",
            args.unit,
            layout.units()
        )?;
        writeln!(w, "{:>16} {:>16} {:>16}", "global", "local", "len")?;
        let mut n = 0u64;
        for (g, l, len) in extents {
            writeln!(w, "{g:>16} {l:>16} {len:>16}")?;
            n += 1;
        }
        writeln!(w, "{n} extents, offsets and lengths in {what}")?;
    }
    w.flush()?;
    Ok(())
}
