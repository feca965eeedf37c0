//! The port and its connections: the listener that Refuse closes and any other fault rebinds,
//! the accept loop, and the TCP resets that cut connections.

use std::convert::Infallible;
use std::future::poll_fn;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::net::{TcpSocket, TcpStream};
use tokio::sync::Notify;

use super::respond::handle;
use super::{lock, Inner};

impl Inner {
    /// Drops the listener and resets every live connection.
    pub(super) fn close(&self) {
        drop(lock(&self.listener).take());
        self.epoch.send_modify(|e| *e += 1);
    }

    /// Rebinds the same port if the sim should listen and does not; true if listening.
    /// Checked under the lock so a racing `set(Refuse)` can never be undone.
    pub(super) fn ensure_listener(&self) -> bool {
        let mut slot = lock(&self.listener);
        if self.closed() {
            *slot = None;
            return false;
        }
        if slot.is_none() {
            let _rt = self.rt.enter();
            let bound = crate::server::listen(self.addr);
            match bound {
                Ok(l) => *slot = Some(l),
                Err(e) => tracing::warn!(sim = %self.name, addr = %self.addr, "rebind failed: {e}"),
            }
        }
        slot.is_some()
    }

    fn poll_accept(&self, cx: &mut Context<'_>) -> Poll<io::Result<(TcpStream, SocketAddr)>> {
        match lock(&self.listener).as_ref() {
            Some(l) => l.poll_accept(cx),
            None => Poll::Pending,
        }
    }
}

/// Accepts while listening; wakes on every fault change to close or rebind the port, and
/// retries a failed rebind every 50 ms.
pub(super) async fn accept_loop(inner: Arc<Inner>) {
    let mut fault_rx = inner.fault.subscribe();
    let mut stop_rx = inner.stopped.subscribe();
    loop {
        if *stop_rx.borrow_and_update() {
            return;
        }
        fault_rx.borrow_and_update();
        let listening = inner.ensure_listener();
        let retry_bind = !listening && !inner.closed();
        tokio::select! {
            res = poll_fn(|cx| inner.poll_accept(cx)), if listening => match res {
                Ok((stream, _)) => {
                    tokio::spawn(serve_conn(inner.clone(), stream));
                }
                Err(e) => {
                    tracing::debug!(sim = %inner.name, "accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            },
            _ = fault_rx.changed() => {}
            _ = stop_rx.changed() => {}
            () = tokio::time::sleep(Duration::from_millis(50)), if retry_bind => {}
        }
    }
}

/// Serves one connection until it ends, a handler asks to kill it, or every connection is
/// dropped. A twin descriptor lets a kill set SO_LINGER 0 so the peer sees a reset, while
/// ordinary closes stay graceful.
async fn serve_conn(inner: Arc<Inner>, stream: TcpStream) {
    let _open = Open::count(&inner);
    let mut epoch = inner.epoch.subscribe();
    let _ = stream.set_nodelay(true);
    let split = stream.into_std().and_then(|s| {
        let twin = s.try_clone()?;
        Ok((TcpStream::from_std(s)?, twin))
    });
    let (stream, twin) = match split {
        Ok(pair) => pair,
        Err(e) => {
            tracing::debug!(sim = %inner.name, "connection setup failed: {e}");
            return;
        }
    };
    if inner.closed() {
        return reset(twin);
    }
    let kill = Arc::new(Notify::new());
    let service = {
        let (inner, kill) = (inner.clone(), kill.clone());
        hyper::service::service_fn(move |req| {
            let (inner, kill) = (inner.clone(), kill.clone());
            async move { Ok::<_, Infallible>(handle(inner, kill, req).await) }
        })
    };
    let builder = auto::Builder::new(TokioExecutor::new());
    let conn = builder.serve_connection(TokioIo::new(stream), service);
    tokio::select! {
        _ = conn => return,
        () = kill.notified() => {}
        _ = epoch.changed() => {}
    }
    reset(twin);
}

/// Sets SO_LINGER 0 on the socket; once both descriptors close the kernel sends a RST.
fn reset(twin: std::net::TcpStream) {
    if let Err(e) = TcpSocket::from_std_stream(twin).set_zero_linger() {
        tracing::debug!("set_zero_linger failed: {e}");
    }
}

/// Counts a connection in [`Inner::open`] for as long as it lives.
struct Open(Arc<Inner>);

impl Open {
    fn count(inner: &Arc<Inner>) -> Open {
        inner.open.fetch_add(1, Ordering::Relaxed);
        Open(Arc::clone(inner))
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::Relaxed);
    }
}
