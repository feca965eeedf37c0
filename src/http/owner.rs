//! Who a request belongs to: [`Owner`], put on every request by the guard, so that what a
//! client leaves behind (idempotent answers, tasks) is found again only by the same API key.

use sha2::{Digest, Sha256};

/// The API key a request was accepted with, as a hex SHA-256 (never the key itself), or ""
/// when the router has no keys or the request came keyless from a trusted network: every
/// such request shares one owner.
///
/// The guard inserts it as a request extension before any handler runs; a handler reads it
/// with `Extension<Owner>` or from `Request::extensions`. Two keys are two owners: an
/// `Idempotency-Key` sent under one is not seen under the other.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Owner(pub String);

impl Owner {
    /// The owner of requests accepted with the bearer key `key`.
    pub fn of_key(key: &str) -> Owner {
        Owner(sha256_hex(key.as_bytes()))
    }

    /// The owner of requests that carried no key (or a router without keys).
    pub fn keyless() -> Owner {
        Owner(String::new())
    }
}

/// Lower-case hex SHA-256 of `bytes`.
pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// Lower-case hex of `digest`.
pub(crate) fn hex(digest: &[u8]) -> String {
    use std::fmt::Write;
    digest.iter().fold(String::with_capacity(64), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_owner_is_the_hash_of_its_key_never_the_key() {
        assert_eq!(
            Owner::of_key("abc").0,
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(Owner::keyless().0, "");
        assert_ne!(Owner::of_key("k-one"), Owner::of_key("k-two"));
    }
}
