//! The accept loop's next connection: from the socket, or handed over by another serving
//! thread ([`super::balance`]), and where it is served.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::balance;

/// How many connections may wait to be accepted (the kernel holds it to
/// `net.core.somaxconn`, 4096 by default). tokio's `bind` asks for 128: a burst of more agents
/// connecting at once lost SYNs past that, and those clients waited out TCP's one-second
/// retransmission (nginx asks for 511).
const BACKLOG: u32 = 1024;

/// Listens on `addr` with room for [`BACKLOG`] connections waiting to be accepted, with
/// `SO_REUSEADDR` as tokio's `bind` sets it (a restart rebinds while old connections linger).
pub fn listen(addr: SocketAddr) -> io::Result<TcpListener> {
    let socket = match addr {
        SocketAddr::V4(_) => TcpSocket::new_v4()?,
        SocketAddr::V6(_) => TcpSocket::new_v6()?,
    };
    #[cfg(unix)]
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(BACKLOG)
}

/// What the accept loop takes next.
pub(super) enum Next {
    Accepted(TcpStream, SocketAddr, OwnedSemaphorePermit),
    Handed(balance::Handed),
    /// Accepting failed (and was waited out): nothing to serve.
    Failed,
}

/// A connection to serve on this thread: its socket, peer, permit, and its count under a
/// balance.
pub(super) type Arrived = (
    TcpStream,
    SocketAddr,
    OwnedSemaphorePermit,
    Option<balance::Counted>,
);

/// What of `next` this thread serves: under a balance, a connection it accepted may go to
/// another thread instead.
pub(super) fn arrived(next: Next, seat: Option<&balance::Seat>) -> Option<Arrived> {
    match (next, seat) {
        (Next::Accepted(tcp, peer, permit), None) => Some((tcp, peer, permit, None)),
        (Next::Accepted(tcp, peer, permit), Some(seat)) => seat
            .keep_or_hand(tcp, peer, permit)
            .map(|(tcp, permit, counted)| (tcp, peer, permit, Some(counted))),
        (Next::Handed(handed), _) => handed
            .arrive()
            .map(|(tcp, peer, permit, counted)| (tcp, peer, permit, Some(counted))),
        (Next::Failed, _) => None,
    }
}

/// The next connection from the socket, with its permit (`None`: the permits are closed).
pub(super) async fn accept(listener: &TcpListener, permits: &Arc<Semaphore>) -> Option<Next> {
    let permit = Arc::clone(permits).acquire_owned().await.ok()?;
    match listener.accept().await {
        Ok((tcp, peer)) => {
            if let Err(e) = tcp.set_nodelay(true) {
                // Without it, back-to-back streamed answers wait ~40 ms each for a delayed ACK.
                tracing::debug!(error = %e, "TCP_NODELAY not set");
            }
            Some(Next::Accepted(tcp, peer, permit))
        }
        Err(e) => {
            // Out of file descriptors, say: back off instead of spinning.
            tracing::warn!(error = %e, "accept failed");
            tokio::time::sleep(Duration::from_millis(100)).await;
            Some(Next::Failed)
        }
    }
}

/// The next connection another serving thread hands to this one (never, without a seat).
pub(super) async fn handed_over(seat: &mut Option<balance::Seat>) -> balance::Handed {
    match seat {
        Some(seat) => seat.inbox.recv().await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// 200 clients connect at once to a listener that accepts none of them yet: each
    /// connection completes (tokio's `bind`, with room for 128, left the rest retrying
    /// their SYNs until the timeout).
    #[tokio::test]
    async fn a_burst_of_connections_waits_in_the_backlog() {
        let listener = listen("127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = listener.local_addr().unwrap();
        let connects = (0..200)
            .map(|_| tokio::time::timeout(Duration::from_secs(5), TcpStream::connect(addr)));
        let done = futures_util::future::join_all(connects).await;
        let connected = done.iter().filter(|c| matches!(c, Ok(Ok(_)))).count();
        assert_eq!(connected, 200);
        drop(listener);
    }
}
