//! Target 1: `Registry::parse` on raw text and on mutated valid registries.

use arbitrary::Unstructured;
use labrouter::registry::{Registry, SPAN_MAX};

use super::harness::{accepted, nasty, one_in, pick, show, NASTY};

type R<T> = arbitrary::Result<T>;

/// A YAML document as a tree, rendered in block or flow style.
#[derive(Clone, Debug)]
enum Y {
    S(String),
    Map(Vec<(String, Y)>),
    Seq(Vec<Y>),
    /// `&name` before the node.
    Anchor(String, Box<Y>),
    /// `*name`.
    Alias(String),
    /// A scalar inside `depth` flow sequences or mappings, written without recursion.
    Deep(usize, bool, String),
}

fn s(v: &str) -> Y {
    Y::S(v.to_string())
}

fn map(entries: Vec<(&str, Y)>) -> Y {
    Y::Map(
        entries
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
    )
}

const DURATIONS: &[&str] = &[
    "250ms", "1s", "5s", "20s", "60s", "1m30s", "10m", "1h", "1d",
];
const MACHINES: &[&str] = &["gpu-box", "ubuntu-box", "local", "mac.studio", "m_é", "x"];
const MODELS: &[&str] = &["coder-gpu", "coder-cpu", "vision", "small", "émbed", "m1"];
const ROUTES: &[&str] = &["code", "vision-r", "chat", "other", "r:1"];

