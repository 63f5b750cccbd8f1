//! The spec syntax: parsing (strict, with positioned errors) and printing (round trip).

use std::fmt;
use std::str::FromStr;

use crate::array::{ArrayLayout, Order};
use crate::bits::BitsLayout;
use crate::dist::Dist;
use crate::dtype::{DType, NAMED};
use crate::error::{LayoutError, SpecError};
use crate::layout::Layout;
use crate::size::{suffixes, ByteSize};
use crate::stripe::{Raid5Layout, StripeLayout};

struct Cursor<'a> {
    s: &'a str,
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn rest(&self) -> &'a str {
        &self.s[self.pos..]
    }

    fn found(&self) -> String {
        let rest = self.rest();
        if rest.is_empty() {
            return "end of input".into();
        }
        let shown: String = rest.chars().take(12).collect();
        let more = if shown.len() < rest.len() { "..." } else { "" };
        format!("'{shown}{more}'")
    }

    fn err<T>(&self, expected: impl Into<String>) -> Result<T, SpecError> {
        Err(SpecError::Syntax {
            pos: self.pos,
            expected: expected.into(),
            found: self.found(),
        })
    }

    fn eat(&mut self, lit: &str) -> bool {
        if self.rest().starts_with(lit) {
            self.pos += lit.len();
            true
        } else {
            false
        }
    }

    fn expect(&mut self, lit: &str) -> Result<(), SpecError> {
        if self.eat(lit) {
            Ok(())
        } else {
            self.err(format!("'{lit}'"))
        }
    }

    fn int(&mut self, what: &str) -> Result<u64, SpecError> {
        let digits = self.rest().bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return self.err(what);
        }
        match self.rest()[..digits].parse::<u64>() {
            Ok(v) => {
                self.pos += digits;
                Ok(v)
            }
            Err(_) => self.err(format!("{what} that fits in 64 bits")),
        }
    }

    fn size(&mut self, what: &str) -> Result<u64, SpecError> {
        let start = self.pos;
        let n = self.int(what)?;
        let mult = suffixes()
            .iter()
            .find(|(name, _)| self.eat(name))
            .map_or(1, |(_, m)| *m);
        n.checked_mul(mult).ok_or_else(|| SpecError::Syntax {
            pos: start,
            expected: format!("{what} below 2^64 bytes"),
            found: format!("'{}'", &self.s[start..self.pos]),
        })
    }

    /// `[a,b,...]` of bit indices, each with its position.
    fn int_list(&mut self, what: &str) -> Result<Vec<(u32, usize)>, SpecError> {
        self.expect("[")?;
        let mut out = Vec::new();
        if self.eat("]") {
            return Ok(out);
        }
        loop {
            let at = self.pos;
            let v = self.int(what)?;
            let bit = u32::try_from(v).map_err(|_| SpecError::Syntax {
                pos: at,
                expected: format!("{what} below 2^32"),
                found: v.to_string(),
            })?;
            out.push((bit, at));
            if self.eat("]") {
                return Ok(out);
            }
            if !self.eat(",") {
                return self.err("',' or ']'");
            }
        }
    }
}

fn invalid(pos: usize) -> impl Fn(LayoutError) -> SpecError {
    move |source| SpecError::Invalid { pos, source }
}

fn parse_dtype(c: &mut Cursor<'_>) -> Result<DType, SpecError> {
    if c.eat("bytes(") {
        let at = c.pos;
        let n = c.int("a record size in bytes")?;
        if n == 0 {
            return Err(invalid(at)(LayoutError::ZeroElement));
        }
        c.expect(")")?;
        return Ok(DType::Bytes(n));
    }
    let word_len = c
        .rest()
        .bytes()
        .take_while(u8::is_ascii_alphanumeric)
        .count();
    let word = &c.rest()[..word_len];
    match NAMED.iter().find(|(name, _)| *name == word) {
        Some((_, t)) => {
            c.pos += word_len;
            Ok(*t)
        }
        None => c.err("an element type (u8 i8 u16 i16 u32 i32 u64 i64 f32 f64 c64 c128 bytes(N)), or stripe(, raid5(, bits("),
    }
}

fn parse_dist(c: &mut Cursor<'_>) -> Result<Dist, SpecError> {
    let arg = |c: &mut Cursor<'_>| -> Result<Option<u64>, SpecError> {
        if c.eat("(") {
            let b = c.int("a block size")?;
            c.expect(")")?;
            Ok(Some(b))
        } else {
            Ok(None)
        }
    };
    if c.eat("block") {
        Ok(Dist::Block(arg(c)?))
    } else if c.eat("cyclic") {
        Ok(Dist::Cyclic(arg(c)?.unwrap_or(1)))
    } else if c.eat("*") {
        Ok(Dist::Whole)
    } else {
        c.err("a distribution: block, block(B), cyclic, cyclic(B) or *")
    }
}

