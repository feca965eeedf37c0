//! Tiers of equal targets in a chain and each machine's `parallel` and `warm_for`
//! (docs/registry.md "routes:").

use std::time::Duration;

use super::{assert_rejected_at, base_with, parse};
use crate::outcome::{MachineId, ModelId, RouteId};

#[test]
fn a_list_inside_a_chain_is_a_tier_and_the_chain_stays_flat() {
    let reg = parse(&base_with(12, &["    chain: [[coder-gpu, small]]"])).unwrap();
    let code = &reg.routes[RouteId(0)];
    assert_eq!(code.chain, [ModelId(0), ModelId(1)]);
    assert_eq!(code.tiers, [vec![ModelId(0), ModelId(1)]]);
    assert_eq!(reg.tiers("code"), [vec![ModelId(0), ModelId(1)]]);
    assert!(reg.tiers("chat").is_empty());
    assert!(reg.routes[RouteId(1)].tiers.is_empty(), "a plain chain");
}

#[test]
fn a_tier_in_block_style_and_a_tier_of_one() {
    let reg = parse(&base_with(
        12,
        &["    chain:", "      - [coder-gpu]", "      - small"],
    ))
    .unwrap();
    let code = &reg.routes[RouteId(0)];
    assert_eq!(code.chain, [ModelId(0), ModelId(1)]);
    assert!(code.tiers.is_empty(), "a tier of one is a plain link");
}

#[test]
fn an_empty_tier_is_rejected_where_it_stands() {
    let v = base_with(12, &["    chain: [small, []]"]);
    assert_rejected_at(&v, 12, "[]", &["route 'code': an empty tier"]);
}

#[test]
fn a_tier_inside_a_tier_is_rejected_where_it_stands() {
    let v = base_with(12, &["    chain: [[coder-gpu, [small]]]"]);
    assert_rejected_at(&v, 12, "[small]", &["route 'code': a tier inside a tier"]);
}

#[test]
fn a_model_named_twice_in_one_chain_is_rejected_at_its_second_place() {
    let v = base_with(12, &["    chain: [[coder-gpu, small], smalL, small]"]);
    assert_rejected_at(&v, 12, "smalL", &["unknown model 'smalL'"]);
    let v = base_with(12, &["    chain: [small, [coder-gpu, small]]"]);
    assert_rejected_at(
        &v,
        12,
        "small]]",
        &["route 'code': model 'small' is named twice in its chain"],
    );
}

#[test]
fn parallel_and_warm_for_are_read_per_machine() {
    let reg = parse(&base_with(
        5,
        &[
            "    url: http://127.0.0.1:11434/v1",
            "    parallel: 4",
            "    warm_for: 10m",
        ],
    ))
    .unwrap();
    let gpu = &reg.machines[MachineId(0)];
    assert_eq!((gpu.parallel, gpu.warm_for), (1, Duration::from_secs(300)));
    let local = &reg.machines[MachineId(1)];
    assert_eq!(
        (local.parallel, local.warm_for),
        (4, Duration::from_secs(600))
    );
    let v = base_with(
        5,
        &["    url: http://127.0.0.1:11434/v1", "    parallel: 0"],
    );
    assert_rejected_at(
        &v,
        6,
        "0",
        &["machine 'local': parallel: expected a whole number from 1 to 1024, got 0"],
    );
}
