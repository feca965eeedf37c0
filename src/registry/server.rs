//! The `server:` block of registry.yaml: where and how the router listens, and every bound
//! README "Safety" puts on what reaches it.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use serde_saphyr::Spanned;

use super::durations::{duration, duration_within};
use super::invalid::{err, Invalid};
use super::raw::RawServer;
use super::units::{parse_size, DURATION_MAX};

/// `server.max_connections` when unset.
pub const MAX_CONNECTIONS_DEFAULT: usize = 1024;

/// The largest `server.max_connections` accepted: past it the number is a typo, and each
/// connection holds a file descriptor and buffers.
pub const MAX_CONNECTIONS_LIMIT: usize = 1_000_000;

/// `server.max_detached` when unset.
pub const MAX_DETACHED_DEFAULT: usize = 64;

/// The largest `server.max_detached` accepted: past it the number is a typo.
pub const MAX_DETACHED_LIMIT: usize = 100_000;

/// The largest `server.max_detached_bytes` accepted (16 GiB): past it the size is a typo.
pub const MAX_DETACHED_BYTES_LIMIT: u64 = 16 << 30;
/// An upload is held in memory whole: at most 4GiB each.
const MAX_UPLOAD_LIMIT: u64 = 4 << 30;

/// The longest `server.body_timeout` accepted: a body still arriving after an hour holds
/// its connection and its handler for nothing a home lab sends.
pub const BODY_TIMEOUT_MAX: Duration = Duration::from_secs(3600);

#[derive(Clone, Debug, PartialEq)]
pub struct Server {
    pub listen: SocketAddr,
    pub api_keys_env: Option<String>,
    pub state_dir: PathBuf,
    pub max_body: usize,
    /// How long SIGTERM lets requests in flight finish.
    pub shutdown_grace: Duration,
    /// Host names (no port, lower case) accepted besides the loopback ones when no keys are
    /// set (DNS rebinding, README "Safety").
    pub allowed_hosts: Vec<String>,
    /// Origin patterns (`*` matches any run of characters) a browser page may call from
    /// without a key; Ollama's defaults first, then the registry's own.
    pub allowed_origins: Vec<String>,
    /// Client networks that may call the inference routes without a key.
    pub trusted_networks: Vec<Cidr>,
    /// A request's headers must arrive within this (slowloris).
    pub header_timeout: Duration,
    /// A kept-alive connection with no request for this long is closed.
    pub idle_timeout: Duration,
    /// Connections open at once; more wait in the kernel's accept queue.
    pub max_connections: usize,
    /// A non-stream upstream answer larger than this is `malformed` for its machine.
    pub max_upstream_body: usize,
    /// Ledger rows older than this are pruned.
    pub keep_ledger: Duration,
    /// Responses kept for their conversations (`previous_response_id`, `GET
    /// /v1/responses/{id}`) are pruned after this.
    pub keep_responses: Duration,
    /// A request's whole body must arrive within this: a body dripped a byte at a time
    /// never stalls for `idle_timeout`, and would hold its connection for ever.
    pub body_timeout: Duration,
    /// Keyed requests whose clients all left that may run on to their end at once (0: none
    /// does); past it such a request ends with its client, as an unkeyed one does.
    pub max_detached: usize,
    /// The request bytes those detached requests may hold together.
    pub max_detached_bytes: usize,
    /// An upload's whole multipart body (it is held, so the chain can send it again);
    /// replaces `max_body` on the upload endpoints.
    pub max_upload: usize,
    /// Uploads held at once; more wait for a slot, then get 503 `busy`.
    pub max_uploads_in_flight: usize,
    /// One line per request at `info` (README "Watching it").
    pub access_log: bool,
}

/// Ollama's default origins (its `envconfig.AllowedOrigins`), with `[::1]` as README "Safety" adds.
pub const DEFAULT_ORIGINS: &[&str] = &[
    "http://localhost",
    "https://localhost",
    "http://localhost:*",
    "https://localhost:*",
    "http://127.0.0.1",
    "https://127.0.0.1",
    "http://127.0.0.1:*",
    "https://127.0.0.1:*",
    "http://[::1]",
    "https://[::1]",
    "http://[::1]:*",
    "https://[::1]:*",
    "http://0.0.0.0",
    "https://0.0.0.0",
    "http://0.0.0.0:*",
    "https://0.0.0.0:*",
    "app://*",
    "file://*",
    "tauri://*",
    "vscode-webview://*",
    "vscode-file://*",
];

/// An IP network such as `192.168.1.0/24` or `fd00::/8`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cidr {
    net: IpAddr,
    bits: u8,
}

