//! Model kinds: what work a model does, a chain of one kind, one default route per kind.

use super::*;
use crate::outcome::Kind;

/// BASE with an image machine's models and routes added after line 8 and 15.
fn with_images(models: &[&str], routes: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = BASE.iter().map(|s| s.to_string()).collect();
    v.splice(8..8, models.iter().map(|s| s.to_string()));
    v.extend(routes.iter().map(|s| s.to_string()));
    v
}

#[test]
fn a_model_without_kind_is_chat_and_kinds_are_read() {
    let lines = with_images(
        &[
            "  sdxl: { machine: gpu-box, name: sdxl, kind: image }",
            "  whisper: { machine: gpu-box, name: whisper, kind: transcribe }",
        ],
        &[
            "  - name: draw",
            "    chain: [sdxl]",
            "  - name: listen",
            "    default: true",
            "    chain: [whisper]",
        ],
    );
    let reg = parse(&lines).unwrap();
    let kinds: Vec<(&str, Kind)> = reg
        .models
        .iter()
        .map(|m| (m.name.as_str(), m.kind))
        .collect();
    assert_eq!(
        kinds,
        [
            ("coder-gpu", Kind::Chat),
            ("small", Kind::Chat),
            ("sdxl", Kind::Image),
            ("whisper", Kind::Transcribe)
        ]
    );
    let route_kinds: Vec<Kind> = reg.routes.iter().map(|r| r.kind).collect();
    assert_eq!(
        route_kinds,
        [Kind::Chat, Kind::Chat, Kind::Image, Kind::Transcribe]
    );
    // A default per kind: chat's is marked, image's is its only route, and so on.
    assert_eq!(
        reg.defaults,
        [
            (Kind::Chat, RouteId(1)),
            (Kind::Image, RouteId(2)),
            (Kind::Transcribe, RouteId(3))
        ]
    );
    assert_eq!(reg.default_route, RouteId(1));
}

#[test]
fn an_unknown_kind_is_rejected_at_its_place() {
    let lines = base_with(
        8,
        &["  small: { machine: local, name: \"qwen3:4b\", kind: vision }"],
    );
    assert_rejected_at(
        &lines,
        8,
        "vision",
        &["small", "kind", "chat, embed, image"],
    );
}

#[test]
fn a_chain_of_two_kinds_is_rejected_at_the_model_of_the_other_kind() {
    let lines = with_images(
        &["  sdxl: { machine: gpu-box, name: sdxl, kind: image }"],
        &["  - name: draw", "    chain: [sdxl, small]"],
    );
    assert_rejected_at(&lines, 18, "small", &["draw", "chat", "image", "one kind"]);
}

#[test]
fn one_default_route_per_kind_and_no_more() {
    let ok = with_images(
        &["  sdxl: { machine: gpu-box, name: sdxl, kind: image }"],
        &["  - name: draw", "    default: true", "    chain: [sdxl]"],
    );
    assert!(
        parse(&ok).is_ok(),
        "a default chat route and a default image route"
    );
    let two = with_images(
        &["  sdxl: { machine: gpu-box, name: sdxl, kind: image }"],
        &[
            "  - name: draw",
            "    default: true",
            "    chain: [sdxl]",
            "  - name: paint",
            "    default: true",
            "    chain: [sdxl]",
        ],
    );
    assert_rejected_at(
        &two,
        21,
        "true",
        &["paint", "second default image route", "draw"],
    );
}