/// A registry that validates, with random optional parts.
fn valid(u: &mut Unstructured<'_>) -> R<Y> {
    let mut doc = Vec::new();
    let mut server = Vec::new();
    if u.arbitrary()? {
        server.push((
            "listen",
            s(pick(
                u,
                &["127.0.0.1:8080", "[::1]:0", "localhost:9", "0.0.0.0:1"],
            )?),
        ));
    }
    if u.arbitrary()? {
        server.push(("state_dir", s("./state")));
    }
    let mut max_body = 16 << 20;
    if u.arbitrary()? {
        let (written, bytes) = *pick(
            u,
            &[
                ("16MiB", 16 << 20),
                ("1", 1),
                ("512KiB", 512 << 10),
                ("1GB", 1_000_000_000),
            ],
        )?;
        max_body = bytes;
        server.push(("max_body", s(written)));
    }
    if u.arbitrary()? {
        server.push(("shutdown_grace", s(pick(u, DURATIONS)?)));
    }
    if u.arbitrary()? {
        server.push(("api_keys_env", s("LABROUTER_API_KEYS")));
    }
    if !server.is_empty() {
        doc.push(("server", map(server)));
    }
    // What a machine inherits: `max_concurrency` 8 either way, `task_slots` maybe more than 1.
    let mut default_slots = 1;
    if u.arbitrary()? {
        let mut d = vec![
            ("timeouts", timeouts(u)?),
            ("breaker", breaker(u)?),
            ("max_concurrency", s("8")),
        ];
        if u.arbitrary()? {
            default_slots = u.int_in_range(1..=8u32)?;
            d.push(("task_slots", Y::S(default_slots.to_string())));
        }
        doc.push(("defaults", map(d)));
    }
    let n_machines = u.int_in_range(1..=4)?;
    let mut machines = Vec::new();
    for name in &MACHINES[..n_machines] {
        let mut m = vec![(
            "url",
            Y::S(format!(
                "http://{}.local:{}/v1",
                name.replace('_', "-"),
                1 + u.int_in_range(0..=65534u32)?
            )),
        )];
        if u.arbitrary()? {
            m.push((
                "health",
                map(vec![
                    ("path", s("/models")),
                    ("every", s(pick(u, DURATIONS)?)),
                ]),
            ));
        }
        if u.arbitrary()? {
            m.push(("timeouts", timeouts(u)?));
        }
        if u.arbitrary()? {
            m.push(("breaker", breaker(u)?));
        }
        let mut concurrency = 8;
        if u.arbitrary()? {
            concurrency = u.int_in_range(1..=64u32)?;
            m.push(("max_concurrency", Y::S(concurrency.to_string())));
        }
        // Its own task_slots, or one it must write because the defaults' is too many.
        if u.arbitrary()? || default_slots > concurrency {
            m.push((
                "task_slots",
                Y::S(u.int_in_range(1..=concurrency)?.to_string()),
            ));
        }
        if u.arbitrary()? {
            m.push(("api_key_env", s("KEY")));
        }
        machines.push((*name, map(m)));
    }
    doc.push(("machines", map(machines)));
    let n_models = u.int_in_range(1..=MODELS.len())?;
    let mut models = Vec::new();
    for name in &MODELS[..n_models] {
        let machine = MACHINES[u.int_in_range(0..=n_machines - 1)?];
        let backend = pick(
            u,
            &["qwen3-coder:30b", "qwen3:4b", "llama \"3\"", "名前", "a\\b"],
        )?;
        models.push((
            *name,
            map(vec![("machine", s(machine)), ("name", s(backend))]),
        ));
    }
    doc.push(("models", map(models)));
    let n_routes = u.int_in_range(1..=ROUTES.len())?;
    let mut routes = Vec::new();
    let mut defaulted = false;
    for name in &ROUTES[..n_routes] {
        let mut r = vec![("name", s(name))];
        if u.arbitrary()? {
            let n = u.int_in_range(0..=3)?;
            let kws = (0..n)
                .map(|_| {
                    Ok(s(pick(
                        u,
                        &["code", "Rust", "unit test", "image", "ünïcode", "code"],
                    )?))
                })
                .collect::<R<Vec<_>>>()?;
            r.push(("keywords", Y::Seq(kws)));
        }
        if u.arbitrary()? {
            r.push(("images", s("true")));
        }
        if !defaulted && one_in(u, 3)? {
            defaulted = true;
            r.push(("default", s("true")));
        }
        let n = u.int_in_range(1..=3)?;
        let chain = (0..n)
            .map(|_| Ok(s(MODELS[u.int_in_range(0..=n_models - 1)?])))
            .collect::<R<Vec<_>>>()?;
        r.push(("chain", Y::Seq(chain)));
        routes.push(map(r));
    }
    doc.push(("routes", Y::Seq(routes)));
    if one_in(u, 3)? {
        doc.push((
            "telegram",
            map(vec![
                ("token_env", s("TELEGRAM_BOT_TOKEN")),
                ("chat_id", s(pick(u, &["123456789", "-100123", "0"])?)),
                ("digest_at", s(pick(u, &["08:00", "23:59", "00:00"])?)),
                (
                    "timezone",
                    s(pick(u, &["UTC", "Europe/Berlin", "America/New_York"])?),
                ),
                ("alert_on_trip", s("false")),
                ("page_after_cycles", s("0")),
            ]),
        ));
    }
    if one_in(u, 3)? {
        doc.push(("tasks", tasks(u, max_body)?));
    }
    Ok(map(doc))
}

/// Entries `callback_allow` accepts, in the forms docs/api.md "Tasks" names.
const ALLOW: &[&str] = &[
    "http://127.0.0.1:",
    "http://localhost:",
    "https://hooks.example:8443",
    "https://hooks.example",
    "http://[::1]:",
    "http://[fd00::1]:9000/",
    "HTTP://Ci.Lan:80/",
    "http://127.1:",
];

/// A valid `tasks:` block: `max_attempts` at or above every threshold `breaker` writes (1 to
/// 10), `max_request_body` within `server.max_body`.
fn tasks(u: &mut Unstructured<'_>, max_body: usize) -> R<Y> {
    let mut t = Vec::new();
    if u.arbitrary()? {
        t.push(("max_running", s(pick(u, &["1", "4", "10000"])?)));
    }
    if u.arbitrary()? {
        t.push(("max_queued", s(pick(u, &["1", "10000", "10000000"])?)));
    }
    if u.arbitrary()? {
        t.push(("default_deadline", s(pick(u, &["1s", "2h", "24h", "30d"])?)));
    }
    if u.arbitrary()? {
        t.push(("max_attempts", s(pick(u, &["10", "50", "100"])?)));
    }
    if u.arbitrary()? {
        t.push(("keep", s(pick(u, &["1ms", "7d", "90d", "365d"])?)));
    }
    if u.arbitrary()? {
        let sizes: Vec<&str> = [("1", 1), ("1KiB", 1 << 10), ("1MiB", 1 << 20)]
            .iter()
            .filter(|(_, bytes)| *bytes <= max_body)
            .map(|(written, _)| *written)
            .collect();
        t.push(("max_request_body", s(pick(u, &sizes)?)));
    }
    if u.arbitrary()? {
        let n = u.int_in_range(0..=3)?;
        let allow = (0..n)
            .map(|_| Ok(s(pick(u, ALLOW)?)))
            .collect::<R<Vec<_>>>()?;
        t.push(("callback_allow", Y::Seq(allow)));
    }
    if u.arbitrary()? {
        t.push(("callback_secret_env", s("LABROUTER_WEBHOOK_SECRET")));
    }
    Ok(map(t))
}

