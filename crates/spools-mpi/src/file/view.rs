//! A file view (`MPI_File_set_view`): a displacement, an elementary type and a filetype
//! tiled from the displacement on. The view maps the positions of the data a rank sees
//! (bytes of its data stream) to the byte runs of the file they occupy: the nCUBE
//! paper's mapping function of one rank, M(rank, position) = file offset. Pure: no I/O.

use std::sync::Arc;

use crate::abi::*;
use crate::datatype::TypeObj;
use crate::env::error::MpiError;

/// A byte run of the file: (offset, length).
pub(crate) type FileRun = (u64, usize);

/// The runs of one access ([`View::runs`]): on the stack for up to two (a contiguous
/// view's access is one run), so the common access allocates none.
pub(crate) type Runs = smallvec::SmallVec<[FileRun; 2]>;

/// One rank's view of a file.
#[derive(Clone)]
pub(crate) struct View {
    /// Byte offset in the file where the view starts.
    pub(crate) disp: u64,
    pub(crate) etype: Arc<TypeObj>,
    pub(crate) etype_h: MPI_Datatype,
    pub(crate) filetype: Arc<TypeObj>,
    pub(crate) filetype_h: MPI_Datatype,
    /// The data representation: `native` (or `internal`, the same here), or
    /// `external32` (data converted at each access: `crate::datatype::external::convert_packed`).
    pub(crate) datarep: String,
}

/// Why copies of `filetype` laid one extent apart cannot tile a file (`None`: they can).
fn tiling_defect(filetype: &TypeObj) -> Option<&'static str> {
    let mut end = 0isize;
    for &(off, len) in &filetype.blocks {
        if off < end {
            return Some("the filetype's displacements are negative or not in increasing order");
        }
        end = off + len as isize;
    }
    // Copy k holds its data at [k extent + first, k extent + end): the copies keep apart
    // and in order while the data span no more than an extent (a filetype whose data
    // start past 0, a lower bound above 0, is fine).
    let first = filetype.blocks.first().map_or(0, |b| b.0);
    (end - first > filetype.extent)
        .then_some("the filetype's data reach past its extent (its copies would overlap)")
}

impl View {
    /// The view of a newly opened file: the whole file as bytes.
    pub(crate) fn bytes() -> Result<View, MpiError> {
        let b = crate::datatype::dtype(MPI_BYTE)?;
        Ok(View {
            disp: 0,
            etype: b.clone(),
            etype_h: MPI_BYTE,
            filetype: b,
            filetype_h: MPI_BYTE,
            datarep: "native".to_string(),
        })
    }

    /// A view of `filetype` tiled from `disp`, in elements of `etype`.
    ///
    /// # Errors
    /// `MPI_ERR_TYPE` when the filetype is not made of whole etypes, has bytes before
    /// its start or out of order (MPI requires monotonically nondecreasing,
    /// non-negative displacements), or is empty.
    pub(crate) fn new(
        disp: u64,
        (etype_h, etype): (MPI_Datatype, Arc<TypeObj>),
        (filetype_h, filetype): (MPI_Datatype, Arc<TypeObj>),
        datarep: String,
        call: &'static str,
    ) -> Result<View, MpiError> {
        let bad = |what: &str| MpiError::invalid(MPI_ERR_TYPE, format!("{call}: {what}"));
        if etype.size == 0 {
            return Err(bad("the etype has no data"));
        }
        if filetype.size == 0 || filetype.extent <= 0 {
            return Err(bad("the filetype has no data or no extent"));
        }
        if filetype.size % etype.size != 0 {
            return Err(bad("the filetype is not made of whole etypes"));
        }
        // A walk over every block, once per type (its identity: the type's own cache).
        if let Some(why) = filetype.tiling.get_or_init(|| tiling_defect(&filetype)) {
            return Err(bad(why));
        }
        Ok(View {
            disp,
            etype,
            etype_h,
            filetype,
            filetype_h,
            datarep,
        })
    }

    /// Whether the file holds its data in `external32`.
    pub(crate) fn external32(&self) -> bool {
        self.datarep == "external32"
    }

    /// Whether the view is the file's bytes from `disp` on, in order.
    fn contiguous(&self) -> bool {
        self.filetype.contiguous()
    }