fn parse_array(c: &mut Cursor<'_>) -> Result<Layout, SpecError> {
    let dtype = parse_dtype(c)?;
    c.expect("[")?;
    let mut shape = Vec::new();
    let mut shape_pos = Vec::new();
    loop {
        shape_pos.push(c.pos);
        shape.push(c.int("an extent")?);
        if c.eat("]") {
            break;
        }
        if !c.eat(",") {
            return c.err("',' or ']'");
        }
    }
    c.expect(" ")?;
    let mut dists = Vec::new();
    let mut dist_pos = Vec::new();
    loop {
        dist_pos.push(c.pos);
        dists.push(parse_dist(c)?);
        if !c.eat(",") {
            break;
        }
    }
    if dists.len() != shape.len() {
        if dists.len() > shape.len() {
            c.pos = dist_pos[shape.len()] - 1;
        }
        return c.err(format!("{} distributions, one per dimension", shape.len()));
    }
    let on_pos = c.pos;
    if !c.eat(" on ") {
        return c.err("',' or ' on '");
    }
    let mut grid = Vec::new();
    let mut grid_pos = Vec::new();
    loop {
        grid_pos.push(c.pos);
        grid.push(c.int("a grid extent")?);
        if !c.eat("x") {
            break;
        }
    }
    if grid.len() != shape.len() {
        if grid.len() > shape.len() {
            c.pos = grid_pos[shape.len()] - 1;
        }
        return c.err(format!(
            "{} grid extents, one per dimension, separated by 'x'",
            shape.len()
        ));
    }
    let order = if c.eat(" order=") {
        if c.eat("C") {
            Order::C
        } else if c.eat("F") {
            Order::F
        } else {
            return c.err("'C' or 'F'");
        }
    } else {
        Order::C
    };
    ArrayLayout::new(dtype, shape, dists, grid, order)
        .map(Layout::Array)
        .map_err(|e| {
            let pos = match &e {
                LayoutError::ZeroExtent { dim } => shape_pos[*dim],
                LayoutError::ZeroGrid { dim } => grid_pos[*dim],
                LayoutError::ZeroBlock { dim }
                | LayoutError::BlockTooSmall { dim, .. }
                | LayoutError::WholeOnGrid { dim, .. } => dist_pos[*dim],
                LayoutError::TooManyUnits { .. } => on_pos,
                _ => shape_pos[0] - 1,
            };
            invalid(pos)(e)
        })
}

/// The keys of a byte-stream spec, each with the position of its value.
struct StreamArgs {
    unit: (u64, usize),
    count: (u64, usize),
    size: Option<(u64, usize)>,
}

impl StreamArgs {
    /// Where the error `e` about these arguments should point.
    fn position_of(&self, e: &LayoutError) -> usize {
        match e {
            LayoutError::TooFewUnits { .. } | LayoutError::TooManyUnits { .. } => self.count.1,
            LayoutError::EmptyDataset => self.size.map_or(self.unit.1, |s| s.1),
            LayoutError::Overflow { what } if what.contains("dataset") => {
                self.size.map_or(self.unit.1, |s| s.1)
            }
            _ => self.unit.1,
        }
    }
}

/// `unit=SIZE,count=K[,size=SIZE]` in any order, then `)`.
fn parse_stream_args(c: &mut Cursor<'_>) -> Result<StreamArgs, SpecError> {
    let (mut unit, mut count, mut size) = (None, None, None);
    loop {
        let at = c.pos;
        let slot = if c.eat("unit=") {
            (&mut unit, "unit")
        } else if c.eat("count=") {
            (&mut count, "count")
        } else if c.eat("size=") {
            (&mut size, "size")
        } else {
            return c.err("unit=, count= or size=");
        };
        if slot.0.is_some() {
            c.pos = at;
            return c.err(format!("a key other than {}= (given twice)", slot.1));
        }
        let value_at = c.pos;
        let value = if slot.1 == "count" {
            c.int("a unit count")?
        } else {
            c.size("a size (INT with optional B, KiB, MiB, GiB, TiB)")?
        };
        *slot.0 = Some((value, value_at));
        if c.eat(")") {
            break;
        }
        if !c.eat(",") {
            return c.err("',' or ')'");
        }
    }
    c.pos -= 1;
    let args = match (unit, count) {
        (Some(unit), Some(count)) => StreamArgs { unit, count, size },
        (None, _) => return c.err("unit=SIZE before the closing ')'"),
        (_, None) => return c.err("count=K before the closing ')'"),
    };
    c.pos += 1;
    Ok(args)
}