fn timeouts(u: &mut Unstructured<'_>) -> R<Y> {
    let mut t = Vec::new();
    for key in ["connect", "first_byte", "idle", "total"] {
        if u.arbitrary()? {
            t.push((key, s(pick(u, DURATIONS)?)));
        }
    }
    Ok(map(t))
}

fn breaker(u: &mut Unstructured<'_>) -> R<Y> {
    let mut b = Vec::new();
    if u.arbitrary()? {
        b.push((
            "failure_threshold",
            Y::S(u.int_in_range(1..=10u32)?.to_string()),
        ));
    }
    if u.arbitrary()? {
        b.push(("cooldown", s(pick(u, &["1s", "20s", "60s", "1m30s"])?)));
    }
    if u.arbitrary()? {
        b.push(("backoff", s(pick(u, &["1.0", "2.0", "1.5", "10"])?)));
    }
    if u.arbitrary()? {
        b.push(("max_cooldown", s(pick(u, &["15m", "1h", "2d", "30d"])?)));
    }
    if u.arbitrary()? {
        b.push((
            "success_threshold",
            Y::S(u.int_in_range(1..=5u32)?.to_string()),
        ));
    }
    Ok(map(b))
}

/// The node reached by a random walk from `y`.
fn walk<'a>(u: &mut Unstructured<'_>, y: &'a mut Y) -> R<&'a mut Y> {
    let stop = one_in(u, 3)?;
    let next = match &*y {
        Y::Map(entries) if !stop && !entries.is_empty() => {
            Some(u.int_in_range(0..=entries.len() - 1)?)
        }
        Y::Seq(items) if !stop && !items.is_empty() => Some(u.int_in_range(0..=items.len() - 1)?),
        Y::Anchor(..) if !stop => Some(0),
        _ => None,
    };
    match (y, next) {
        (Y::Map(entries), Some(i)) => walk(u, &mut entries[i].1),
        (Y::Seq(items), Some(i)) => walk(u, &mut items[i]),
        (Y::Anchor(_, inner), Some(_)) => walk(u, inner),
        (y, _) => Ok(y),
    }
}

fn nested(u: &mut Unstructured<'_>, depth: usize) -> R<Y> {
    Ok(Y::Deep(depth, u.arbitrary()?, nasty(u)?))
}

