//! `tasks.callback_allow` (docs/api.md "Tasks"): where a task's callback may go, compared as parsed
//! scheme, host and port. Never as a string prefix, which `http://127.0.0.1:80@evil.example`
//! or `http://localhost.evil.example` would pass.
//!
//! A callback URL is checked at submit and again before every delivery attempt, against the
//! registry serving then (a reload that drops a rule stops deliveries to it). Where a host
//! *name* may then lead is the callback client's to check (`crate::webhook::Lookup`).

use std::fmt;
use std::net::Ipv6Addr;

/// One `callback_allow` entry, compared as parsed scheme, host and port (docs/api.md "Tasks").
#[derive(Clone, Debug, PartialEq)]
pub struct AllowRule {
    /// `http` or `https`.
    pub scheme: String,
    /// As a parsed URL has it, so it compares with a callback URL's host: lower case, IPv4
    /// in dotted form, IPv6 in brackets (`[::1]`).
    pub host: String,
    /// `None`: any port.
    pub port: Option<u16>,
}

impl AllowRule {
    /// Whether `url` may receive callbacks: same scheme and host (case-insensitive host),
    /// and the port when the rule names one (the URL's effective port, default 80/443 when
    /// absent). A URL with user info (user:pass@) is never allowed.
    pub fn allows(&self, url: &reqwest::Url) -> bool {
        url.username().is_empty()
            && url.password().is_none()
            && url.scheme().eq_ignore_ascii_case(&self.scheme)
            && url
                .host_str()
                .is_some_and(|h| h.eq_ignore_ascii_case(&self.host))
            && self
                .port
                .is_none_or(|p| url.port_or_known_default() == Some(p))
    }

    /// An entry as registry.yaml writes it: `scheme://host:` (any port), `scheme://host:port`
    /// or `scheme://host` (the scheme's default port), optionally ending in `/`. The error
    /// says what is wrong, without the key's name or the value.
    pub(super) fn parse(written: &str) -> Result<AllowRule, &'static str> {
        let (scheme, rest) = written
            .trim()
            .split_once("://")
            .ok_or("it has no scheme://")?;
        let scheme = scheme.to_ascii_lowercase();
        let default_port = default_port(&scheme).ok_or("the scheme is not http or https")?;
        let end = rest.find(['/', '?', '#', '\\']).unwrap_or(rest.len());
        let (authority, tail) = rest.split_at(end);
        if !(tail.is_empty() || tail == "/") {
            return Err("it has a path, query or fragment (only a trailing / may follow the port)");
        }
        if authority.contains('@') {
            return Err("it carries user info (user:pass@)");
        }
        let (host, port) = split_host_port(authority)?;
        if host.is_empty() {
            return Err("the host is empty");
        }
        let port = match port {
            None => Some(default_port),
            Some("") => None,
            Some(p) => Some(
                p.parse::<u16>()
                    .ok()
                    .filter(|&n| n > 0 && p.bytes().all(|b| b.is_ascii_digit()))
                    .ok_or("the port is not a number from 1 to 65535")?,
            ),
        };
        // The host as a URL parser reads it (lower case, `127.1` as `127.0.0.1`, IDNA), so it
        // compares with the host of a callback URL parsed the same way.
        let invalid_host = "the host is not a valid host name or IP address";
        if host.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(invalid_host);
        }
        let url = reqwest::Url::parse(&format!("{scheme}://{host}/")).map_err(|_| invalid_host)?;
        let host = url
            .host_str()
            .filter(|h| !h.is_empty() && url.path() == "/")
            .ok_or(invalid_host)?;
        Ok(AllowRule {
            scheme,
            host: host.to_string(),
            port,
        })
    }
}

/// `host` and, after a `:`, the port as written (`Some("")` for a trailing colon).
fn split_host_port(authority: &str) -> Result<(&str, Option<&str>), &'static str> {
    let Some(inner) = authority.strip_prefix('[') else {
        if authority.matches(':').count() > 1 {
            return Err("an IPv6 host must be in brackets, like [::1]");
        }
        return Ok(match authority.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        });
    };
    let bad_ipv6 = "the host in brackets is not an IPv6 address";
    let (ip, after) = inner.split_once(']').ok_or(bad_ipv6)?;
    ip.parse::<Ipv6Addr>().map_err(|_| bad_ipv6)?;
    let host = &authority[..ip.len() + 2];
    match after {
        "" => Ok((host, None)),
        _ => match after.strip_prefix(':') {
            Some(port) => Ok((host, Some(port))),
            None => Err("something other than :port follows the IPv6 host"),
        },
    }
}

fn default_port(scheme: &str) -> Option<u16> {
    match scheme {
        "http" => Some(80),
        "https" => Some(443),
        _ => None,
    }
}

/// As it would be written: `http://127.0.0.1:` (any port), `https://hooks.example:8443`,
/// and `https://hooks.example` for the scheme's default port.
impl fmt::Display for AllowRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}://{}", self.scheme, self.host)?;
        match self.port {
            None => f.write_str(":"),
            Some(p) if Some(p) == default_port(&self.scheme) => Ok(()),
            Some(p) => write!(f, ":{p}"),
        }
    }
}
