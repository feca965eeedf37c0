//! The settings a reload may not change ("restart to change it", docs/registry.md
//! "Reloading"): the socket and its auth, and the link to Redis with the task queue's place.

use super::ServiceError;
use crate::registry::Registry;

/// Settings a reload may not change (README "Safety"): the socket stays bound where it was, so its
/// auth must stay as it was checked at start.
pub(super) fn restart_only(old: &Registry, new: &Registry) -> Result<(), ServiceError> {
    let (o, n) = (&old.server, &new.server);
    let changed =
        |setting, old: String, new: String| Err(ServiceError::NeedsRestart { setting, old, new });
    if o.listen != n.listen {
        return changed("server.listen", o.listen.to_string(), n.listen.to_string());
    }
    if o.api_keys_env != n.api_keys_env {
        let show = |v: &Option<String>| v.clone().unwrap_or_else(|| "(none)".into());
        return changed(
            "server.api_keys_env",
            show(&o.api_keys_env),
            show(&n.api_keys_env),
        );
    }
    if let (Some(o), Some(n)) = (&old.cluster, &new.cluster) {
        let queue = [
            (
                "cluster.tasks",
                o.tasks.as_str().into(),
                n.tasks.as_str().into(),
            ),
            (
                "cluster.assume_durable",
                o.assume_durable.to_string(),
                n.assume_durable.to_string(),
            ),
            (
                "cluster.task_lease",
                format!("{:?}", o.task_lease),
                format!("{:?}", n.task_lease),
            ),
            (
                "cluster.task_timeout",
                format!("{:?}", o.task_timeout),
                format!("{:?}", n.task_timeout),
            ),
        ];
        if let Some((setting, old, new)) = queue.into_iter().find(|(_, o, n)| o != n) {
            return changed(setting, old, new);
        }
    }
    if old.cluster != new.cluster {
        let show = |c: &Option<crate::registry::Cluster>| {
            c.as_ref().map_or("(none)".into(), |c| {
                format!("{} as {} in {}", c.prefix, c.node, c.redis_url_env)
            })
        };
        return changed("cluster", show(&old.cluster), show(&new.cluster));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn with_cluster(extra: &str) -> Registry {
        let text = format!(
            "machines:\n  m: {{ url: \"http://127.0.0.1:9/v1\" }}\nmodels:\n  a: {{ machine: m, name: x }}\n\
             routes:\n  - {{ name: r, chain: [a] }}\ncluster:\n  redis_url_env: R\n{extra}"
        );
        Registry::parse(&text, "registry.yaml").unwrap()
    }

    #[test]
    fn a_reload_cannot_change_where_tasks_live_nor_their_bounds() {
        let old = with_cluster("");
        let cases = [
            (
                "  assume_durable: true\n",
                "cluster.assume_durable",
                "false -> true",
            ),
            ("  task_lease: 60s\n", "cluster.task_lease", "30s -> 60s"),
            ("  task_timeout: 2s\n", "cluster.task_timeout", "1s -> 2s"),
            ("  tasks: local\n", "", ""),
        ];
        for (extra, setting, says) in cases {
            let new = with_cluster(extra);
            match restart_only(&old, &new) {
                Ok(()) => assert!(setting.is_empty(), "{extra} was accepted"),
                Err(e) => {
                    let e = e.to_string();
                    assert!(e.starts_with(setting) && e.contains(says), "{e}");
                    assert!(e.contains("restart to change it"), "{e}");
                }
            }
        }
    }
}