fn mutate(u: &mut Unstructured<'_>, doc: &mut Y) -> R<()> {
    let what = u.int_in_range(0..=9)?;
    let node = walk(u, doc)?;
    match what {
        0 | 1 => *node = Y::S(nasty(u)?),
        2 => {
            *node = if u.arbitrary()? {
                Y::Map(vec![])
            } else {
                Y::Seq(vec![])
            }
        }
        3 => {
            if let Y::Map(entries) = node {
                if !entries.is_empty() {
                    let i = u.int_in_range(0..=entries.len() - 1)?;
                    if u.arbitrary()? {
                        entries.remove(i);
                    } else {
                        // A duplicate key, with the same or another value.
                        let mut dup = entries[i].clone();
                        if u.arbitrary()? {
                            dup.1 = Y::S(nasty(u)?);
                        }
                        entries.push(dup);
                    }
                }
            }
        }
        4 => {
            if let Y::Map(entries) = node {
                let key = if u.arbitrary()? {
                    nasty(u)?
                } else {
                    (*pick(u, &["URL", "Chain", "defaults", "unknown", "name", "<<"])?).to_string()
                };
                entries.push((key, Y::S(nasty(u)?)));
            }
        }
        5 => {
            let depth = *pick(u, &[8usize, 64, 200, 1000, 5000])?;
            *node = nested(u, depth)?;
        }
        6 => {
            if let Y::Seq(items) = node {
                items.push(Y::S(nasty(u)?));
            } else if let Y::Map(entries) = node {
                if let Some(e) = entries.first_mut() {
                    e.0 = nasty(u)?;
                }
            }
        }
        7 => {
            // An anchor here, an alias to it somewhere (maybe before it, maybe inside it).
            let inner = std::mem::replace(node, Y::S(String::new()));
            *node = Y::Anchor("a".into(), Box::new(inner));
            *walk(u, doc)? = Y::Alias(if one_in(u, 8)? {
                "b".into()
            } else {
                "a".into()
            });
        }
        8 => {
            // An alias bomb: each level repeats the one before ten times (the budget-breaking
            // depths are in extremes(): here they would eat the run).
            let mut prev = Y::Anchor("l0".into(), Box::new(Y::Seq(vec![s("lol"); 10])));
            let levels = u.int_in_range(1..=4)?; // deeper ones: extremes()
            let mut defs = vec![("b0".to_string(), prev.clone())];
            for i in 1..=levels {
                prev = Y::Anchor(
                    format!("l{i}"),
                    Box::new(Y::Seq(vec![Y::Alias(format!("l{}", i - 1)); 10])),
                );
                defs.push((format!("b{i}"), prev.clone()));
            }
            if let Y::Map(entries) = doc {
                for d in defs.into_iter().rev() {
                    entries.insert(0, d);
                }
            }
            *walk(u, doc)? = Y::Alias(format!("l{levels}"));
        }
        _ => {
            if let Y::S(v) = node {
                v.push_str(&nasty(u)?);
            }
        }
    }
    Ok(())
}

fn plain_ok(v: &str) -> bool {
    !v.is_empty()
        && v.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c))
        && !v.starts_with(['-', '.'])
}

/// Renders a scalar; `raw` writes it plain whatever it holds.
fn scalar(v: &str, raw: bool, out: &mut String) {
    if raw || plain_ok(v) {
        out.push_str(v);
        return;
    }
    out.push('"');
    for c in v.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c if c.is_control() || c == '\u{feff}' => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

struct Style<'a, 'b> {
    u: &'a mut Unstructured<'b>,
    /// One scalar in this many is written plain, unquoted, whatever it holds.
    raw: u32,
}

impl Style<'_, '_> {
    fn raw(&mut self) -> bool {
        self.raw > 0 && one_in(self.u, self.raw).unwrap_or(false)
    }

    fn flow(&mut self, y: &Y, out: &mut String) {
        match y {
            Y::S(v) => {
                let raw = self.raw();
                scalar(v, raw, out);
            }
            Y::Alias(a) => {
                out.push('*');
                out.push_str(a);
            }
            Y::Deep(depth, as_map, v) => {
                out.push_str(&(if *as_map { "{k: " } else { "[" }).repeat(*depth));
                scalar(v, false, out);
                out.push_str(&(if *as_map { "}" } else { "]" }).repeat(*depth));
            }
            Y::Anchor(a, inner) => {
                out.push('&');
                out.push_str(a);
                out.push(' ');
                self.flow(inner, out);
            }
            Y::Seq(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    self.flow(item, out);
                }
                out.push(']');
            }
            Y::Map(entries) => {
                out.push('{');
                for (i, (k, v)) in entries.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    let raw = self.raw();
                    scalar(k, raw, out);
                    out.push_str(": ");
                    self.flow(v, out);
                }
                out.push('}');
            }
        }
    }

    /// Block style for `y` at `indent`; small or deep nodes go flow.
    fn block(&mut self, y: &Y, indent: usize, out: &mut String) {
        let flow = indent > 12 || one_in(self.u, 4).unwrap_or(false);
        match y {
            Y::Map(entries) if !flow && !entries.is_empty() => {
                for (k, v) in entries {
                    out.push('\n');
                    out.push_str(&" ".repeat(indent));
                    let raw = self.raw();
                    scalar(k, raw, out);
                    out.push(':');
                    self.value(v, indent, out);
                }
            }
            Y::Seq(items) if !flow && !items.is_empty() => {
                for item in items {
                    out.push('\n');
                    out.push_str(&" ".repeat(indent));
                    out.push('-');
                    self.value(item, indent, out);
                }
            }
            _ => {
                out.push(' ');
                self.flow(y, out);
            }
        }
    }

    fn value(&mut self, v: &Y, indent: usize, out: &mut String) {
        match v {
            Y::Map(_) | Y::Seq(_) => self.block(v, indent + 2, out),
            Y::Anchor(a, inner) if matches!(**inner, Y::Map(_) | Y::Seq(_)) => {
                out.push_str(" &");
                out.push_str(a);
                self.block(inner, indent + 2, out);
            }
            _ => {
                out.push(' ');
                self.flow(v, out);
            }
        }
    }
}