    /// The file runs holding `n` bytes of data from data position `d`, merged where
    /// they touch.
    pub(crate) fn runs(&self, d: u64, n: u64) -> Runs {
        if n == 0 {
            return Runs::new();
        }
        if self.contiguous() {
            return smallvec::smallvec![(self.disp + d, n as usize)];
        }
        let fs = self.filetype.size as u64;
        let ext = self.filetype.extent as u64;
        let (mut k, mut r) = (d / fs, d % fs);
        let mut left = n;
        let mut out = Runs::new();
        while left > 0 {
            for &(off, len) in &self.filetype.blocks {
                let len = len as u64;
                if r >= len {
                    r -= len;
                    continue;
                }
                let take = (len - r).min(left);
                let at = self.disp + k * ext + off as u64 + r;
                match out.last_mut() {
                    Some(last) if last.0 + last.1 as u64 == at => last.1 += take as usize,
                    _ => out.push((at, take as usize)),
                }
                left -= take;
                r = 0;
                if left == 0 {
                    break;
                }
            }
            k += 1;
        }
        out
    }

    /// Bytes of the view's data that lie before file offset `end` (the data position
    /// of the end of a file of `end` bytes).
    pub(crate) fn data_before(&self, end: u64) -> u64 {
        if end <= self.disp {
            return 0;
        }
        let rel = end - self.disp;
        if self.contiguous() {
            return rel;
        }
        // Copy j holds its data at j extent + each block's offset (offsets are
        // non-negative and increasing, `View::new`); its data may reach past the next
        // copy's start when they start past 0.
        let ext = self.filetype.extent as u64;
        let blocks = &self.filetype.blocks;
        let first = blocks.first().map_or(0, |b| b.0 as u64);
        let last = blocks.last().map_or(0, |b| b.0 as u64 + b.1 as u64);
        // Copies that end at or before `rel` count whole.
        let whole = if rel >= last {
            (rel - last) / ext + 1
        } else {
            0
        };
        let mut total = whole * self.filetype.size as u64;
        let mut j = whole;
        while j * ext + first < rel {
            let base = j * ext;
            total += blocks
                .iter()
                .map(|&(off, len)| rel.saturating_sub(base + off as u64).min(len as u64))
                .sum::<u64>();
            j += 1;
        }
        total
    }

