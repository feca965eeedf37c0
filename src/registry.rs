//! registry.yaml (SPEC §1): parse the raw file, then validate it into a [`Registry`].
//!
//! Every error names the file, line and column and says what was expected; unknown keys
//! are errors. A [`Registry`] that exists is valid: the rest of the program never checks
//! it again.

use std::path::Path;
use std::time::Duration;

use indexmap::IndexMap;
use serde_saphyr::{Location, Spanned};

use crate::breaker::Policy;

mod raw;
mod server;
#[cfg(test)]
mod tests;
mod units;

use raw::{RawBreaker, RawRegistry, RawTimeouts};
use server::validate_server;
pub use server::{is_loopback, Cidr, Server, DEFAULT_ORIGINS};
pub use units::{parse_duration, parse_duration_max, parse_size, DURATION_MAX};

/// The longest timeout, cooldown or interval registry.yaml may set (SPEC §7): a value
/// beyond it is a typo, and would overflow the clock.
pub const SPAN_MAX: Duration = Duration::from_secs(30 * 86_400);

/// The four timeouts of SPEC §3.3 for one machine.
#[derive(Clone, Debug, PartialEq)]
pub struct Timeouts {
    pub connect: Duration,
    pub first_byte: Duration,
    pub idle: Duration,
    pub total: Duration,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Health {
    pub path: String,
    pub every: Duration,
}

/// One machine: one failure domain, one breaker.
#[derive(Clone, Debug, PartialEq)]
pub struct Machine {
    pub name: String,
    /// OpenAI base URL without a trailing slash, e.g. `http://gpu-box.local:11434/v1`.
    pub url: String,
    /// The environment variable holding this upstream's bearer key (never the key itself).
    pub api_key_env: Option<String>,
    pub health: Option<Health>,
    pub timeouts: Timeouts,
    pub breaker: Policy,
    pub max_concurrency: u32,
}

/// A logical model: where it runs and what the machine calls it.
#[derive(Clone, Debug, PartialEq)]
pub struct Model {
    pub name: String,
    /// Index into [`Registry::machines`].
    pub machine: usize,
    pub backend: String,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Route {
    pub name: String,
    pub keywords: Vec<String>,
    pub images: bool,
    /// Indexes into [`Registry::models`], in fallback order.
    pub chain: Vec<usize>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Telegram {
    pub token_env: String,
    pub chat_id: i64,
    pub api_url: Option<String>,
    /// Minutes after local midnight.
    pub digest_at: (u8, u8),
    pub timezone: String,
    pub alert_on_trip: bool,
    pub page_after_cycles: u32,
}

/// A validated registry.
#[derive(Clone, Debug, PartialEq)]
pub struct Registry {
    pub server: Server,
    pub machines: Vec<Machine>,
    pub models: Vec<Model>,
    /// `model_ids[m] == m`: lets a lone model lend out a one-element chain slice.
    pub model_ids: Vec<usize>,
    pub routes: Vec<Route>,
    /// The route for requests that hit no keyword (the one marked `default`, else the first).
    pub default_route: usize,
    pub telegram: Option<Telegram>,
    /// A short hash of the file's bytes, recorded with breaker transitions.
    pub version: String,
}

/// A registry that could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    #[error("{file}: cannot read: {source}")]
    Read {
        file: String,
        source: std::io::Error,
    },
    #[error("{file}{at}: {message}")]
    Invalid {
        file: String,
        /// `:line:column`, empty when the place is unknown.
        at: String,
        message: String,
    },
}

impl Registry {
    /// Reads and validates `path`.
    pub fn load(path: &Path) -> Result<Registry, RegistryError> {
        let text = std::fs::read_to_string(path).map_err(|source| RegistryError::Read {
            file: path.display().to_string(),
            source,
        })?;
        Registry::parse(&text, &path.display().to_string())
    }

    /// Parses and validates YAML text; `file` names it in errors.
    pub fn parse(text: &str, file: &str) -> Result<Registry, RegistryError> {
        let raw: RawRegistry = serde_saphyr::from_str(text).map_err(|e| {
            let at = e.location().map(place).unwrap_or_default();
            let mut message = first_line(&e.to_string());
            // A wrong type names no field: take the key written on that line.
            if let Some(key) = e.location().and_then(|loc| key_at(text, loc)) {
                if !message.contains(&key) {
                    message = format!("{key}: {message}");
                }
            }
            RegistryError::Invalid {
                file: file.to_string(),
                at,
                message,
            }
        })?;
        let mut registry = validate(raw).map_err(|(loc, message)| RegistryError::Invalid {
            file: file.to_string(),
            at: place(loc),
            message,
        })?;
        registry.version = version_of(text);
        Ok(registry)
    }

