//! systemd readiness (`Type=notify`): a datagram to `$NOTIFY_SOCKET`, if systemd set one.

/// Sends `state` (e.g. `READY=1`); does nothing outside systemd. Failures are logged, not
/// fatal: a router that serves is more use than one that exits over a status message.
pub fn notify(state: &str) {
    let Some(path) = std::env::var_os("NOTIFY_SOCKET") else {
        return;
    };
    if let Err(e) = send(&path, state) {
        tracing::warn!(error = %e, "could not notify systemd");
    }
}

#[cfg(unix)]
fn send(path: &std::ffi::OsStr, state: &str) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::net::UnixDatagram;
    let socket = UnixDatagram::unbound()?;
    let bytes = path.as_bytes();
    if let Some(name) = bytes.strip_prefix(b"@") {
        #[cfg(target_os = "linux")]
        {
            use std::os::linux::net::SocketAddrExt;
            let addr = std::os::unix::net::SocketAddr::from_abstract_name(name)?;
            socket.send_to_addr(state.as_bytes(), &addr)?;
            return Ok(());
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = name;
            return Err(std::io::Error::other("abstract NOTIFY_SOCKET needs Linux"));
        }
    }
    socket.send_to(state.as_bytes(), path)?;
    Ok(())
}

#[cfg(not(unix))]
fn send(_path: &std::ffi::OsStr, _state: &str) -> std::io::Result<()> {
    Ok(())
}
