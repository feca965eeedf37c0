//! The names `labrouter machine add` writes: the machine's (checked), the key variable's
//! (checked), and each model entry's, a readable slug of the backend name and the machine
//! (`qwen3-coder:30b` on `gpu-box2` is `qwen3-coder-30b-gpu-box2`), unique in the registry.

/// The longest machine name accepted.
const MAX_MACHINE: usize = 63;

/// The longest slug of a backend name, before the machine's name is added.
const MAX_SLUG: usize = 60;

/// Why `name` cannot be a machine's name, if it cannot: a letter first, then letters,
/// digits, `-`, `_` or `.`, at most 63 characters, and not a word YAML reads as a value.
pub fn machine_name(name: &str) -> Result<(), String> {
    let ok = name.len() <= MAX_MACHINE
        && name.starts_with(|c: char| c.is_ascii_alphabetic())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && !matches!(
            name.to_ascii_lowercase().as_str(),
            "true" | "false" | "null"
        );
    if ok {
        return Ok(());
    }
    Err(format!(
        "machine name '{}' is not usable: expected a letter, then letters, digits, '-', '_' or '.' (at most {MAX_MACHINE} characters), not true, false or null",
        crate::text::bounded(name)
    ))
}

/// Why `var` cannot name an environment variable, if it cannot (without repeating it).
pub fn env_name(var: &str) -> Result<(), String> {
    let ok = (1..=100).contains(&var.len())
        && var.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && var.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if ok {
        return Ok(());
    }
    // Not repeated: a user who passed the key itself must not see it echoed into a log.
    Err("--api-key-env: expected the name of the environment variable that holds the key (letters, digits and '_', not starting with a digit), never the key itself".to_owned())
}

/// A readable slug of a backend name: `:latest` dropped, lower case, every run of other
/// characters than letters and digits one `-`, at most [`MAX_SLUG`] characters.
pub fn slug(backend: &str) -> String {
    let backend = backend.strip_suffix(":latest").unwrap_or(backend);
    let mut out = String::with_capacity(backend.len().min(MAX_SLUG));
    for c in backend.chars() {
        if out.len() >= MAX_SLUG {
            break;
        }
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.is_empty() && !out.ends_with('-') {
            out.push('-');
        }
    }
    let out = out.trim_end_matches('-');
    match out {
        "" => "model".to_owned(),
        s => s.to_owned(),
    }
}

/// The entry names for `backends` on `machine`, in order: `{slug}-{machine}`, or with
/// `-2`, `-3`, … when `taken` (a name the registry already has) or given earlier.
pub fn entry_names(backends: &[&str], machine: &str, taken: impl Fn(&str) -> bool) -> Vec<String> {
    let mut given: Vec<String> = Vec::with_capacity(backends.len());
    for backend in backends {
        let base = format!("{}-{machine}", slug(backend));
        let mut name = base.clone();
        let mut n = 2;
        while taken(&name) || given.contains(&name) {
            name = format!("{base}-{n}");
            n += 1;
        }
        given.push(name);
    }
    given
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slug_is_the_backend_name_readable_as_a_key() {
        assert_eq!(slug("qwen3-coder:30b"), "qwen3-coder-30b");
        assert_eq!(slug("llama3.2:latest"), "llama3-2");
        assert_eq!(slug("Qwen2.5-VL:7B"), "qwen2-5-vl-7b");
        assert_eq!(
            slug("hf.co/unsloth/Qwen3-GGUF:Q4_K_M"),
            "hf-co-unsloth-qwen3-gguf-q4-k-m"
        );
        assert_eq!(slug("::"), "model");
        assert_eq!(slug("模型"), "model");
        assert_eq!(slug(&"a".repeat(500)).len(), MAX_SLUG);
    }

    #[test]
    fn entry_names_are_unique_in_the_registry_and_among_themselves() {
        let taken = |n: &str| n == "qwen3-4b-box2" || n == "qwen3-4b-box2-2";
        assert_eq!(
            entry_names(
                &["qwen3:4b", "qwen3-coder:30b", "Qwen3:4B", "llama3.2"],
                "box2",
                taken
            ),
            [
                "qwen3-4b-box2-3",
                "qwen3-coder-30b-box2",
                "qwen3-4b-box2-4",
                "llama3-2-box2"
            ]
        );
    }

    #[test]
    fn machine_names_are_plain_yaml_keys() {
        for ok in ["gpu-box2", "mac.studio", "a", "box_3"] {
            assert_eq!(machine_name(ok), Ok(()), "{ok}");
        }
        for bad in [
            "",
            "2box",
            "-a",
            "a b",
            "a:b",
            "a\nb",
            "null",
            "True",
            &"a".repeat(64),
        ] {
            let err = machine_name(bad).unwrap_err();
            assert!(err.contains("is not usable"), "{bad:?}: {err}");
        }
    }

    #[test]
    fn key_variables_are_names_not_keys() {
        assert_eq!(env_name("GPU_BOX_KEY"), Ok(()));
        assert_eq!(env_name("_K1"), Ok(()));
        for bad in ["", "1KEY", "sk-abc123", "A B", "A=B"] {
            assert!(env_name(bad).is_err(), "{bad:?}");
        }
    }
}
