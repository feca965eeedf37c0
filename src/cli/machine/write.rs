//! registry.yaml replaced whole or not at all: the new text goes to a temporary file beside
//! it (its permissions and, when we may, its owner), and one rename puts it in place, unless
//! the file changed while the machine was being asked.

use std::io::Write as _;
use std::path::{Path, PathBuf};

/// Replaces the file at `path` (a symlink's target, when it is one) with `new`, if it still
/// holds `old`; on any failure the file is untouched and the temporary file removed.
pub fn replace(path: &Path, old: &str, new: &str) -> Result<(), String> {
    let target = std::fs::canonicalize(path).map_err(|e| format!("cannot find it: {e}"))?;
    let tmp = temporary(&target)?;
    let result = write_then_rename(&target, &tmp, old, new);
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// `.NAME.machine-add.PID.tmp` beside `target`.
fn temporary(target: &Path) -> Result<PathBuf, String> {
    let (Some(dir), Some(name)) = (target.parent(), target.file_name()) else {
        return Err("cannot tell its directory".to_owned());
    };
    let name = format!(
        ".{}.machine-add.{}.tmp",
        name.to_string_lossy(),
        std::process::id()
    );
    Ok(dir.join(name))
}

fn write_then_rename(target: &Path, tmp: &Path, old: &str, new: &str) -> Result<(), String> {
    let cannot = |what: &str, e: std::io::Error| format!("cannot {what} {}: {e}", tmp.display());
    let meta = std::fs::metadata(target).map_err(|e| format!("cannot read it: {e}"))?;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(tmp)
        .map_err(|e| cannot("create", e))?;
    f.write_all(new.as_bytes())
        .and_then(|()| f.sync_all())
        .map_err(|e| cannot("write", e))?;
    drop(f);
    std::fs::set_permissions(tmp, meta.permissions()).map_err(|e| cannot("set the mode of", e))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt as _;
        // Best effort: only root may give a file away; anyone else writes their own.
        let _ = std::os::unix::fs::chown(tmp, Some(meta.uid()), Some(meta.gid()));
    }
    let now = std::fs::read(target).map_err(|e| format!("cannot read it again: {e}"))?;
    if now != old.as_bytes() {
        return Err(
            "it changed while the machine was being asked; run the command again".to_owned(),
        );
    }
    std::fs::rename(tmp, target).map_err(|e| format!("cannot replace it: {e}"))
}

#[cfg(all(test, unix))]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;

    use super::*;

    #[test]
    fn the_file_a_symlink_names_is_replaced_with_its_mode_and_the_link_kept() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real.yaml");
        let link = dir.path().join("registry.yaml");
        std::fs::write(&real, "old\n").unwrap();
        std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o640)).unwrap();
        std::os::unix::fs::symlink(&real, &link).unwrap();
        replace(&link, "old\n", "old\nnew\n").unwrap();
        assert!(std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(std::fs::read_to_string(&real).unwrap(), "old\nnew\n");
        let mode = std::fs::metadata(&real).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o640);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2);
    }

    #[test]
    fn a_file_that_changed_meanwhile_is_left_as_it_is_now() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("registry.yaml");
        std::fs::write(&path, "edited by hand\n").unwrap();
        let err = replace(&path, "as read\n", "as read\nnew\n").unwrap_err();
        assert!(
            err.contains("changed while the machine was being asked"),
            "{err}"
        );
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "edited by hand\n");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}
