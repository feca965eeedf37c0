//! Connections spread evenly over the serving threads (`--workers`).
//!
//! The threads accept on one socket, and whichever is awake when connections arrive takes
//! them: a client that opens 32 at once often left one thread with most of them (the
//! threads' CPU time 55 ms against 232 ms in a 3 s run), and the busy thread's queue made the
//! load's tail: p99 2.4–2.6 ms in such runs, 1.5 ms in two of the three with an even split
//! (`docs/perf/README.md`). So a thread
//! that accepts a connection while it already holds two more than the least busy thread
//! hands it over to that one (through its inbox, a channel the thread reads beside the
//! socket); the rest stay where they were accepted. A connection is handed over at most once,
//! when it opens: its requests pay nothing, and a client that opens one connection at a time
//! is never handed over at all.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::net::TcpStream;
use tokio::sync::{mpsc, OwnedSemaphorePermit};

/// A thread may hold this many more open connections than the least busy one before it
/// hands new ones over.
const SLACK: usize = 1;

/// A connection handed to another thread, with its place under `server.max_connections`
/// and its count there.
pub(super) struct Handed {
    tcp: std::net::TcpStream,
    peer: SocketAddr,
    permit: OwnedSemaphorePermit,
    counted: Counted,
}

impl Handed {
    /// The connection, on the thread it was handed to (counted there since it was handed).
    pub(super) fn arrive(self) -> Option<(TcpStream, SocketAddr, OwnedSemaphorePermit, Counted)> {
        let tcp = TcpStream::from_std(self.tcp)
            .map_err(
                |e| tracing::debug!(error = %e, "a handed-over connection could not be registered"),
            )
            .ok()?;
        Some((tcp, self.peer, self.permit, self.counted))
    }
}

/// The open connections of every serving thread, and their inboxes.
pub(super) struct Balance {
    open: Box<[AtomicUsize]>,
    inboxes: Box<[mpsc::UnboundedSender<Handed>]>,
}

impl Balance {
    /// A balance over `threads` threads, with the inbox each thread reads (by index).
    pub(super) fn new(threads: usize) -> (Arc<Balance>, Vec<mpsc::UnboundedReceiver<Handed>>) {
        let (inboxes, receivers) = (0..threads)
            .map(|_| mpsc::unbounded_channel())
            .unzip::<_, _, Vec<_>, Vec<_>>();
        let balance = Balance {
            open: (0..threads).map(|_| AtomicUsize::new(0)).collect(),
            inboxes: inboxes.into_boxed_slice(),
        };
        (Arc::new(balance), receivers)
    }

    /// Where a connection accepted by thread `me` is served: `me`, unless it holds more than
    /// [`SLACK`] connections over the least busy thread.
    fn place(&self, me: usize) -> usize {
        let mine = self.open[me].load(Ordering::Relaxed);
        let (least, fewest) = self
            .open
            .iter()
            .map(|n| n.load(Ordering::Relaxed))
            .enumerate()
            .min_by_key(|&(_, n)| n)
            .unwrap_or((me, mine));
        if mine > fewest + SLACK {
            least
        } else {
            me
        }
    }

    /// Counts a connection against thread `at` until the guard is dropped.
    fn count(self: &Arc<Self>, at: usize) -> Counted {
        self.open[at].fetch_add(1, Ordering::Relaxed);
        Counted {
            balance: Arc::clone(self),
            at,
        }
    }
}

/// One serving thread's place in the [`Balance`].
pub(super) struct Seat {
    pub(super) balance: Arc<Balance>,
    pub(super) me: usize,
    pub(super) inbox: mpsc::UnboundedReceiver<Handed>,
}

/// A connection counted against its thread until it is dropped.
pub(super) struct Counted {
    balance: Arc<Balance>,
    at: usize,
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.balance.open[self.at].fetch_sub(1, Ordering::Relaxed);
    }
}