impl Cidr {
    pub fn parse(s: &str) -> Result<Cidr, String> {
        let expected = || format!("expected a network like 192.168.1.0/24 or fd00::/8, got '{s}'");
        let (ip, bits) = match s.trim().split_once('/') {
            Some((ip, bits)) => (ip, Some(bits)),
            None => (s.trim(), None),
        };
        let net: IpAddr = ip.parse().map_err(|_| expected())?;
        let net = net.to_canonical();
        let max = if net.is_ipv4() { 32 } else { 128 };
        let bits = match bits {
            None => max,
            Some(b) => b
                .parse::<u8>()
                .ok()
                .filter(|&b| b <= max)
                .ok_or_else(expected)?,
        };
        Ok(Cidr { net, bits })
    }

    /// Whether `ip` (an IPv4-mapped IPv6 address counts as its IPv4 address) is inside.
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.net, ip.to_canonical()) {
            (IpAddr::V4(n), IpAddr::V4(a)) => prefix_eq(&n.octets(), &a.octets(), self.bits),
            (IpAddr::V6(n), IpAddr::V6(a)) => prefix_eq(&n.octets(), &a.octets(), self.bits),
            _ => false,
        }
    }
}

impl std::fmt::Display for Cidr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.net, self.bits)
    }
}

fn prefix_eq(a: &[u8], b: &[u8], bits: u8) -> bool {
    let whole = usize::from(bits / 8);
    let rest = bits % 8;
    if a[..whole] != b[..whole] {
        return false;
    }
    if rest == 0 {
        return true;
    }
    let mask = 0xffu8 << (8 - rest);
    a[whole] & mask == b[whole] & mask
}

/// Loopback, IPv4-mapped IPv6 included (`::ffff:127.0.0.1` is 127.0.0.1).
pub fn is_loopback(ip: IpAddr) -> bool {
    ip.to_canonical().is_loopback()
}

