//! The pick's decision table: each rule of docs/registry.md "routes:" (tiers) on its own.

use super::{order, Seen, Why};
use crate::outcome::ModelId;

fn seen(model: usize, warm: bool, in_flight: u32) -> Seen {
    Seen {
        model: ModelId(model),
        warm,
        in_flight,
        parallel: 1,
        ttfb_us: 1000,
        last_used: 1,
    }
}

fn picked(tier: &mut [Seen]) -> Vec<(usize, Why)> {
    order(tier).map(|(m, why)| (m.0, why)).collect()
}

#[test]
fn warm_and_free_comes_before_free() {
    let mut t = [seen(0, false, 0), seen(1, true, 0)];
    assert_eq!(picked(&mut t), [(1, Why::Warm), (0, Why::Free)]);
}

#[test]
fn a_warm_machine_that_is_busy_is_not_free() {
    let mut t = [seen(0, true, 1), seen(1, false, 0)];
    assert_eq!(picked(&mut t), [(1, Why::Free), (0, Why::LeastBusy)]);
}

#[test]
fn parallel_is_what_free_means() {
    let mut busy_twice = seen(0, true, 2);
    busy_twice.parallel = 4;
    let mut t = [seen(1, false, 0), busy_twice];
    assert_eq!(picked(&mut t), [(0, Why::Warm), (1, Why::Free)]);
}

#[test]
fn all_busy_the_fewest_in_flight_then_the_warm_one() {
    let mut t = [seen(0, false, 3), seen(1, false, 2), seen(2, true, 2)];
    assert_eq!(
        picked(&mut t),
        [
            (2, Why::LeastBusy),
            (1, Why::LeastBusy),
            (0, Why::LeastBusy)
        ]
    );
}

#[test]
fn fewest_in_flight_beats_warmth_when_all_are_busy() {
    let mut t = [seen(0, true, 3), seen(1, false, 2)];
    assert_eq!(picked(&mut t), [(1, Why::LeastBusy), (0, Why::LeastBusy)]);
}

#[test]
fn ties_go_to_the_faster_then_to_the_least_recently_used() {
    let mut slow = seen(0, false, 0);
    slow.ttfb_us = 5000;
    let mut recent = seen(1, false, 0);
    recent.last_used = 900;
    let mut earlier = seen(2, false, 0);
    earlier.last_used = 100;
    let mut t = [slow, recent, earlier];
    assert_eq!(
        picked(&mut t),
        [(2, Why::Free), (1, Why::Free), (0, Why::Free)]
    );
}

#[test]
fn an_untried_target_comes_first_among_equals() {
    let mut untried = seen(1, false, 0);
    untried.ttfb_us = 0;
    let mut t = [seen(0, false, 0), untried];
    assert_eq!(picked(&mut t), [(1, Why::Free), (0, Why::Free)]);
}

#[test]
fn equal_targets_keep_the_chains_order() {
    let mut t = [seen(0, false, 0), seen(1, false, 0), seen(2, false, 0)];
    assert_eq!(
        picked(&mut t),
        [(0, Why::Free), (1, Why::Free), (2, Why::Free)]
    );
}
