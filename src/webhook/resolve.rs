//! How a callback's host name becomes the addresses its attempt connects to: looked up once
//! per connection by the callback client itself and checked there, so what is connected to
//! is exactly what was checked (no second lookup a DNS answer could change in between).
//!
//! `tasks.callback_allow` names hosts; a name's addresses are the DNS server's to choose. A
//! name that leads to an address no receiver should have is refused:
//! - unspecified (`0.0.0.0`, all of `0.0.0.0/8`, `::`): connecting there reaches this
//!   machine's own services;
//! - multicast (`224.0.0.0/4`, `ff00::/8`) and broadcast (`255.255.255.255`);
//! - link-local (`169.254.0.0/16`, where clouds answer metadata requests, and `fe80::/10`);
//! - for `localhost` (and `*.localhost`), anything but loopback.
//!
//! An IPv4 address written as IPv6 (`::ffff:a.b.c.d`) is judged as the IPv4 address. Among
//! a name's addresses, the refused ones are dropped and the rest are used; with none left
//! the attempt fails. A URL whose host is an IP literal is not looked up: the allow rule
//! that let it through names that very address. Private ranges (10/8, 192.168/16, ...) are
//! allowed: home-lab receivers live there.

use std::fmt;
use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;

use reqwest::dns::{Addrs, Name, Resolve, Resolving};

/// Where a host name's addresses come from: the system resolver in service, a table in
/// tests (which must never look up a name outside the machine).
pub trait Lookup: Send + Sync {
    fn lookup(&self, host: &str) -> Pin<Box<dyn Future<Output = io::Result<Vec<IpAddr>>> + Send>>;
}

/// The system resolver (getaddrinfo, on tokio's blocking pool).
pub struct SystemLookup;

impl Lookup for SystemLookup {
    fn lookup(&self, host: &str) -> Pin<Box<dyn Future<Output = io::Result<Vec<IpAddr>>> + Send>> {
        let host = host.to_owned();
        Box::pin(async move {
            let found = tokio::net::lookup_host((host.as_str(), 0)).await?;
            Ok(found.map(|a| a.ip()).collect())
        })
    }
}

/// The callback client's resolver: the addresses a [`Lookup`] gives that [`usable`] keeps.
pub(super) struct Resolver {
    pub(super) lookup: Arc<dyn Lookup>,
}

impl Resolve for Resolver {
    fn resolve(&self, name: Name) -> Resolving {
        let lookup = Arc::clone(&self.lookup);
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let found = lookup.lookup(&host).await?;
            let usable = usable(&host, &found)?;
            let addrs: Addrs = Box::new(usable.into_iter().map(|ip| SocketAddr::new(ip, 0)));
            Ok(addrs)
        })
    }
}

/// Why a looked-up name gave nothing a callback may connect to. Its words never hold the
/// host name (it is part of the URL, which may carry a token).
#[derive(Debug, PartialEq)]
pub(super) enum Refused {
    /// Every address was refused; the first one, and why.
    Address { ip: IpAddr, why: &'static str },
    /// The lookup gave no address at all.
    Nothing,
}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refused::Address { ip, why } => write!(
                f,
                "address refused: {ip} is {why}; callbacks reached by a name never go to \
                 unspecified, multicast, broadcast or link-local addresses"
            ),
            Refused::Nothing => f.write_str("the callback host resolved to no address"),
        }
    }
}

impl std::error::Error for Refused {}

/// The addresses of `found` (looked up for `host`) a callback may connect to, in their
/// order; refused when none is left.
pub(super) fn usable(host: &str, found: &[IpAddr]) -> Result<Vec<IpAddr>, Refused> {
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    let localhost = host == "localhost" || host.ends_with(".localhost");
    let mut first_refused = None;
    let mut usable = Vec::with_capacity(found.len());
    for &ip in found {
        let why = match refused(ip) {
            None if localhost && !as_v4(ip).is_loopback() => {
                Some("not loopback, as localhost must be")
            }
            why => why,
        };
        match why {
            None => usable.push(ip),
            Some(why) => {
                first_refused.get_or_insert(Refused::Address { ip, why });
            }
        }
    }
    if usable.is_empty() {
        return Err(first_refused.unwrap_or(Refused::Nothing));
    }
    Ok(usable)
}

