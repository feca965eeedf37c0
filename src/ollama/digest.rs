//! Each name's `digest` on `/api/tags`: a hash of what the name maps to (a route's chain, a
//! model's machine URL and backend name), so that clients that cache models by digest see a
//! reload that moves a name, and only such a reload: the registry's version is left out on
//! purpose, since any edit changes it.

use sha2::{Digest as _, Sha256};

use crate::outcome::ModelId;
use crate::registry::Registry;
use crate::route::Choice;

/// The digest of a name that routes to `choice` (None: `auto`), as 64 lowercase hex digits
/// (the shape Ollama's digests have, without their `sha256:` prefix, as its list shows them).
///
/// - a model (its name or its backend name): its machine's URL and its backend name;
/// - a route: the same of each target of its chain, in order;
/// - `auto`: every route's name, keywords, whether it takes images and its chain, and
///   which route is the default: all that keyword routing reads.
pub fn digest(reg: &Registry, choice: Option<Choice>) -> String {
    let mut h = Fields(Sha256::new());
    match choice {
        Some(Choice::Model(m)) => {
            h.field(b"model");
            h.target(reg, m);
        }
        Some(Choice::Route(r)) => {
            h.field(b"route");
            h.chain(reg, &reg.routes[r].chain);
        }
        None => {
            h.field(b"auto");
            h.field(reg.routes[reg.default_route].name.as_bytes());
            for route in reg.routes.iter() {
                h.field(route.name.as_bytes());
                h.field(if route.images { b"images" } else { b"text" });
                h.count(route.keywords.len());
                for k in &route.keywords {
                    h.field(k.as_bytes());
                }
                h.chain(reg, &route.chain);
            }
        }
    }
    h.0.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// A hash fed with length-prefixed fields, so that no two different lists of fields hash
/// the same bytes.
struct Fields(Sha256);

impl Fields {
    fn field(&mut self, bytes: &[u8]) {
        self.count(bytes.len());
        self.0.update(bytes);
    }

    fn count(&mut self, n: usize) {
        self.0.update((n as u64).to_le_bytes());
    }

    fn target(&mut self, reg: &Registry, m: ModelId) {
        let model = &reg.models[m];
        self.field(reg.machines[model.machine].url.as_bytes());
        self.field(model.backend.as_bytes());
    }

    fn chain(&mut self, reg: &Registry, chain: &[ModelId]) {
        self.count(chain.len());
        for &m in chain {
            self.target(reg, m);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outcome::RouteId;

    fn registry(coder_gpu: &str, keywords: &str) -> Registry {
        let yaml = format!(
            r#"machines:
  gpu-box: {{ url: "http://127.0.0.1:9001/v1" }}
  ubuntu-box: {{ url: "http://127.0.0.1:9002/v1" }}
models:
  coder-gpu: {coder_gpu}
  small: {{ machine: ubuntu-box, name: "qwen3:4b" }}
routes:
  - name: code
    keywords: [{keywords}]
    chain: [coder-gpu, small]
  - name: chat
    default: true
    chain: [small]
"#
        );
        Registry::parse(&yaml, "test.yaml").unwrap()
    }

    const HOME: &str = r#"{ machine: gpu-box, name: "qwen3-coder:30b" }"#;

    /// (coder-gpu, small, code, chat, auto)
    fn digests(reg: &Registry) -> [String; 5] {
        [
            digest(reg, Some(Choice::Model(ModelId(0)))),
            digest(reg, Some(Choice::Model(ModelId(1)))),
            digest(reg, Some(Choice::Route(RouteId(0)))),
            digest(reg, Some(Choice::Route(RouteId(1)))),
            digest(reg, None),
        ]
    }

    #[test]
    fn a_digest_changes_with_what_the_name_maps_to_and_nothing_else() {
        let before = digests(&registry(HOME, "code"));
        assert!(before.iter().all(|d| d.len() == 64), "{before:?}");
        let unique: std::collections::HashSet<_> = before.iter().collect();
        assert_eq!(unique.len(), 5, "every name its own digest: {before:?}");

        // Another machine: the model, the route holding it and auto change; the rest stay.
        let moved = digests(&registry(
            r#"{ machine: ubuntu-box, name: "qwen3-coder:30b" }"#,
            "code",
        ));
        assert_ne!(moved[0], before[0]);
        assert_eq!(moved[1], before[1]);
        assert_ne!(moved[2], before[2]);
        assert_eq!(moved[3], before[3]);
        assert_ne!(moved[4], before[4]);

        // Another backend name: the same.
        let renamed = digests(&registry(
            r#"{ machine: gpu-box, name: "qwen3-coder:32b" }"#,
            "code",
        ));
        assert_ne!(renamed[0], before[0]);
        assert_eq!(renamed[1], before[1]);
        assert_ne!(renamed[2], before[2]);

        // A keyword: only auto reads keywords.
        let keyword = digests(&registry(HOME, "code, rust"));
        assert_eq!(keyword[..4], before[..4]);
        assert_ne!(keyword[4], before[4]);

        // The same registry again: the same digests (no clock, no version in them).
        assert_eq!(digests(&registry(HOME, "code")), before);
    }
}