/// Byte-level damage to rendered text, kept on char boundaries.
fn damage(u: &mut Unstructured<'_>, text: &mut String) -> R<()> {
    let at = |u: &mut Unstructured<'_>, t: &str| -> R<usize> {
        let mut i = u.int_in_range(0..=t.len())?;
        while !t.is_char_boundary(i) {
            i -= 1;
        }
        Ok(i)
    };
    match u.int_in_range(0..=3)? {
        0 => {
            let i = at(u, text)?;
            text.insert_str(i, pick(u, NASTY)?);
        }
        1 => {
            let (a, b) = (at(u, text)?, at(u, text)?);
            text.replace_range(a.min(b)..a.max(b), "");
        }
        2 => {
            // Re-indent one line.
            let lines: Vec<&str> = text.lines().collect();
            if !lines.is_empty() {
                let i = u.int_in_range(0..=lines.len() - 1)?;
                let pad = *pick(u, &["", " ", "\t", "    "])?;
                let mut out: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
                out[i] = format!("{pad}{}", out[i].trim_start());
                *text = out.join("\n");
            }
        }
        _ => {
            let lines: Vec<&str> = text.lines().collect();
            if !lines.is_empty() {
                let i = u.int_in_range(0..=lines.len() - 1)?;
                let line = lines[i].to_string();
                let mut out: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
                out.insert(i, line);
                *text = out.join("\n");
            }
        }
    }
    Ok(())
}

/// One input: raw text, a token soup, or a valid registry with mutations.
pub fn text(u: &mut Unstructured<'_>) -> R<String> {
    Ok(match u.int_in_range(0..=7)? {
        0 => String::from_utf8_lossy(u.bytes(u.len())?).into_owned(),
        1 => {
            let n = u.int_in_range(0..=64)?;
            let mut t = String::new();
            for _ in 0..n {
                t.push_str(pick(
                    u,
                    &[
                        "machines:",
                        "models:",
                        "routes:",
                        "\n",
                        "\n  ",
                        "- ",
                        "{",
                        "}",
                        "[",
                        "]",
                        ": ",
                        ", ",
                        "url: ",
                        "chain: ",
                        "&a ",
                        "*a",
                        "<<: ",
                        "? ",
                        "|\n",
                        "'",
                        "\"",
                        "#",
                        "---\n",
                        "x",
                    ],
                )?);
                if one_in(u, 4)? {
                    t.push_str(&nasty(u)?);
                }
            }
            t
        }
        _ => {
            let mut doc = valid(u)?;
            let mutations = match u.int_in_range(0..=3)? {
                0 => 0,
                1 => 1,
                _ => u.int_in_range(1..=6)?,
            };
            for _ in 0..mutations {
                mutate(u, &mut doc)?;
            }
            let raw = if one_in(u, 3)? { 6 } else { 0 };
            let mut out = String::new();
            Style { u, raw }.block(&doc, 0, &mut out);
            if one_in(u, 6)? {
                damage(u, &mut out)?;
            }
            out
        }
    })
}

