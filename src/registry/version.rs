//! [`Registry::version`](super::Registry::version): a short hash of registry.yaml's bytes,
//! recorded in the ledger with breaker transitions and reloads, and shown by `/status`.

/// FNV-1a of `text` as 16 hex digits: stable across runs and platforms, enough to tell two
/// files apart.
pub(super) fn version_of(text: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016x}")
}
