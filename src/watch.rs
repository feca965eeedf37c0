//! Reload when registry.yaml changes. Editors save by writing a temp file and renaming it
//! over the old one, so the directory is watched (not the file) and events are debounced.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use notify::{RecursiveMode, Watcher};

use crate::service::Service;

/// Quiet time after the last change before reloading: one save is often several events.
pub const DEBOUNCE: Duration = Duration::from_millis(300);

/// Watches `config`'s directory until the returned watcher is dropped.
pub fn spawn(svc: Arc<Service>, config: &Path) -> notify::Result<notify::RecommendedWatcher> {
    let file: PathBuf = config.file_name().map(PathBuf::from).unwrap_or_default();
    let dir = match config.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<()>();
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        let Ok(event) = event else { return };
        if event.kind.is_access() {
            return;
        }
        if event
            .paths
            .iter()
            .any(|p| p.file_name() == Some(file.as_os_str()))
        {
            let _ = tx.send(());
        }
    })?;
    watcher.watch(&dir, RecursiveMode::NonRecursive)?;
    tokio::spawn(async move {
        while rx.recv().await.is_some() {
            // Debounce: wait until the directory has been quiet for DEBOUNCE.
            loop {
                match tokio::time::timeout(DEBOUNCE, rx.recv()).await {
                    Ok(Some(())) => continue,
                    Ok(None) => return,
                    Err(_) => break,
                }
            }
            let svc = Arc::clone(&svc);
            // The error, if any, is logged and ledgered by reload itself.
            let _ = tokio::task::spawn_blocking(move || svc.reload()).await;
        }
    });
    Ok(watcher)
}