pub fn target(u: &mut Unstructured<'_>) -> R<()> {
    let text = text(u)?;
    show("registry.yaml", &text);
    let parsed = Registry::parse(&text, "fuzz.yaml");
    show("result", &parsed);
    if let Ok(r) = parsed {
        accepted();
        check(&r);
    }
    Ok(())
}

/// What every validated registry promises the rest of the program.
fn check(r: &Registry) {
    let span = |d: std::time::Duration, what: &str| {
        assert!(
            !d.is_zero() && d <= SPAN_MAX,
            "{what} = {d:?} outside (0, 30 days]"
        );
    };
    span(r.server.shutdown_grace, "shutdown_grace");
    assert!(r.server.max_body > 0);
    assert!(!r.machines.is_empty() && !r.models.is_empty() && !r.routes.is_empty());
    for (i, m) in r.machines.enumerate() {
        assert_eq!(
            r.machine_index(&m.name),
            Some(i),
            "machine names are unique"
        );
        // What a machine's requests will be sent to: an http(s) URL with a host, however
        // leniently written (`HTTP://x`, `http:/x`: WHATWG parsing, as reqwest's).
        let url = reqwest::Url::parse(&m.url).expect("a machine url parses");
        assert!(
            matches!(url.scheme(), "http" | "https") && url.host_str().is_some(),
            "{}",
            m.url
        );
        assert!(!m.url.ends_with('/'));
        for (d, what) in [
            (m.timeouts.connect, "connect"),
            (m.timeouts.first_byte, "first_byte"),
            (m.timeouts.idle, "idle"),
            (m.timeouts.total, "total"),
            (m.breaker.cooldown, "cooldown"),
            (m.breaker.max_cooldown, "max_cooldown"),
        ] {
            span(d, what);
        }
        if let Some(h) = &m.health {
            span(h.every, "health.every");
            assert!(h.path.starts_with('/'));
        }
        let p = &m.breaker;
        assert!(p.cooldown <= p.max_cooldown);
        assert!(p.backoff.is_finite() && p.backoff >= 1.0);
        assert!(p.failure_threshold >= 1 && p.success_threshold >= 1);
        assert!(m.max_concurrency >= 1);
        assert!(
            (1..=m.max_concurrency).contains(&m.task_slots),
            "{}: task_slots {} outside 1..={}",
            m.name,
            m.task_slots,
            m.max_concurrency
        );
        // docs/api.md "Tasks": a lone task that meets a fresh outage waits rather than fails.
        assert!(
            r.tasks.max_attempts >= p.failure_threshold,
            "{}: max_attempts {} below failure_threshold {}",
            m.name,
            r.tasks.max_attempts,
            p.failure_threshold
        );
    }
    assert!(r.model_ids.enumerate().all(|(i, &m)| m == i));
    assert_eq!(r.model_ids.len(), r.models.len());
    for (i, m) in r.models.enumerate() {
        assert!(r.machines.get(m.machine).is_some());
        assert!(!m.backend.trim().is_empty());
        assert!(r.target_name(i).contains('@'));
    }
    assert!(r.routes.get(r.default_route).is_some());
    for (i, route) in r.routes.iter().enumerate() {
        assert!(
            !route.chain.is_empty(),
            "route {} has an empty chain",
            route.name
        );
        assert!(
            route.chain.iter().all(|&m| r.models.get(m).is_some()),
            "chain index out of range"
        );
        assert!(!route.name.is_empty() && route.name != "auto");
        assert!(
            r.routes.iter().take(i).all(|x| x.name != route.name),
            "route names are unique"
        );
        assert!(route.keywords.iter().all(|k| !k.is_empty()));
    }
    if let Some(t) = &r.telegram {
        assert!(t.digest_at.0 < 24 && t.digest_at.1 < 60);
        assert!(t.page_after_cycles >= 1);
    }
    check_tasks(r);
    assert_eq!(r.version.len(), 16);
}