impl Seat {
    /// Keeps a connection this thread accepted, counted here (`Some`), or hands it to a
    /// less busy thread (`None`). One whose thread has stopped is kept.
    pub(super) fn keep_or_hand(
        &self,
        tcp: TcpStream,
        peer: SocketAddr,
        permit: OwnedSemaphorePermit,
    ) -> Option<(TcpStream, OwnedSemaphorePermit, Counted)> {
        let to = self.balance.place(self.me);
        let counted = self.balance.count(to);
        if to == self.me {
            return Some((tcp, permit, counted));
        }
        let tcp = match tcp.into_std() {
            Ok(tcp) => tcp,
            Err(e) => {
                // Taking it off this thread's poller failed: the socket is closed.
                tracing::debug!(error = %e, "a connection could not be handed over: closed");
                return None;
            }
        };
        let handed = Handed {
            tcp,
            peer,
            permit,
            counted,
        };
        match self.balance.inboxes[to].send(handed) {
            Ok(()) => None,
            Err(mpsc::error::SendError(back)) => {
                drop(back.counted);
                let tcp = TcpStream::from_std(back.tcp).ok()?;
                Some((tcp, back.permit, self.balance.count(self.me)))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;
    use tokio::sync::Semaphore;

    fn open(balance: &Balance) -> Vec<usize> {
        balance
            .open
            .iter()
            .map(|n| n.load(Ordering::Relaxed))
            .collect()
    }

    /// Connects a client to `listener` and accepts it: (the client, the accepted socket).
    async fn pair(listener: &TcpListener) -> (TcpStream, TcpStream, SocketAddr) {
        let client = TcpStream::connect(listener.local_addr().unwrap());
        let (client, accepted) = tokio::join!(client, listener.accept());
        let (tcp, peer) = accepted.unwrap();
        (client.unwrap(), tcp, peer)
    }

    /// A balance of two threads: the first one's seat, the second one's inbox, 100
    /// permits and a listener on loopback.
    async fn two_threads() -> (
        Arc<Balance>,
        Seat,
        mpsc::UnboundedReceiver<Handed>,
        Arc<Semaphore>,
        TcpListener,
    ) {
        let (balance, mut inboxes) = Balance::new(2);
        let other = inboxes.pop().unwrap();
        let seat = Seat {
            balance: Arc::clone(&balance),
            me: 0,
            inbox: inboxes.pop().unwrap(),
        };
        let permits = Arc::new(Semaphore::new(100));
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        (balance, seat, other, permits, listener)
    }

    #[tokio::test]
    async fn a_thread_that_accepts_every_connection_hands_about_half_over() {
        let (balance, seat, mut other, permits, listener) = two_threads().await;
        let (mut kept, mut clients) = (Vec::new(), Vec::new());
        for _ in 0..9 {
            let (client, tcp, peer) = pair(&listener).await;
            clients.push(client);
            let permit = Arc::clone(&permits).acquire_owned().await.unwrap();
            if let Some(here) = seat.keep_or_hand(tcp, peer, permit) {
                kept.push(here);
            }
        }
        assert_eq!(kept.len(), 5, "kept where accepted");
        assert_eq!(open(&balance), [5, 4], "counted where they are served");
        assert_eq!(
            permits.available_permits(),
            91,
            "every connection keeps its permit"
        );
        // The handed ones arrive whole in the other thread's inbox, in order, and talk.
        let mut taken = Vec::new();
        while let Ok(handed) = other.try_recv() {
            taken.push(handed.arrive().expect("registered here"));
        }
        assert_eq!(taken.len(), 4);
        assert_eq!(open(&balance), [5, 4], "taking one does not count it twice");
        let (tcp, peer, _, _) = &mut taken[0];
        let client = clients
            .iter_mut()
            .find(|c| c.local_addr().unwrap() == *peer)
            .expect("the peer is one of the clients");
        client.write_all(b"ping").await.unwrap();
        let mut buf = [0u8; 4];
        tcp.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"ping");
        drop((kept, taken));
        assert_eq!(
            open(&balance),
            [0, 0],
            "closed connections are no longer counted"
        );
        assert_eq!(permits.available_permits(), 100);
    }

    #[tokio::test]
    async fn a_connection_is_kept_when_the_less_busy_thread_has_stopped() {
        let (balance, seat, other, permits, listener) = two_threads().await;
        drop(other);
        let mut kept = Vec::new();
        for _ in 0..4 {
            let (client, tcp, peer) = pair(&listener).await;
            let permit = Arc::clone(&permits).acquire_owned().await.unwrap();
            let here = seat.keep_or_hand(tcp, peer, permit).expect("kept");
            kept.push((client, here));
        }
        assert_eq!(open(&balance), [4, 0]);
        // Still served: bytes pass on the kept socket after its failed hand-over.
        let (client, (tcp, _, _)) = &mut kept[3];
        client.write_all(b"pong").await.unwrap();
        let mut buf = [0u8; 4];
        tcp.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"pong");
    }
}
