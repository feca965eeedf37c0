//! The Redis a `cluster:` names, read from the environment (the URL may hold a password, so
//! it is never logged, shown or put in an error) and checked: off loopback, Redis must be
//! reached with TLS (`rediss://`) and a password or ACL user (README "Several routers").

use std::net::IpAddr;

/// A checked Redis URL; its Debug output shows the host only.
#[derive(Clone)]
pub struct Endpoint {
    client: redis::Client,
    host: String,
    /// The password, so no error text built from Redis can repeat it.
    secret: Option<String>,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint")
            .field("host", &self.host)
            .finish_non_exhaustive()
    }
}

impl Endpoint {
    /// The Redis URL in `var`, checked.
    pub fn from_env(var: &str) -> Result<Endpoint, String> {
        let url = std::env::var(var).unwrap_or_default();
        if url.trim().is_empty() {
            return Err(format!(
                "cluster.redis_url_env names {var}, which is unset or empty: export {var}=redis://127.0.0.1:6379/0 (or rediss://:PASSWORD@host:6379/0 off loopback)"
            ));
        }
        Endpoint::parse(url.trim(), var)
    }

    /// `url` (from `var`), checked; errors name the variable and the host, never the URL.
    pub fn parse(url: &str, var: &str) -> Result<Endpoint, String> {
        let u = url::Url::parse(url)
            .map_err(|e| format!("{var}: not a Redis URL ({e}); expected redis://host:6379/0"))?;
        let host = u.host_str().unwrap_or_default().to_string();
        let tls = match u.scheme() {
            "redis" => false,
            "rediss" => true,
            other => {
                return Err(format!(
                    "{var}: scheme '{}' is not redis:// or rediss://",
                    crate::text::bounded(other)
                ))
            }
        };
        if host.is_empty() {
            return Err(format!("{var}: the URL names no host"));
        }
        let secret = u.password().filter(|p| !p.is_empty()).map(str::to_string);
        let protected = tls && secret.is_some();
        if !(is_loopback_host(&host) || protected) {
            return Err(format!(
                "{var}: the Redis at {host} is not on loopback, so it must be reached with TLS and a password: use rediss://:PASSWORD@{host}:6379/0 (or rediss://USER:PASSWORD@... for an ACL user)"
            ));
        }
        let client = redis::Client::open(url).map_err(|e| {
            format!(
                "{var}: the Redis URL for {host} was refused ({})",
                hide(&e.to_string(), secret.as_deref())
            )
        })?;
        Ok(Endpoint {
            client,
            host,
            secret,
        })
    }

    pub fn client(&self) -> &redis::Client {
        &self.client
    }

    pub fn host(&self) -> &str {
        &self.host
    }

    /// `text` (an error from Redis) without the password, bounded.
    pub fn hide(&self, text: &str) -> String {
        hide(text, self.secret.as_deref())
    }
}

fn hide(text: &str, secret: Option<&str>) -> String {
    let text = match secret {
        Some(s) if !s.is_empty() => text.replace(s, "***"),
        _ => text.to_string(),
    };
    crate::text::bounded(&text)
}

fn is_loopback_host(host: &str) -> bool {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    match bare.parse::<IpAddr>() {
        Ok(ip) => crate::registry::is_loopback(ip),
        Err(_) => bare.eq_ignore_ascii_case("localhost"),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn loopback_needs_nothing_more() {
        for url in [
            "redis://127.0.0.1:6379/0",
            "redis://localhost/1",
            "redis://[::1]:6380",
        ] {
            assert!(Endpoint::parse(url, "R").is_ok(), "{url}");
        }
    }

    #[test]
    fn off_loopback_needs_tls_and_a_password_and_never_shows_it() {
        for url in [
            "redis://redis.lan:6379/0",
            "redis://:hunter2@redis.lan:6379/0",
            "rediss://redis.lan:6379/0",
            "rediss://user@redis.lan:6379/0",
        ] {
            let e = Endpoint::parse(url, "R").unwrap_err();
            assert!(e.contains("redis.lan") && e.contains("rediss://"), "{e}");
            assert!(!e.contains("hunter2"), "{e}");
        }
        assert!(Endpoint::parse("rediss://:hunter2@redis.lan:6379/0", "R").is_ok());
        assert!(Endpoint::parse("rediss://ops:hunter2@redis.lan:6379/0", "R").is_ok());
        let e = Endpoint::parse("http://127.0.0.1:6379", "R").unwrap_err();
        assert!(e.contains("scheme 'http'"), "{e}");
        let e = format!(
            "{:?}",
            Endpoint::parse("rediss://:hunter2@redis.lan/0", "R").unwrap()
        );
        assert!(!e.contains("hunter2"), "{e}");
    }
}
