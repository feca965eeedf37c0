//! Who a request acts for.

/// A request extension: a hex SHA-256 of the API key the guard accepted, or "" when the
/// router has no keys. Tasks and idempotency keys belong to it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Owner(pub String);
