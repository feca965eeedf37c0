//! `cluster:` and each machine's `shared:` (README "Several routers"): which Redis names the
//! routers that share verdicts, and which machines' verdicts are shared, keyed by their normalised
//! URL; and `cluster.tasks` with its bounds, where the task queue lives.

use std::net::IpAddr;
use std::time::Duration;

use serde_saphyr::Spanned;

use super::durations::duration_within;
use super::invalid::{err, Invalid};
use super::raw::{RawCluster, SharedRaw};
use super::{Cluster, QueueMode};

/// Longest a Redis operation may be given: slower than this, Redis is down.
const TIMEOUT_MAX: Duration = Duration::from_secs(5);
/// The probe lease's life (README "Several routers": `PX 15000`), and the longest this registry may
/// set.
pub const PROBE_LEASE: Duration = Duration::from_secs(15);
const PROBE_LEASE_MAX: Duration = Duration::from_secs(300);
/// A running task's lease in Redis (README "Several routers": the shared queue), and the
/// longest this registry may set: a dead router's tasks wait this long for another.
pub const TASK_LEASE: Duration = Duration::from_secs(30);
const TASK_LEASE_MAX: Duration = Duration::from_secs(3600);
/// Each task write at most (it waits for Redis's fsync), and the longest.
pub const TASK_TIMEOUT: Duration = Duration::from_secs(1);
const TASK_TIMEOUT_MAX: Duration = Duration::from_secs(30);

pub(super) fn validate_cluster(raw: &RawCluster) -> Result<Cluster, Invalid> {
    let env = &raw.redis_url_env;
    if !is_name(&env.value, 128) {
        return err(
            env.referenced,
            "cluster.redis_url_env: expected the name of an environment variable (letters, digits, '_') holding the Redis URL",
        );
    }
    let word = |v: &Option<Spanned<String>>, what: &str, fallback: String| match v {
        None => Ok(fallback),
        Some(s) if is_word(&s.value) => Ok(s.value.clone()),
        Some(s) => err(
            s.referenced,
            format!(
                "cluster.{what}: expected 1 to 64 letters, digits, '-', '_' or '.', got '{}'",
                crate::text::bounded(&s.value)
            ),
        ),
    };
    let prefix = word(&raw.prefix, "prefix", "labrouter".into())?;
    let node = word(&raw.node, "node", default_node())?;
    let timeout = duration_within(
        &raw.timeout,
        Duration::from_millis(50),
        "cluster.timeout",
        TIMEOUT_MAX,
    )?;
    let probe_lease = duration_within(
        &raw.probe_lease,
        PROBE_LEASE,
        "cluster.probe_lease",
        PROBE_LEASE_MAX,
    )?;
    if let Some(s) = raw
        .probe_lease
        .as_ref()
        .filter(|_| probe_lease < timeout * 4)
    {
        return err(
            s.referenced,
            "cluster.probe_lease: expected at least four times cluster.timeout, so its holder can renew it in time",
        );
    }
    let (tasks, task_lease, task_timeout) = validate_queue(raw)?;
    Ok(Cluster {
        redis_url_env: env.value.clone(),
        prefix,
        node,
        timeout,
        probe_lease,
        tasks,
        assume_durable: raw.assume_durable.unwrap_or(false),
        task_lease,
        task_timeout,
    })
}

