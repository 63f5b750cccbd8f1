//! The most communicators a rank holds at once (`spools::MAX_LIVE_COMMUNICATORS`): past it a
//! creation fails with `NoContext` on every member alike (no member waits for another
//! that refused), by `dup` and by `idup`; a freed communicator's place is reused. Real
//! processes.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use spools::{MsgError, MAX_LIVE_COMMUNICATORS};
use spools_testkit::{assert_ok, e, launch, rank_main};

mod common;
use common::check;

fn limit_role() -> Result<(), String> {
    let w = e(spools::init())?;
    let mut held = Vec::new();
    // Every rank holds its world and what `init` made; the dups fill the rest.
    let refused = loop {
        match w.dup() {
            Ok(c) => held.push(c),
            Err(err) => break err,
        }
        check(held.len() <= MAX_LIVE_COMMUNICATORS as usize, || {
            format!("{} dups made, past the limit", held.len())
        })?;
    };
    check(matches!(refused, MsgError::NoContext), || {
        format!("the refused dup failed with {refused:?}")
    })?;
    // Every rank refused the same dup: the counts agree.
    let mut most = [0u64];
    e(w.allreduce(&[held.len() as u64], &mut most, &spools::Op::Max))?;
    check(most[0] == held.len() as u64, || {
        format!("this rank made {} dups, another {}", held.len(), most[0])
    })?;
    let nb = e(w.idup())?;
    check(matches!(nb.wait(), Err(MsgError::NoContext)), || {
        "an idup past the limit did not fail with NoContext".into()
    })?;
    // A freed place is taken again, and the new communicator works.
    held.truncate(held.len() - 1);
    let c = e(w.dup())?;
    let mut sum = [0u32];
    e(c.allreduce(&[1u32], &mut sum, &spools::Op::Sum))?;
    check(sum[0] == c.size(), || {
        format!("allreduce on the new dup gave {}", sum[0])
    })?;
    if w.rank() == 0 {
        println!("refused after {} dups on every rank", held.len());
    }
    drop((c, held));
    e(w.finalize())
}

#[test]
fn communicators_past_the_limit_fail_on_every_member_and_freed_places_are_reused() {
    rank_main(|_| limit_role());
    let o = launch(
        2,
        "communicators_past_the_limit_fail_on_every_member_and_freed_places_are_reused",
        "limit",
        &[],
    );
    assert_ok(&o);
    assert!(o.stdout.contains("refused after"), "{}", o.stdout);
}