/// What `tasks:` promises the task queue (docs/api.md "Tasks"), defaults included.
fn check_tasks(r: &Registry) {
    let t = &r.tasks;
    assert!((1..=10_000).contains(&t.max_running), "{t:?}");
    assert!((1..=10_000_000).contains(&t.max_queued), "{t:?}");
    assert!((1..=100).contains(&t.max_attempts), "{t:?}");
    assert!(!t.default_deadline.is_zero() && t.default_deadline <= SPAN_MAX);
    assert!(!t.keep.is_zero() && t.keep <= std::time::Duration::from_secs(365 * 86_400));
    assert!(t.max_request_body > 0 && t.max_request_body <= r.server.max_body);
    for rule in &t.callback_allow {
        assert!(matches!(rule.scheme.as_str(), "http" | "https"), "{rule:?}");
        assert!(!rule.host.is_empty() && rule.host == rule.host.to_ascii_lowercase());
        assert_ne!(rule.port, Some(0));
        // A URL written from the rule as displayed is allowed by it; with user info, or
        // with the other scheme, never.
        let shown = rule.to_string();
        let prefix = match rule.port {
            None => format!("{shown}9"),
            Some(_) => shown.clone(),
        };
        let url = reqwest::Url::parse(&format!("{prefix}/cb")).expect("a rule displays as a URL");
        assert!(rule.allows(&url), "{shown} does not allow {url}");
        let mut with_user = url.clone();
        with_user
            .set_username("u")
            .expect("an http(s) URL takes a user");
        assert!(!rule.allows(&with_user), "{shown} allows {with_user}");
        let other = if rule.scheme == "http" {
            "https"
        } else {
            "http"
        };
        let mut other_scheme = url.clone();
        other_scheme.set_scheme(other).expect("http and https swap");
        assert!(!rule.allows(&other_scheme), "{shown} allows {other_scheme}");
    }
    if let Some(name) = &t.callback_secret_env {
        assert!(
            !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
            "{name:?}"
        );
    }
}

/// Documents too big for the random walk to build often: deep nesting and alias bombs.
pub fn extremes() {
    let base = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/registry.yaml"))
        .expect("registry.yaml");
    check(&Registry::parse(&base, "registry.yaml").expect("the shipped registry is valid"));
    let deep = |open: &str, close: &str, n: usize| {
        format!("machines: {}x{}\n", open.repeat(n), close.repeat(n))
    };
    let mut docs = vec![
        deep("[", "]", 100_000),
        deep("{k: ", "}", 100_000),
        format!(
            "machines:\n{}",
            (1..2_000)
                .map(|i| format!("{}- x\n", " ".repeat(i)))
                .collect::<String>()
        ),
        format!("{}x", "- ".repeat(50_000)),
    ];
    // A billion laughs: nine levels of ten aliases each.
    let mut bomb = String::from("a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n");
    for i in 1..10 {
        let prev = format!("*a{}", i - 1);
        bomb.push_str(&format!(
            "a{i}: &a{i} [{}]\n",
            [prev.as_str(); 10].join(", ")
        ));
    }
    docs.push(bomb.replace("a9: &a9", "machines: &a9"));
    // The same bomb inside a mapping key, which the YAML reader captures whole.
    let mut key = String::from("&a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]");
    for i in 1..10 {
        let prev = format!("*a{}", i - 1);
        key.push_str(&format!(", &a{i} [{}]", [prev.as_str(); 10].join(", ")));
    }
    docs.push(format!("machines:\n  ? [{key}]\n  : {{url: http://a:1}}\n"));
    docs.push(
        base.replace("keywords: [code,", "keywords: &k [code,")
            .replace("keywords: [image,", "keywords: *k\n    x: [image,"),
    );
    // Deep nesting where the reader keeps it all: in a mapping key.
    let n = 100_000;
    docs.push(format!(
        "machines:\n  ? {}x{}\n  : 1\n",
        "[".repeat(n),
        "]".repeat(n)
    ));
    docs.push(format!(
        "machines:\n  ? {}x{}\n  : 1\n",
        "{k: ".repeat(n),
        "}".repeat(n)
    ));
    // Each must end (serde-saphyr's node budget and recursion limit) without a panic; how
    // fast is for scripts/fuzz.sh to show, not for a test to assert.
    for doc in docs {
        if let Ok(r) = Registry::parse(&doc, "extreme.yaml") {
            check(&r);
        }
    }
}
