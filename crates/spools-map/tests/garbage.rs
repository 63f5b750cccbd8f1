//! Arbitrary and mangled specs never panic: they parse to a layout that prints back to
//! itself, or give an error whose position lies within the input. (The libFuzzer target in
//! `fuzz/` explores further; this runs on stable in every test run.)

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use proptest::prelude::*;
use spools_map::Layout;

const SEEDS: [&str; 6] = [
    "f64[1000,1000] cyclic(2),cyclic(2) on 8x8",
    "c64[5,6,7] cyclic,block(3),* on 2x2x1 order=F",
    "bytes(12)[9] block(3) on 3",
    "stripe(unit=64KiB,count=4,size=1GiB)",
    "raid5(unit=4MiB,count=5)",
    "bits(n=10,unit=[5,4],local=[9,8,7,6,3,2,1,0])",
];

fn check(text: &str) -> Result<(), TestCaseError> {
    match text.parse::<Layout>() {
        Ok(l) => {
            let again: Layout = l
                .to_string()
                .parse()
                .map_err(|e| TestCaseError::fail(format!("{e}")))?;
            prop_assert_eq!(again, l);
        }
        Err(e) => {
            prop_assert!(
                e.position() <= text.len(),
                "{text:?}: position {} past the end",
                e.position()
            );
            prop_assert!(!e.to_string().is_empty());
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_text(text in "[a-z0-9\\[\\](),=*x KMGiB]{0,48}") {
        check(&text)?;
    }

    #[test]
    fn arbitrary_unicode(text in "\\PC{0,24}") {
        check(&text)?;
    }

    #[test]
    fn mangled_seeds(
        seed in prop::sample::select(SEEDS.to_vec()),
        edits in prop::collection::vec((any::<prop::sample::Index>(), 0u8..3, "[0-9a-z,\\[\\]()x* =]"), 1..4),
    ) {
        let mut text = seed.to_string();
        for (at, op, piece) in edits {
            let i = at.index(text.len() + 1);
            let i = (0..=i).rev().find(|&j| text.is_char_boundary(j)).unwrap_or(0);
            match op {
                0 => text.insert_str(i, &piece),
                1 if i < text.len() => { text.remove(i); }
                _ => text.replace_range(i..(i + 1).min(text.len()), &piece),
            }
        }
        check(&text)?;
    }
}
