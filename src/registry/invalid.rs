//! Why a registry is invalid: the place in the file and the words that say what was wrong.
//! Every section's validation returns it, so it lives here, apart from all of them, and
//! imports none of the registry's other files.

use serde_saphyr::Location;

/// Why validation failed: where, and the message (which names the key).
pub(super) type Invalid = (Location, String);

/// Fails with `message` at `at`, for the `?` of a section's check.
pub(super) fn err<T>(at: Location, message: impl Into<String>) -> Result<T, Invalid> {
    Err((at, message.into()))
}
