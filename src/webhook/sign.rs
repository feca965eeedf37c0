//! The signing secret and the Standard Webhooks `v1` signature: HMAC-SHA256 over
//! `{webhook-id}.{webhook-timestamp}.{body}`, base64-encoded.

use std::fmt;

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use hmac::{Hmac, Mac};
use sha2::Sha256;

/// The prefix Standard Webhooks gives a base64-encoded symmetric secret.
const WHSEC: &str = "whsec_";

/// The key callbacks are signed with, read from `callback_secret_env`. Its bytes never
/// leave this module except through [`sign`]; `Debug` shows nothing of them.
#[derive(Clone)]
pub struct Secret(Vec<u8>);

/// Why a `callback_secret_env` value cannot sign. The words never hold the value.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum SecretError {
    #[error("the callback secret is empty")]
    Empty,
    #[error("the callback secret starts with whsec_ but what follows is not valid base64")]
    NotBase64,
}

impl Secret {
    /// A `whsec_` value is base64-decoded after its prefix, as Standard Webhooks does; any
    /// other value is used as its bytes. An empty key (either way) is refused: it would sign
    /// with nothing anyone has to know.
    pub fn from_env_value(value: &str) -> Result<Secret, SecretError> {
        let bytes = match value.strip_prefix(WHSEC) {
            Some(encoded) => STANDARD
                .decode(encoded)
                .map_err(|_| SecretError::NotBase64)?,
            None => value.as_bytes().to_vec(),
        };
        if bytes.is_empty() {
            return Err(SecretError::Empty);
        }
        Ok(Secret(bytes))
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

/// `v1,<base64 of HMAC-SHA256 over "{id}.{timestamp}.{body}">`, the `webhook-signature`
/// value for one attempt (a retry signs again with its own timestamp).
pub fn sign(secret: &Secret, id: &str, timestamp: i64, body: &[u8]) -> String {
    let mut mac = match Hmac::<Sha256>::new_from_slice(&secret.0) {
        Ok(mac) => mac,
        // HMAC takes a key of any length (a long one is hashed first).
        Err(_) => unreachable!("HMAC-SHA256 accepts keys of every length"),
    };
    mac.update(id.as_bytes());
    mac.update(b".");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    format!("v1,{}", STANDARD.encode(mac.finalize().into_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// From the Standard Webhooks reference library's tests
    /// (standard-webhooks, libraries/python/tests/test_webhooks.py, `test_sign_function`).
    const VECTOR_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    const VECTOR_ID: &str = "msg_p5jXN8AQM9LWM0D4loKWxJek";
    const VECTOR_TIMESTAMP: i64 = 1614265330;
    const VECTOR_BODY: &str = r#"{"test": 2432232314}"#;
    const VECTOR_SIGNATURE: &str = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";

    #[test]
    fn the_reference_vector_signs_as_published() {
        let secret = Secret::from_env_value(VECTOR_SECRET).unwrap();
        let got = sign(&secret, VECTOR_ID, VECTOR_TIMESTAMP, VECTOR_BODY.as_bytes());
        assert_eq!(got, VECTOR_SIGNATURE);
    }

    #[test]
    fn a_whsec_secret_is_its_decoded_bytes_and_any_other_is_its_own_bytes() {
        let decoded = Secret::from_env_value("whsec_aGVsbG8=").unwrap();
        assert_eq!(decoded.0, b"hello");
        let raw = Secret::from_env_value("hello").unwrap();
        assert_eq!(raw.0, b"hello");
        assert_eq!(
            sign(&decoded, "tsk_1:succeeded", 1, b"{}"),
            sign(&raw, "tsk_1:succeeded", 1, b"{}")
        );
        // Only the exact prefix counts: this one is used as written.
        let upper = Secret::from_env_value("WHSEC_aGVsbG8=").unwrap();
        assert_eq!(upper.0, b"WHSEC_aGVsbG8=");
    }

    #[test]
    fn a_bad_whsec_value_is_refused_without_echoing_it() {
        let err = Secret::from_env_value("whsec_not*base64!sekrit").unwrap_err();
        assert_eq!(err, SecretError::NotBase64);
        let words = err.to_string();
        assert!(
            !words.contains("sekrit") && !words.contains("not*base64"),
            "{words}"
        );
        assert_eq!(Secret::from_env_value("").unwrap_err(), SecretError::Empty);
        assert_eq!(
            Secret::from_env_value("whsec_").unwrap_err(),
            SecretError::Empty
        );
    }

    #[test]
    fn debug_never_shows_the_secret() {
        let secret = Secret::from_env_value("hunter2-hunter2").unwrap();
        let shown = format!("{secret:?} {:?}", Some(&secret));
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(!shown.contains("104"), "not even as bytes: {shown}");
    }

    #[test]
    fn every_part_of_the_signed_content_matters() {
        let s = Secret::from_env_value("k").unwrap();
        let base = sign(&s, "a", 1, b"x");
        assert!(base.starts_with("v1,"));
        assert_ne!(base, sign(&s, "b", 1, b"x"));
        assert_ne!(base, sign(&s, "a", 2, b"x"));
        assert_ne!(base, sign(&s, "a", 1, b"y"));
        assert_ne!(
            base,
            sign(&Secret::from_env_value("j").unwrap(), "a", 1, b"x")
        );
    }
}
