//! An independent, element-by-element model of every layout, written straight from the
//! definitions (MPI darray, RAID-0, md left-symmetric RAID-5, nCUBE bit maps) and sharing
//! no code with the crate. Tests compare the crate's symbolic answers against it.

#![allow(
    dead_code,
    unreachable_pub,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]

use proptest::prelude::*;

/// Property-test cases: `default`, or `SPOOLS_PROPTEST_CASES` for a longer soak.
pub fn cases(default: u32) -> u32 {
    std::env::var("SPOOLS_PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Per-dimension distribution in the model.
#[derive(Clone, Debug)]
pub enum RDist {
    Block(Option<u64>),
    Cyclic(u64),
    Whole,
}

/// A layout in the model, able to print its own spec.
#[derive(Clone, Debug)]
pub enum Model {
    Array {
        elem: u64,
        shape: Vec<u64>,
        dists: Vec<RDist>,
        grid: Vec<u64>,
        fortran: bool,
    },
    Stripe {
        unit: u64,
        count: u64,
        size: u64,
    },
    Raid5 {
        unit: u64,
        count: u64,
        size: u64,
    },
    Bits {
        n: u32,
        unit: Vec<u32>,
        local: Option<Vec<u32>>,
    },
}

fn dtype_name(elem: u64) -> String {
    match elem {
        1 => "u8".into(),
        2 => "i16".into(),
        4 => "f32".into(),
        8 => "f64".into(),
        16 => "c128".into(),
        n => format!("bytes({n})"),
    }
}

impl Model {
    pub fn spec(&self) -> String {
        match self {
            Model::Array {
                elem,
                shape,
                dists,
                grid,
                fortran,
            } => {
                let sh: Vec<String> = shape.iter().map(u64::to_string).collect();
                let ds: Vec<String> = dists
                    .iter()
                    .map(|d| match d {
                        RDist::Block(None) => "block".to_string(),
                        RDist::Block(Some(b)) => format!("block({b})"),
                        RDist::Cyclic(b) => format!("cyclic({b})"),
                        RDist::Whole => "*".to_string(),
                    })
                    .collect();
                let gr: Vec<String> = grid.iter().map(u64::to_string).collect();
                let order = if *fortran { " order=F" } else { "" };
                format!(
                    "{}[{}] {} on {}{}",
                    dtype_name(*elem),
                    sh.join(","),
                    ds.join(","),
                    gr.join("x"),
                    order
                )
            }
            Model::Stripe { unit, count, size } => {
                format!("stripe(unit={unit}B,count={count},size={size})")
            }
            Model::Raid5 { unit, count, size } => {
                format!("raid5(size={size},count={count},unit={unit})")
            }
            Model::Bits { n, unit, local } => {
                let u: Vec<String> = unit.iter().map(u32::to_string).collect();
                let mut s = format!("bits(n={n},unit=[{}]", u.join(","));
                if let Some(l) = local {
                    let l: Vec<String> = l.iter().map(u32::to_string).collect();
                    s += &format!(",local=[{}]", l.join(","));
                }
                s + ")"
            }
        }
    }

    pub fn units(&self) -> u64 {
        match self {
            Model::Array { grid, .. } => grid.iter().product(),
            Model::Stripe { count, .. } | Model::Raid5 { count, .. } => *count,
            Model::Bits { unit, .. } => 1 << unit.len(),
        }
    }

    pub fn total(&self) -> u64 {
        match self {
            Model::Array { elem, shape, .. } => elem * shape.iter().product::<u64>(),
            Model::Stripe { size, .. } | Model::Raid5 { size, .. } => *size,
            Model::Bits { n, .. } => 1 << n,
        }
    }

    /// For every global byte, `(unit, local byte)`.
    pub fn map(&self) -> Vec<(u64, u64)> {
        (0..self.total()).map(|g| self.place(g)).collect()
    }

    /// `(unit, local byte)` of global byte `g`, from the definitions.
    pub fn place(&self, g: u64) -> (u64, u64) {
        match self {
            Model::Array {
                elem,
                shape,
                dists,
                grid,
                fortran,
            } => {
                let d = shape.len();
                // global multi-index from the canonical order
                let mut idx = vec![0u64; d];
                let mut rest = g / elem;
                let fast_to_slow: Vec<usize> = if *fortran {
                    (0..d).collect()
                } else {
                    (0..d).rev().collect()
                };
                for &k in &fast_to_slow {
                    idx[k] = rest % shape[k];
                    rest /= shape[k];
                }
                let mut coord = vec![0u64; d];
                let mut lidx = vec![0u64; d];
                let mut lshape = vec![0u64; d];
                for k in 0..d {
                    let (n, p) = (shape[k], grid[k]);
                    let b = match dists[k] {
                        RDist::Block(None) => n.div_ceil(p),
                        RDist::Block(Some(b)) => b,
                        RDist::Cyclic(b) => b,
                        RDist::Whole => n,
                    };
                    coord[k] = (idx[k] / b) % p;
                    // count, by enumeration, the indices of this coordinate before idx[k]
                    lidx[k] = (0..idx[k]).filter(|&i| (i / b) % p == coord[k]).count() as u64;
                    lshape[k] = (0..n).filter(|&i| (i / b) % p == coord[k]).count() as u64;
                }
                let mut unit = 0;
                for k in 0..d {
                    unit = unit * grid[k] + coord[k];
                }
                let mut local = 0;
                let mut stride = 1;
                for &k in &fast_to_slow {
                    local += lidx[k] * stride;
                    stride *= lshape[k];
                }
                (unit, local * elem + g % elem)
            }
            Model::Stripe { unit, count, .. } => {
                let b = g / unit;
                (b % count, (b / count) * unit + g % unit)
            }
            Model::Raid5 { unit, count, .. } => {
                let k = *count;
                let b = g / unit;
                let row = b / (k - 1);
                let i = b % (k - 1);
                let parity = k - 1 - row % k;
                ((parity + 1 + i) % k, row * unit + g % unit)
            }
            Model::Bits { n, unit, local } => {
                let bit = |b: u32| (g >> b) & 1;
                let u = unit.iter().fold(0, |acc, &b| acc << 1 | bit(b));
                let default: Vec<u32> = (0..*n).rev().filter(|b| !unit.contains(b)).collect();
                let lbits = local.as_ref().unwrap_or(&default);
                let l = lbits.iter().fold(0, |acc, &b| acc << 1 | bit(b));
                (u, l)
            }
        }
    }
}

/// Any valid distribution of `n` indices over `p` grid coordinates.
pub fn dist_for(n: u64, p: u64) -> BoxedStrategy<RDist> {
    let min_block = n.div_ceil(p);
    let mut options = vec![
        Just(RDist::Block(None)).boxed(),
        (min_block..=n + 2)
            .prop_map(|b| RDist::Block(Some(b)))
            .boxed(),
        (1..=n + 1).prop_map(RDist::Cyclic).boxed(),
    ];
    if p == 1 {
        options.push(Just(RDist::Whole).boxed());
    }
    prop::strategy::Union::new(options).boxed()
}

/// Random arrays of 1 to 3 dimensions, extents 1-13, grids 1-4 per dimension.
pub fn array_model(elems: Vec<u64>) -> impl Strategy<Value = Model> {
    (
        prop::sample::select(elems),
        prop::collection::vec((1u64..=13, 1u64..=4), 1..=3),
        any::<bool>(),
    )
        .prop_flat_map(|(elem, dims, fortran)| {
            let dists: Vec<_> = dims.iter().map(|&(n, p)| dist_for(n, p)).collect();
            let shape: Vec<u64> = dims.iter().map(|d| d.0).collect();
            let grid: Vec<u64> = dims.iter().map(|d| d.1).collect();
            (dists, Just(shape), Just(grid), Just(elem), Just(fortran))
        })
        .prop_map(|(dists, shape, grid, elem, fortran)| Model::Array {
            elem,
            shape,
            dists,
            grid,
            fortran,
        })
}

/// Random byte-stream layouts of exactly `size` bytes.
pub fn stream_model(size: u64) -> impl Strategy<Value = Model> {
    prop_oneof![
        (1u64..=40, 1u64..=5).prop_map(move |(unit, count)| Model::Stripe { unit, count, size }),
        (1u64..=40, 2u64..=5).prop_map(move |(unit, count)| Model::Raid5 { unit, count, size }),
    ]
}

/// Random bit layouts of 2^n bytes.
pub fn bits_model(n: u32) -> impl Strategy<Value = Model> {
    (
        0..=n.min(3),
        Just(()).prop_perturb(move |_, mut rng| {
            let mut bits: Vec<u32> = (0..n).collect();
            for i in (1..bits.len()).rev() {
                let j = (rng.next_u32() as usize) % (i + 1);
                bits.swap(i, j);
            }
            (bits, rng.next_u32() % 2 == 0)
        }),
    )
        .prop_map(move |(k, (bits, explicit))| {
            let unit = bits[..k as usize].to_vec();
            let rest = bits[k as usize..].to_vec();
            Model::Bits {
                n,
                unit,
                local: explicit.then_some(rest),
            }
        })
}

/// For each global byte of `src` (in its canonical order), the same byte's index in
/// `dst`'s canonical order: arrays of one shape and element size correspond element by
/// element (by logical index, whatever their orders); anything else byte by byte.
pub fn correspondence(src: &Model, dst: &Model) -> Vec<u64> {
    let total = src.total();
    match (src, dst) {
        (
            Model::Array {
                elem,
                shape,
                fortran: fa,
                ..
            },
            Model::Array {
                elem: eb,
                shape: sb,
                fortran: fb,
                ..
            },
        ) if shape == sb && elem == eb && fa != fb => (0..total)
            .map(|g| {
                let d = shape.len();
                let (order_a, order_b): (Vec<usize>, Vec<usize>) = if *fa {
                    ((0..d).collect(), (0..d).rev().collect())
                } else {
                    ((0..d).rev().collect(), (0..d).collect())
                };
                let mut idx = vec![0; d];
                let mut rest = g / elem;
                for &k in &order_a {
                    idx[k] = rest % shape[k];
                    rest /= shape[k];
                }
                let mut h = 0;
                for &k in order_b.iter().rev() {
                    h = h * shape[k] + idx[k];
                }
                h * elem + g % elem
            })
            .collect(),
        _ => (0..total).collect(),
    }
}

/// Byte buffers of a layout's units, filled from the global byte stream `data`.
pub fn scatter(model: &Model, data: &[u8]) -> Vec<Vec<u8>> {
    let map = model.map();
    let mut bufs: Vec<Vec<u8>> = vec![Vec::new(); model.units() as usize];
    for (g, &(u, l)) in map.iter().enumerate() {
        let b = &mut bufs[u as usize];
        if b.len() <= l as usize {
            b.resize(l as usize + 1, 0);
        }
        b[l as usize] = data[g];
    }
    bufs
}