    pub fn machine_index(&self, name: &str) -> Option<usize> {
        self.machines.iter().position(|m| m.name == name)
    }

    /// `model@machine`, as headers, errors and `/status` name a target.
    pub fn target_name(&self, model: usize) -> String {
        let m = &self.models[model];
        format!("{}@{}", m.name, self.machines[m.machine].name)
    }
}

fn place(loc: Location) -> String {
    if loc.line() == 0 {
        String::new()
    } else {
        format!(":{}:{}", loc.line(), loc.column())
    }
}

/// serde-saphyr's message may carry a source snippet after its first line; we print our
/// own `file:line:column` prefix instead.
fn first_line(msg: &str) -> String {
    let line = msg.lines().next().unwrap_or(msg).trim();
    let line = line.strip_prefix("error: ").unwrap_or(line);
    // "line 2 column 3: unknown field ..." -> "unknown field ..."
    let message = match line
        .strip_prefix("line ")
        .and_then(|rest| rest.split_once(": "))
    {
        Some((_, message)) => message,
        None => line,
    };
    // Say it in the words of someone editing registry.yaml, not of the YAML library.
    if let Some(rest) = message.strip_prefix("duplicate mapping key: ") {
        let key = rest.split(", set ").next().unwrap_or(rest);
        return format!("duplicate key '{key}'; expected each name once");
    }
    if let Some(ty) = message.strip_prefix("invalid ") {
        if ty.starts_with('u') || ty.starts_with('i') {
            return format!("invalid value; expected a whole number ({ty})");
        }
        if ty.starts_with('f') {
            return format!("invalid value; expected a number ({ty})");
        }
    }
    message.to_string()
}

/// The mapping key written on the error's line, left of the error's column (`key: value`).
fn key_at(text: &str, loc: Location) -> Option<String> {
    let line = text
        .lines()
        .nth(usize::try_from(loc.line()).ok()?.checked_sub(1)?)?;
    let upto: String = line
        .chars()
        .take(usize::try_from(loc.column()).ok()?.saturating_sub(1))
        .collect();
    let before_colon = upto.rsplit_once(':')?.0;
    let key = before_colon
        .rsplit(['{', ',', '-'])
        .next()?
        .trim()
        .trim_matches('"');
    (!key.is_empty()
        && key
            .chars()
            .all(|c| c.is_alphanumeric() || "_-.".contains(c)))
    .then(|| key.to_string())
}

fn version_of(text: &str) -> String {
    // FNV-1a: stable across runs and platforms, enough to tell two files apart.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016x}")
}

type Invalid = (Location, String);

fn err<T>(at: Location, message: impl Into<String>) -> Result<T, Invalid> {
    Err((at, message.into()))
}

/// A timeout, cooldown or interval: above zero, at most [`SPAN_MAX`].
fn duration(
    s: &Option<Spanned<String>>,
    fallback: Duration,
    what: &str,
) -> Result<Duration, Invalid> {
    duration_within(s, fallback, what, SPAN_MAX)
}

/// A duration above zero and at most `max`, or `fallback` when not written.
fn duration_within(
    s: &Option<Spanned<String>>,
    fallback: Duration,
    what: &str,
    max: Duration,
) -> Result<Duration, Invalid> {
    match s {
        None => Ok(fallback),
        Some(s) => {
            let d = parse_duration_max(&s.value, max)
                .map_err(|e| (s.referenced, format!("{what}: {e}")))?;
            if d.is_zero() {
                return err(
                    s.referenced,
                    format!("{what}: expected a duration above zero"),
                );
            }
            Ok(d)
        }
    }
}

fn timeouts(raw: &RawTimeouts, base: &Timeouts) -> Result<Timeouts, Invalid> {
    Ok(Timeouts {
        connect: duration(&raw.connect, base.connect, "timeouts.connect")?,
        first_byte: duration(&raw.first_byte, base.first_byte, "timeouts.first_byte")?,
        idle: duration(&raw.idle, base.idle, "timeouts.idle")?,
        total: duration(&raw.total, base.total, "timeouts.total")?,
    })
}

fn policy(raw: &RawBreaker, base: &Policy) -> Result<Policy, Invalid> {
    let count = |v: &Option<Spanned<u32>>, fallback: u32, what: &str| match v {
        Some(v) if v.value == 0 => err(
            v.referenced,
            format!("breaker.{what}: expected a whole number of 1 or more"),
        ),
        Some(v) => Ok(v.value),
        None => Ok(fallback),
    };
    let p = Policy {
        failure_threshold: count(
            &raw.failure_threshold,
            base.failure_threshold,
            "failure_threshold",
        )?,
        cooldown: duration(&raw.cooldown, base.cooldown, "breaker.cooldown")?,
        backoff: match &raw.backoff {
            Some(b) if !(b.value.is_finite() && b.value >= 1.0) => {
                return err(
                    b.referenced,
                    "breaker.backoff: expected a number of 1.0 or more",
                );
            }
            Some(b) => b.value,
            None => base.backoff,
        },
        max_cooldown: duration(&raw.max_cooldown, base.max_cooldown, "breaker.max_cooldown")?,
        success_threshold: count(
            &raw.success_threshold,
            base.success_threshold,
            "success_threshold",
        )?,
    };
    if p.max_cooldown < p.cooldown {
        let at = raw
            .max_cooldown
            .as_ref()
            .or(raw.cooldown.as_ref())
            .map_or(Location::UNKNOWN, |s| s.referenced);
        return err(
            at,
            "breaker.max_cooldown: expected a value no smaller than breaker.cooldown",
        );
    }
    Ok(p)
}

fn concurrency(v: &Option<Spanned<u32>>, fallback: u32) -> Result<u32, Invalid> {
    match v {
        Some(v) if v.value == 0 => err(
            v.referenced,
            "max_concurrency: expected a whole number of 1 or more",
        ),
        Some(v) => Ok(v.value),
        None => Ok(fallback),
    }
}

fn validate(raw: RawRegistry) -> Result<Registry, Invalid> {
    let server = validate_server(&raw.server)?;
    let base_timeouts = Timeouts {
        connect: Duration::from_secs(5),
        first_byte: Duration::from_secs(5),
        idle: Duration::from_secs(30),
        total: Duration::from_secs(600),
    };
    let d_timeouts = timeouts(&raw.defaults.timeouts, &base_timeouts)?;
    let d_policy = policy(&raw.defaults.breaker, &Policy::default())?;
    let d_concurrency = concurrency(&raw.defaults.max_concurrency, 8)?;

    if raw.machines.value.is_empty() {
        return err(
            raw.machines.referenced,
            "machines: expected at least one machine",
        );
    }
    let mut machines = Vec::with_capacity(raw.machines.value.len());
    for (name, m) in &raw.machines.value {
        let url = validate_url(&m.url)?;
        let health = match &m.health {
            None => None,
            Some(h) => {
                if !h.path.value.starts_with('/') {
                    return err(
                        h.path.referenced,
                        "health.path: expected a path starting with '/'",
                    );
                }
                let every = duration(&Some(h.every.clone()), Duration::ZERO, "health.every")?;
                Some(crate::registry::Health {
                    path: h.path.value.clone(),
                    every,
                })
            }
        };
        machines.push(Machine {
            name: name.clone(),
            url,
            api_key_env: m.api_key_env.clone(),
            health,
            timeouts: timeouts(&m.timeouts, &d_timeouts)?,
            breaker: policy(&m.breaker, &d_policy)?,
            max_concurrency: concurrency(&m.max_concurrency, d_concurrency)?,
        });
    }

    let models = validate_models(&raw.models, &machines)?;
    let (routes, default_route) = validate_routes(&raw.routes, &models)?;
    let telegram = raw.telegram.as_ref().map(validate_telegram).transpose()?;
    Ok(Registry {
        server,
        machines,
        model_ids: (0..models.len()).collect(),
        models,
        routes,
        default_route,
        telegram,
        version: String::new(),
    })
}

fn validate_url(s: &Spanned<String>) -> Result<String, Invalid> {
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
fn without_userinfo(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    match rest[..authority_end].rfind('@') {
        Some(at) => format!("{scheme}://***{}", &rest[at..]),
        None => url.to_string(),
    }
}

fn validate_models(
    raw: &Spanned<IndexMap<String, raw::RawModel>>,
    machines: &[Machine],
) -> Result<Vec<Model>, Invalid> {
    if raw.value.is_empty() {
        return err(raw.referenced, "models: expected at least one model");
    }
    let mut models = Vec::with_capacity(raw.value.len());
    for (name, m) in &raw.value {
        let Some(machine) = machines.iter().position(|x| x.name == m.machine.value) else {
            let known: Vec<&str> = machines.iter().map(|x| x.name.as_str()).collect();
            return err(
                m.machine.referenced,
                format!(
                    "model '{name}': unknown machine '{}'; expected one of: {}",
                    m.machine.value,
                    known.join(", ")
                ),
            );
        };
        if m.name.trim().is_empty() {
            return err(
                m.machine.referenced,
                format!("model '{name}': expected a backend name"),
            );
        }
        models.push(Model {
            name: name.clone(),
            machine,
            backend: m.name.clone(),
        });
    }
    Ok(models)
}

fn validate_routes(
    raw: &Spanned<Vec<raw::RawRoute>>,
    models: &[Model],
) -> Result<(Vec<Route>, usize), Invalid> {
    if raw.value.is_empty() {
        return err(raw.referenced, "routes: expected at least one route");
    }
    let mut routes: Vec<Route> = Vec::with_capacity(raw.value.len());
    let mut default_route = None;
    for r in &raw.value {
        let name = &r.name.value;
        if name.is_empty() || name == "auto" {
            return err(
                r.name.referenced,
                format!("route name '{name}' is reserved or empty; expected another name"),
            );
        }
        if routes.iter().any(|x| &x.name == name) {
            return err(
                r.name.referenced,
                format!("duplicate route name '{name}'; expected each route name once"),
            );
        }
        if models.iter().any(|m| &m.name == name) {
            return err(
                r.name.referenced,
                format!("route name '{name}' is also a model name; expected distinct names"),
            );
        }
        let chain_raw = match &r.chain {
            Some(c) if !c.value.is_empty() => c,
            Some(c) => {
                return err(
                    c.referenced,
                    format!("route '{name}': expected a chain of at least one model"),
                )
            }
            None => {
                return err(
                    r.name.referenced,
                    format!("route '{name}': missing chain (expected a list of models)"),
                )
            }
        };
        let mut chain = Vec::with_capacity(chain_raw.value.len());
        for entry in &chain_raw.value {
            let Some(i) = models.iter().position(|m| m.name == entry.value) else {
                let known: Vec<&str> = models.iter().map(|m| m.name.as_str()).collect();
                return err(
                    entry.referenced,
                    format!(
                        "route '{name}': unknown model '{}' in chain; expected one of: {}",
                        entry.value,
                        known.join(", ")
                    ),
                );
            };
            chain.push(i);
        }
        let mut keywords: Vec<String> = Vec::with_capacity(r.keywords.len());
        for k in &r.keywords {
            let k_norm = k.value.trim().to_lowercase();
            if k_norm.is_empty() {
                return err(
                    k.referenced,
                    format!("route '{name}': expected a non-empty keyword"),
                );
            }
            if !keywords.contains(&k_norm) {
                keywords.push(k_norm);
            }
        }
        if let Some(d) = &r.default {
            if d.value {
                if let Some(first) = default_route {
                    let first: &Route = &routes[first];
                    return err(
                        d.referenced,
                        format!("route '{name}': a second default route (the first is '{}'); expected one", first.name),
                    );
                }
                default_route = Some(routes.len());
            }
        }
        routes.push(Route {
            name: name.clone(),
            keywords,
            images: r.images,
            chain,
        });
    }
    Ok((routes, default_route.unwrap_or(0)))
}

fn validate_telegram(raw: &raw::RawTelegram) -> Result<Telegram, Invalid> {
    let digest_at = parse_hhmm(&raw.digest_at.value).ok_or_else(|| {
        (
            raw.digest_at.referenced,
            format!(
                "telegram.digest_at: expected a time like \"08:00\", got '{}'",
                raw.digest_at.value
            ),
        )
    })?;
    if jiff::tz::TimeZone::get(&raw.timezone.value).is_err() {
        return err(
            raw.timezone.referenced,
            format!("telegram.timezone: unknown time zone '{}'; expected an IANA name like Europe/Berlin", raw.timezone.value),
        );
    }
    let api_url = raw.api_url.as_ref().map(validate_url).transpose()?;
    Ok(Telegram {
        token_env: raw.token_env.clone(),
        chat_id: raw.chat_id,
        api_url,
        digest_at,
        timezone: raw.timezone.value.clone(),
        alert_on_trip: raw.alert_on_trip,
        page_after_cycles: raw.page_after_cycles.max(1),
    })
}

fn parse_hhmm(s: &str) -> Option<(u8, u8)> {
    let (h, m) = s.split_once(':')?;
    let (h, m): (u8, u8) = (h.parse().ok()?, m.parse().ok()?);
    (h < 24 && m < 60 && s.len() == 5).then_some((h, m))
}