fn parse_bits(c: &mut Cursor<'_>) -> Result<Layout, SpecError> {
    c.expect("n=")?;
    let n_at = c.pos;
    let n = c.int("a bit count")?;
    c.expect(",unit=")?;
    let unit_at = c.pos;
    let unit = c.int_list("a bit index")?;
    let mut local_at = None;
    let local = if c.eat(",local=") {
        local_at = Some(c.pos);
        Some(c.int_list("a bit index")?)
    } else {
        None
    };
    c.expect(")")?;
    let width = u32::try_from(n)
        .ok()
        .filter(|w| (1..=crate::bits::MAX_BITS).contains(w))
        .ok_or_else(|| {
            invalid(n_at)(LayoutError::BitsWidth {
                n,
                max: crate::bits::MAX_BITS,
            })
        })?;
    let values = |l: &[(u32, usize)]| l.iter().map(|&(b, _)| b).collect::<Vec<_>>();
    BitsLayout::new(width, values(&unit), local.as_deref().map(values))
        .map(Layout::Bits)
        .map_err(|e| {
            // Point at the bit at fault: the last occurrence of a repeated bit, else the first.
            let all: Vec<(u32, usize)> =
                unit.iter().chain(local.iter().flatten()).copied().collect();
            let pos = match &e {
                LayoutError::BadBit { bit, problem, .. } => {
                    let mut hits = all.iter().filter(|&&(b, _)| b == *bit).map(|&(_, p)| p);
                    if *problem == "listed twice" {
                        hits.next_back()
                    } else {
                        hits.next()
                    }
                    .unwrap_or(unit_at)
                }
                LayoutError::LocalBits { .. } => local_at.unwrap_or(unit_at),
                _ => unit_at,
            };
            invalid(pos)(e)
        })
}

fn parse(s: &str) -> Result<Layout, SpecError> {
    let mut c = Cursor { s, pos: 0 };
    let layout = if c.eat("stripe(") {
        let a = parse_stream_args(&mut c)?;
        let made = StripeLayout::new(a.unit.0, a.count.0, a.size.map(|s| s.0));
        Layout::Stripe(made.map_err(|e| invalid(a.position_of(&e))(e))?)
    } else if c.eat("raid5(") {
        let a = parse_stream_args(&mut c)?;
        let made = Raid5Layout::new(a.unit.0, a.count.0, a.size.map(|s| s.0));
        Layout::Raid5(made.map_err(|e| invalid(a.position_of(&e))(e))?)
    } else if c.eat("bits(") {
        parse_bits(&mut c)?
    } else {
        parse_array(&mut c)?
    };
    if !c.rest().is_empty() {
        let expected = match layout {
            Layout::Array(_) => "end of spec (or ' order=C|F')",
            _ => "end of spec",
        };
        return c.err(expected);
    }
    Ok(layout)
}

impl FromStr for Layout {
    type Err = SpecError;

    /// Parses a spec; see the crate documentation for the grammar.
    fn from_str(s: &str) -> Result<Layout, SpecError> {
        parse(s)
    }
}

fn join<T: fmt::Display>(f: &mut fmt::Formatter<'_>, items: &[T], sep: &str) -> fmt::Result {
    for (i, x) in items.iter().enumerate() {
        if i > 0 {
            f.write_str(sep)?;
        }
        write!(f, "{x}")?;
    }
    Ok(())
}

impl fmt::Display for Layout {
    /// Prints the spec that parses back to this layout (irregular layouts, which have no
    /// spec syntax, print a description).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Layout::Array(a) => {
                write!(f, "{}[", a.dtype())?;
                join(f, a.shape(), ",")?;
                f.write_str("] ")?;
                join(f, a.dists(), ",")?;
                f.write_str(" on ")?;
                join(f, a.grid(), "x")?;
                if a.order() == Order::F {
                    f.write_str(" order=F")?;
                }
                Ok(())
            }
            Layout::Stripe(s) => stream(f, "stripe", s.unit(), s.count(), s.size()),
            Layout::Raid5(r) => stream(f, "raid5", r.unit(), r.count(), r.size()),
            Layout::Bits(b) => {
                write!(f, "bits(n={},unit=[", b.n())?;
                join(f, b.unit_bits(), ",")?;
                f.write_str("]")?;
                if b.explicit_local() {
                    f.write_str(",local=[")?;
                    join(f, b.local_bits(), ",")?;
                    f.write_str("]")?;
                }
                f.write_str(")")
            }
            Layout::Irregular(x) => write!(
                f,
                "irregular(units={},elems={},elem={}B)",
                x.units(),
                x.total_bytes() / x.elem_size(),
                x.elem_size()
            ),
        }
    }
}

fn stream(
    f: &mut fmt::Formatter<'_>,
    kind: &str,
    unit: u64,
    count: u64,
    size: Option<u64>,
) -> fmt::Result {
    write!(f, "{kind}(unit={},count={count}", ByteSize(unit))?;
    if let Some(s) = size {
        write!(f, ",size={}", ByteSize(s))?;
    }
    f.write_str(")")
}
