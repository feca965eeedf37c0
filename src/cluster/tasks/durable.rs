//! Durable or refused (README "Several routers", the shared queue): a 202 means the task is
//! on Redis's disk, so a router starts with `cluster.tasks: shared` only when Redis says it
//! writes every change to its append-only file before answering (`appendonly yes`,
//! `appendfsync always`), or the operator says so where `CONFIG` is not allowed
//! (`cluster.assume_durable`).

use redis::aio::MultiplexedConnection;

/// What `CONFIG GET` must show, setting by setting.
const NEEDED: [(&str, &str); 2] = [("appendonly", "yes"), ("appendfsync", "always")];

/// Checks Redis's persistence; the error names the setting and how to fix it.
pub(super) async fn check(conn: &mut MultiplexedConnection, assume: bool) -> Result<(), String> {
    for (setting, wanted) in NEEDED {
        let got: redis::RedisResult<Vec<String>> = redis::cmd("CONFIG")
            .arg("GET")
            .arg(setting)
            .query_async(conn)
            .await;
        let got = match got {
            Ok(pair) => pair,
            Err(_) if assume => return Ok(()),
            Err(e) => {
                return Err(format!(
                    "cluster.tasks: shared needs Redis to write each task to disk before it is acknowledged, \
                     and Redis refused CONFIG GET {setting} ({}); check that it runs with appendonly yes \
                     and appendfsync always, then set cluster.assume_durable: true",
                    crate::text::bounded(&e.to_string())
                ))
            }
        };
        verdict(setting, wanted, &got)?;
    }
    Ok(())
}

/// One setting's `CONFIG GET` answer (`[name, value]`) against what it must be.
fn verdict(setting: &str, wanted: &str, got: &[String]) -> Result<(), String> {
    let value = match got {
        [name, value] if name.eq_ignore_ascii_case(setting) => value.as_str(),
        _ => "(not reported)",
    };
    if value.eq_ignore_ascii_case(wanted) {
        return Ok(());
    }
    Err(format!(
        "cluster.tasks: shared needs Redis to write each task to disk before it is acknowledged, \
         but its {setting} is '{}', not '{wanted}': set `{setting} {wanted}` in redis.conf \
         (or CONFIG SET {setting} {wanted}; then CONFIG REWRITE)",
        crate::text::bounded(value)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_setting_is_named_with_what_it_must_be() {
        let s = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(verdict("appendonly", "yes", &s(&["appendonly", "yes"])).is_ok());
        let e = verdict("appendonly", "yes", &s(&["appendonly", "no"])).unwrap_err();
        assert!(e.contains("appendonly is 'no', not 'yes'"), "{e}");
        let e = verdict("appendfsync", "always", &s(&["appendfsync", "everysec"])).unwrap_err();
        assert!(e.contains("appendfsync is 'everysec'"), "{e}");
        let e = verdict("appendfsync", "always", &[]).unwrap_err();
        assert!(e.contains("(not reported)"), "{e}");
    }
}