pub(super) fn validate_server(raw: &RawServer) -> Result<Server, Invalid> {
    let listen = match &raw.listen {
        None => SocketAddr::from(([127, 0, 0, 1], 8080)),
        Some(s) => parse_listen(&s.value).ok_or_else(|| {
            (
                s.referenced,
                format!(
                    "server.listen: expected an address like 127.0.0.1:8080, got '{}'",
                    s.value
                ),
            )
        })?,
    };
    let trusted_networks = raw
        .trusted_networks
        .iter()
        .map(|c| {
            Cidr::parse(&c.value)
                .map_err(|e| (c.referenced, format!("server.trusted_networks: {e}")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Server {
        listen,
        api_keys_env: raw.api_keys_env.clone(),
        state_dir: PathBuf::from(raw.state_dir.as_deref().unwrap_or("./state")),
        max_body: size(&raw.max_body, 16 << 20, "server.max_body")?,
        access_log: raw.access_log.unwrap_or(true),
        max_upstream_body: size(&raw.max_upstream_body, 64 << 20, "server.max_upstream_body")?,
        shutdown_grace: duration(
            &raw.shutdown_grace,
            Duration::from_secs(30),
            "server.shutdown_grace",
        )?,
        header_timeout: duration(
            &raw.header_timeout,
            Duration::from_secs(10),
            "server.header_timeout",
        )?,
        idle_timeout: duration(
            &raw.idle_timeout,
            Duration::from_secs(60),
            "server.idle_timeout",
        )?,
        body_timeout: duration_within(
            &raw.body_timeout,
            Duration::from_secs(60),
            "server.body_timeout",
            BODY_TIMEOUT_MAX,
        )?,
        max_connections: whole(
            &raw.max_connections,
            MAX_CONNECTIONS_DEFAULT,
            (1, MAX_CONNECTIONS_LIMIT),
            "server.max_connections",
        )?,
        allowed_hosts: allowed_hosts(raw)?,
        allowed_origins: allowed_origins(raw)?,
        trusted_networks,
        ..kept_and_detached(raw)?
    })
}

/// What the router keeps and for how long (`keep_ledger`, `keep_responses`), the bounds
/// on keyed requests that run on without their clients, and on held uploads; every other
/// field is a placeholder that [`validate_server`] fills.
fn kept_and_detached(raw: &RawServer) -> Result<Server, Invalid> {
    Ok(Server {
        // Retention periods, not timeouts: up to DURATION_MAX.
        keep_ledger: duration_within(
            &raw.keep_ledger,
            Duration::from_secs(90 * 86_400),
            "server.keep_ledger",
            DURATION_MAX,
        )?,
        keep_responses: duration_within(
            &raw.keep_responses,
            Duration::from_secs(86_400),
            "server.keep_responses",
            DURATION_MAX,
        )?,
        max_detached: whole(
            &raw.max_detached,
            MAX_DETACHED_DEFAULT,
            (0, MAX_DETACHED_LIMIT),
            "server.max_detached",
        )?,
        max_detached_bytes: size_within(
            &raw.max_detached_bytes,
            64 << 20,
            "server.max_detached_bytes",
            MAX_DETACHED_BYTES_LIMIT,
        )?,
        max_upload: size_within(
            &raw.max_upload,
            64 << 20,
            "server.max_upload",
            MAX_UPLOAD_LIMIT,
        )?,
        max_uploads_in_flight: whole(
            &raw.max_uploads_in_flight,
            8,
            (1, 1024),
            "server.max_uploads_in_flight",
        )?,
        ..Server::placeholder()
    })
}

/// `server.allowed_origins`, each after Ollama's own defaults.
fn allowed_origins(raw: &RawServer) -> Result<Vec<String>, Invalid> {
    let mut allowed_origins: Vec<String> = DEFAULT_ORIGINS.iter().map(|s| s.to_string()).collect();
    for o in &raw.allowed_origins {
        let v = o.value.trim().trim_end_matches('/').to_ascii_lowercase();
        if v.is_empty() || !v.contains("://") {
            return err(
                o.referenced,
                format!(
                    "server.allowed_origins: expected an origin like http://localhost:3000 (a '*' matches anything), got '{}'",
                    o.value
                ),
            );
        }
        allowed_origins.push(v);
    }
    Ok(allowed_origins)
}

/// `server.allowed_hosts`: host names, without scheme or port.
fn allowed_hosts(raw: &RawServer) -> Result<Vec<String>, Invalid> {
    let mut allowed_hosts = Vec::with_capacity(raw.allowed_hosts.len());
    for h in &raw.allowed_hosts {
        let v = h.value.trim().to_ascii_lowercase();
        if v.is_empty() || v.contains(['/', ' ', ':']) && !v.starts_with('[') {
            return err(
                h.referenced,
                format!(
                    "server.allowed_hosts: expected a host name without scheme or port, like mac-mini.local, got '{}'",
                    h.value
                ),
            );
        }
        allowed_hosts.push(v);
    }
    Ok(allowed_hosts)
}

impl Server {
    /// Every field at a neutral value, for struct-update syntax while validating.
    fn placeholder() -> Server {
        Server {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            api_keys_env: None,
            state_dir: PathBuf::new(),
            max_body: 0,
            shutdown_grace: Duration::ZERO,
            allowed_hosts: Vec::new(),
            allowed_origins: Vec::new(),
            trusted_networks: Vec::new(),
            header_timeout: Duration::ZERO,
            idle_timeout: Duration::ZERO,
            max_connections: 0,
            max_upstream_body: 0,
            keep_ledger: Duration::ZERO,
            keep_responses: Duration::ZERO,
            body_timeout: Duration::ZERO,
            max_detached: 0,
            max_detached_bytes: 0,
            max_upload: 0,
            max_uploads_in_flight: 0,
            access_log: true,
        }
    }
}

/// A size above zero, or `fallback` when not written.
pub(super) fn size(
    v: &Option<Spanned<String>>,
    fallback: usize,
    what: &str,
) -> Result<usize, Invalid> {
    match v {
        None => Ok(fallback),
        Some(s) => match parse_size(&s.value) {
            Ok(0) => err(s.referenced, format!("{what}: expected a size above zero")),
            Ok(n) => Ok(n),
            Err(e) => err(s.referenced, format!("{what}: {e}")),
        },
    }
}

/// A whole number within `(min, max)`, or `fallback` when not written.
fn whole(
    v: &Option<Spanned<u32>>,
    fallback: usize,
    (min, max): (usize, usize),
    what: &str,
) -> Result<usize, Invalid> {
    match v {
        None => Ok(fallback),
        Some(v) => match usize::try_from(v.value) {
            Ok(n) if (min..=max).contains(&n) => Ok(n),
            _ => err(
                v.referenced,
                format!("{what}: expected a whole number from {min} to {max}"),
            ),
        },
    }
}

/// [`size`], at most `max` bytes.
fn size_within(
    v: &Option<Spanned<String>>,
    fallback: usize,
    what: &str,
    max: u64,
) -> Result<usize, Invalid> {
    let n = size(v, fallback, what)?;
    match v {
        Some(v) if n as u64 > max => err(
            v.referenced,
            format!("{what}: expected a size of at most {}GiB", max >> 30),
        ),
        _ => Ok(n),
    }
}

/// `host:port` where host is an IP address or `localhost`.
fn parse_listen(s: &str) -> Option<SocketAddr> {
    if let Ok(addr) = s.parse() {
        return Some(addr);
    }
    let port = s.strip_prefix("localhost:")?.parse().ok()?;
    Some(SocketAddr::new(IpAddr::from([127, 0, 0, 1]), port))
}