    /// The file offset of data position `d`.
    pub(crate) fn file_offset(&self, d: u64) -> u64 {
        match self.runs(d, 1).first() {
            Some(r) => r.0,
            None => self.disp + d,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datatype::build;

    #[test]
    fn data_before_counts_copies_whose_data_reach_past_the_next_copys_start() {
        // Ints at bytes 4..12 of an extent of 8: copy k holds [8k + 4, 8k + 12).
        let mut t = build(&[(4, 2, int())], false).expect("build");
        t.lb = 0;
        t.extent = 8;
        let v = View {
            disp: 0,
            etype: int(),
            etype_h: MPI_INT,
            filetype: Arc::new(t),
            filetype_h: MPI_INT,
            datarep: "native".into(),
        };
        let brute = |end: u64| -> u64 {
            (0..64u64)
                .map(|k| (0..8u64).filter(|b| 8 * k + 4 + b < end).count() as u64)
                .sum()
        };
        for end in 0..100 {
            assert_eq!(v.data_before(end), brute(end), "end {end}");
        }
    }

    fn int() -> Arc<TypeObj> {
        crate::datatype::dtype(MPI_INT).expect("MPI_INT")
    }

    /// cyclic(1) of `p` ranks: rank `r`'s view of ints.
    fn cyclic(p: usize) -> View {
        let t = build(&[(0, 1, int())], false).expect("build");
        let mut t = t;
        t.extent = 4 * p as isize;
        View::new(
            0,
            (MPI_INT, int()),
            (MPI_INT, Arc::new(t)),
            "native".into(),
            "test",
        )
        .expect("a view")
    }

    /// The model: data byte `d` of rank `r` in a cyclic(1) view of `p` ranks of ints,
    /// displaced by 4r.
    fn model(p: u64, r: u64, d: u64) -> u64 {
        (d / 4) * 4 * p + 4 * r + d % 4
    }

    #[test]
    fn runs_of_a_cyclic_view_match_the_model_byte_by_byte() {
        for p in 1..5u64 {
            for r in 0..p {
                let mut v = cyclic(p as usize);
                v.disp = 4 * r;
                for d in 0..40u64 {
                    for n in 0..17u64 {
                        let bytes: Vec<u64> = v
                            .runs(d, n)
                            .iter()
                            .flat_map(|&(a, l)| a..a + l as u64)
                            .collect();
                        let want: Vec<u64> = (d..d + n).map(|x| model(p, r, x)).collect();
                        assert_eq!(bytes, want, "p {p} r {r} d {d} n {n}");
                    }
                }
                // The end of a file: every data byte before it is counted.
                for end in 0..60u64 {
                    let want = (0..200).filter(|&x| model(p, r, x) < end).count() as u64;
                    assert_eq!(v.data_before(end), want, "p {p} r {r} end {end}");
                }
            }
        }
    }

    #[test]
    fn a_contiguous_view_is_one_run_from_its_displacement() {
        let mut v = View::bytes().expect("bytes");
        v.disp = 100;
        assert_eq!(v.runs(5, 10).as_slice(), [(105, 10)]);
        assert_eq!(v.data_before(50), 0);
        assert_eq!(v.data_before(150), 50);
        assert_eq!(v.file_offset(7), 107);
    }

    #[test]
    fn filetypes_out_of_order_or_not_whole_etypes_are_refused() {
        let back = build(&[(8, 1, int()), (0, 1, int())], false).expect("build");
        assert!(View::new(
            0,
            (MPI_INT, int()),
            (0, Arc::new(back)),
            "native".into(),
            "t"
        )
        .is_err());
        let dbl = crate::datatype::dtype(MPI_DOUBLE).expect("double");
        let three = build(&[(0, 3, int())], false).expect("build");
        assert!(View::new(
            0,
            (MPI_DOUBLE, dbl),
            (0, Arc::new(three)),
            "native".into(),
            "t"
        )
        .is_err());
    }

    #[test]
    fn a_filetype_whose_data_start_past_0_tiles_by_its_extent() {
        // Three ints from byte 8 (a lower bound of 8), extent 12: copy k at 12k + 8.
        let mut t = build(&[(8, 3, int())], false).expect("build");
        t.extent = 12;
        let v = View::new(0, (MPI_INT, int()), (0, Arc::new(t)), "native".into(), "t")
            .expect("data spanning one extent are a view");
        assert_eq!(v.runs(0, 24).as_slice(), [(8, 24)]);
        // Spanning more than an extent, the copies would overlap: refused.
        let mut t = build(&[(8, 3, int())], false).expect("build");
        t.extent = 8;
        assert!(View::new(0, (MPI_INT, int()), (0, Arc::new(t)), "native".into(), "t").is_err());
    }

    /// A filetype's blocks are walked at its first view only: the answer stays with the
    /// type, for views that tile and for those refused, whatever the etype.
    #[test]
    fn a_filetype_is_checked_once_and_its_answer_kept() {
        let view = |t: &Arc<TypeObj>| {
            View::new(0, (MPI_INT, int()), (0, t.clone()), "native".into(), "t").map(|_| ())
        };
        let good = Arc::new(build(&[(0, 1, int()), (8, 2, int())], false).expect("build"));
        assert!(good.tiling.get().is_none());
        assert!(view(&good).is_ok());
        assert_eq!(good.tiling.get(), Some(&None));
        assert!(view(&good).is_ok());
        let back = Arc::new(build(&[(8, 1, int()), (0, 1, int())], false).expect("build"));
        assert!(view(&back).is_err());
        assert!(matches!(back.tiling.get(), Some(Some(_))));
        let e = view(&back).expect_err("refused again");
        assert!(format!("{e:?}").contains("increasing order"), "{e:?}");
        // The etype's own checks still come first, per call (12 bytes are not whole
        // doubles).
        let dbl = crate::datatype::dtype(MPI_DOUBLE).expect("double");
        let v = View::new(
            0,
            (MPI_DOUBLE, dbl),
            (0, good.clone()),
            "native".into(),
            "t",
        );
        assert!(v.is_err());
    }
}
