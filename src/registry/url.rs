//! The URLs registry.yaml names (`machines.*.url`, `telegram.api_url`): http(s) with a host,
//! and no password that `/status` or an error would show.

use serde_saphyr::Spanned;

use super::invalid::{err, Invalid};

/// The URL without a trailing slash.
pub(super) fn validate_url(s: &Spanned<String>) -> Result<String, Invalid> {
    // Errors never repeat a password the URL may hold.
    let shown = without_userinfo(&s.value);
    let parsed = reqwest::Url::parse(&s.value).map_err(|e| {
        (
            s.referenced,
            format!("url: expected an http(s) URL, got '{shown}' ({e})"),
        )
    })?;
    if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() {
        return err(
            s.referenced,
            format!("url: expected an http:// or https:// URL with a host, got '{shown}'"),
        );
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return err(
            s.referenced,
            format!("url: '{shown}' carries a user name or password, which /status and the dashboard would show; put the key in an environment variable named by api_key_env"),
        );
    }
    Ok(s.value.trim_end_matches('/').to_string())
}

/// `scheme://user:pass@host/...` as `scheme://***@host/...`.
pub(super) fn without_userinfo(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    match rest[..authority_end].rfind('@') {
        Some(at) => format!("{scheme}://***{}", &rest[at..]),
        None => url.to_string(),
    }
}