/// Why no callback may connect to `ip` when a name led there, or `None` when it may.
pub(super) fn refused(ip: IpAddr) -> Option<&'static str> {
    match as_v4(ip) {
        IpAddr::V4(v4) if v4.is_unspecified() => Some("unspecified"),
        IpAddr::V4(v4) if v4.octets()[0] == 0 => Some("in 0.0.0.0/8 (this network)"),
        IpAddr::V4(v4) if v4.is_broadcast() => Some("broadcast"),
        IpAddr::V4(v4) if v4.is_multicast() => Some("multicast"),
        IpAddr::V4(v4) if v4.is_link_local() => Some("link-local"),
        IpAddr::V6(v6) if v6.is_unspecified() => Some("unspecified"),
        IpAddr::V6(v6) if v6.is_multicast() => Some("multicast"),
        IpAddr::V6(v6) if v6.segments()[0] & 0xffc0 == 0xfe80 => Some("link-local"),
        _ => None,
    }
}

/// An IPv4 address written as IPv6 (`::ffff:a.b.c.d`) as the IPv4 address it is.
fn as_v4(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        IpAddr::V4(_) => ip,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ips(written: &[&str]) -> Vec<IpAddr> {
        written.iter().map(|w| w.parse().unwrap()).collect()
    }

    #[test]
    fn addresses_no_receiver_should_have_are_refused() {
        for (ip, why) in [
            ("0.0.0.0", "unspecified"),
            ("0.1.2.3", "in 0.0.0.0/8 (this network)"),
            ("::", "unspecified"),
            ("255.255.255.255", "broadcast"),
            ("224.0.0.1", "multicast"),
            ("239.255.255.250", "multicast"),
            ("ff02::1", "multicast"),
            ("169.254.169.254", "link-local"),
            ("fe80::1", "link-local"),
            ("febf::1", "link-local"),
            ("::ffff:169.254.169.254", "link-local"),
            ("::ffff:0.0.0.0", "unspecified"),
        ] {
            assert_eq!(refused(ip.parse().unwrap()), Some(why), "{ip}");
        }
    }

    #[test]
    fn loopback_private_and_public_addresses_are_allowed() {
        for ip in [
            "127.0.0.1",
            "::1",
            "10.0.0.7",
            "192.168.1.20",
            "172.16.0.1",
            "fd00::1",
            "fec0::1",
            "93.184.216.34",
            "2001:db8::1",
            "::ffff:127.0.0.1",
        ] {
            assert_eq!(refused(ip.parse().unwrap()), None, "{ip}");
        }
    }

    #[test]
    fn refused_addresses_are_dropped_and_the_rest_kept_in_order() {
        let found = ips(&["169.254.169.254", "10.0.0.7", "0.0.0.0", "10.0.0.8"]);
        assert_eq!(
            usable("hooks.example", &found),
            Ok(ips(&["10.0.0.7", "10.0.0.8"]))
        );
    }

    #[test]
    fn with_nothing_left_the_first_refused_address_is_named() {
        let found = ips(&["fe80::1", "0.0.0.0"]);
        let err = usable("hooks.example", &found).unwrap_err();
        assert_eq!(
            err,
            Refused::Address {
                ip: "fe80::1".parse().unwrap(),
                why: "link-local"
            }
        );
        let words = err.to_string();
        assert!(words.starts_with("address refused: fe80::1 is link-local"));
        assert!(!words.contains("hooks.example"), "{words}");
        assert!(words.len() <= 200, "{words}");
        assert_eq!(usable("hooks.example", &[]), Err(Refused::Nothing));
    }

    #[test]
    fn localhost_must_resolve_to_loopback() {
        for host in ["localhost", "LOCALHOST.", "hooks.localhost"] {
            let found = ips(&["10.0.0.7", "::1", "127.0.0.1"]);
            assert_eq!(
                usable(host, &found),
                Ok(ips(&["::1", "127.0.0.1"])),
                "{host}"
            );
            let err = usable(host, &ips(&["10.0.0.7"])).unwrap_err();
            assert_eq!(
                err,
                Refused::Address {
                    ip: "10.0.0.7".parse().unwrap(),
                    why: "not loopback, as localhost must be"
                }
            );
        }
        assert_eq!(
            usable("notlocalhost", &ips(&["10.0.0.7"])),
            Ok(ips(&["10.0.0.7"]))
        );
    }
}