/// `cluster.tasks`, `cluster.task_lease` and `cluster.task_timeout`. A lease must leave its
/// holder time for four renewals' writes, as the probe lease does.
fn validate_queue(raw: &RawCluster) -> Result<(QueueMode, Duration, Duration), Invalid> {
    let mode = match &raw.tasks {
        None => QueueMode::Local,
        Some(s) if s.value == "local" => QueueMode::Local,
        Some(s) if s.value == "shared" => QueueMode::Shared,
        Some(s) => {
            return err(
                s.referenced,
                format!(
                    "cluster.tasks: expected local or shared, got '{}'",
                    crate::text::bounded(&s.value)
                ),
            )
        }
    };
    let lease = duration_within(
        &raw.task_lease,
        TASK_LEASE,
        "cluster.task_lease",
        TASK_LEASE_MAX,
    )?;
    let timeout = duration_within(
        &raw.task_timeout,
        TASK_TIMEOUT,
        "cluster.task_timeout",
        TASK_TIMEOUT_MAX,
    )?;
    if lease < timeout * 4 {
        return match (&raw.task_lease, &raw.task_timeout) {
            (Some(s), _) => err(
                s.referenced,
                "cluster.task_lease: expected at least four times cluster.task_timeout, so its holder can renew it in time",
            ),
            (None, Some(s)) => err(
                s.referenced,
                "cluster.task_timeout: expected at most a quarter of cluster.task_lease, so a lease's holder can renew it in time",
            ),
            (None, None) => Ok((mode, lease, timeout)),
        };
    }
    Ok((mode, lease, timeout))
}

/// This host's name as a node name; `labrouter` when it has none usable.
fn default_node() -> String {
    let host = sysinfo::System::host_name().unwrap_or_default();
    let host: String = host
        .split('.')
        .next()
        .unwrap_or_default()
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_'))
        .take(64)
        .collect();
    if host.is_empty() {
        "labrouter".into()
    } else {
        host
    }
}

fn is_word(s: &str) -> bool {
    (1..=64).contains(&s.len())
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

fn is_name(s: &str, max: usize) -> bool {
    (1..=max).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// Whether machine `name` at `url` shares its verdict: `auto` (or unset) shares it unless
/// the URL is loopback or link-local, a different server on every host.
pub(super) fn shared(
    name: &str,
    raw: Option<&Spanned<SharedRaw>>,
    url: &str,
) -> Result<bool, Invalid> {
    match raw.map(|s| (&s.value, s.referenced)) {
        Some((SharedRaw::Bool(b), _)) => Ok(*b),
        None => Ok(!host_is_local(url)),
        Some((SharedRaw::Word(w), _)) if w == "auto" => Ok(!host_is_local(url)),
        Some((SharedRaw::Word(w), at)) => err(
            at,
            format!(
                "machine '{name}': shared: expected auto, true or false, got '{}'",
                crate::text::bounded(w)
            ),
        ),
    }
}

/// The key a shared verdict is stored under: scheme and host in lower case, the port
/// explicit, the path without a trailing slash (`http://gpu-box.local:11434/v1`).
pub fn share_key(url: &str) -> String {
    let Ok(u) = reqwest::Url::parse(url) else {
        return url.to_ascii_lowercase();
    };
    let host = u.host_str().unwrap_or_default().to_ascii_lowercase();
    let port = u.port_or_known_default().unwrap_or(0);
    let path = u.path().trim_end_matches('/');
    format!("{}://{host}:{port}{path}", u.scheme())
}

/// Loopback or link-local: `localhost`, 127.0.0.0/8, ::1, 169.254.0.0/16, fe80::/10.
fn host_is_local(url: &str) -> bool {
    let Ok(u) = reqwest::Url::parse(url) else {
        return false;
    };
    match u.host() {
        Some(url::Host::Domain(d)) => {
            let d = d.trim_end_matches('.').to_ascii_lowercase();
            d == "localhost" || d.ends_with(".localhost")
        }
        Some(url::Host::Ipv4(ip)) => is_local_ip(IpAddr::V4(ip)),
        Some(url::Host::Ipv6(ip)) => is_local_ip(IpAddr::V6(ip)),
        None => false,
    }
}

pub fn is_local_ip(ip: IpAddr) -> bool {
    match ip.to_canonical() {
        IpAddr::V4(v4) => v4.is_loopback() || v4.is_link_local(),
        IpAddr::V6(v6) => v6.is_loopback() || (v6.segments()[0] & 0xffc0) == 0xfe80,
    }
}
