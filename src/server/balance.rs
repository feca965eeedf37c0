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
//!
//! An inbox has its room made with the balance, before the threads start: a channel would
//! grow a block in the handing thread's heap in a burst and keep it for good, and that block
//! kept a page of the burst's freed connections resident (`crate::heap`). A thread whose
//! inbox is full keeps the connection.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::net::TcpStream;
use tokio::sync::{Notify, OwnedSemaphorePermit};

/// A thread may hold this many more open connections than the least busy one before it
/// hands new ones over.
const SLACK: usize = 1;

/// The connections an inbox holds before its thread takes them (a burst of 256 hands over
/// about half of them while the other thread is busy).
const INBOX: usize = 256;

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
    inboxes: Box<[Arc<Inbox>]>,
}

impl Balance {
    /// A balance over `threads` threads, with the inbox each thread reads (by index).
    pub(super) fn new(threads: usize) -> (Arc<Balance>, Vec<Reader>) {
        Balance::with_room(threads, INBOX)
    }

    /// [`Balance::new`] with inboxes of `room` connections.
    fn with_room(threads: usize, room: usize) -> (Arc<Balance>, Vec<Reader>) {
        let inboxes: Box<[Arc<Inbox>]> = (0..threads).map(|_| Arc::new(Inbox::new(room))).collect();
        let readers = inboxes
            .iter()
            .map(|inbox| Reader(Arc::clone(inbox)))
            .collect();
        let balance = Balance {
            open: (0..threads).map(|_| AtomicUsize::new(0)).collect(),
            inboxes,
        };
        (Arc::new(balance), readers)
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

/// Connections handed to one thread, oldest first, in room made when it was.
pub(super) struct Inbox {
    /// `None` once its thread has stopped reading it.
    handed: Mutex<Option<VecDeque<Handed>>>,
    room: usize,
    arrived: Notify,
}

impl Inbox {
    fn new(room: usize) -> Inbox {
        Inbox {
            handed: Mutex::new(Some(VecDeque::with_capacity(room))),
            room,
            arrived: Notify::new(),
        }
    }

    fn queue(&self) -> MutexGuard<'_, Option<VecDeque<Handed>>> {
        self.handed.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Puts `handed` in, or gives it back when the inbox is full or its thread has stopped.
    fn put(&self, handed: Handed) -> Result<(), Handed> {
        match self.queue().as_mut() {
            Some(queue) if queue.len() < self.room => queue.push_back(handed),
            _ => return Err(handed),
        }
        self.arrived.notify_one();
        Ok(())
    }

    fn take(&self) -> Option<Handed> {
        self.queue().as_mut()?.pop_front()
    }
}

/// The reading end of a thread's [`Inbox`]; dropping it (the thread stopped) closes it, and
/// what it held is closed with it.
pub(super) struct Reader(Arc<Inbox>);

impl Reader {
    /// The next connection handed to this thread.
    pub(super) async fn recv(&self) -> Handed {
        loop {
            if let Some(handed) = self.0.take() {
                return handed;
            }
            // A permit stored by a `put` since the `take` wakes this at once.
            self.0.arrived.notified().await;
        }
    }

    /// A connection already handed to this thread, if any.
    #[cfg(test)]
    fn try_recv(&self) -> Option<Handed> {
        self.0.take()
    }
}

impl Drop for Reader {
    fn drop(&mut self) {
        // Closed to new connections; those it held close here, outside the lock.
        let held = self.0.queue().take();
        drop(held);
    }
}

/// One serving thread's place in the [`Balance`].
pub(super) struct Seat {
    pub(super) balance: Arc<Balance>,
    pub(super) me: usize,
    pub(super) inbox: Reader,
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
    /// less busy thread (`None`). One whose thread has stopped, or whose inbox is full, is
    /// kept.
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
        match self.balance.inboxes[to].put(handed) {
            Ok(()) => None,
            Err(back) => {
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

    /// Connects `n` clients one after another, each accepted on `seat`'s thread and kept
    /// there or handed over: (those kept, the clients).
    async fn connect(
        n: usize,
        seat: &Seat,
        permits: &Arc<Semaphore>,
        listener: &TcpListener,
    ) -> (
        Vec<(TcpStream, OwnedSemaphorePermit, Counted)>,
        Vec<TcpStream>,
    ) {
        let (mut kept, mut clients) = (Vec::new(), Vec::new());
        for _ in 0..n {
            let (client, tcp, peer) = pair(listener).await;
            clients.push(client);
            let permit = Arc::clone(permits).acquire_owned().await.unwrap();
            if let Some(here) = seat.keep_or_hand(tcp, peer, permit) {
                kept.push(here);
            }
        }
        (kept, clients)
    }

    /// A balance of two threads: the first one's seat, the second one's inbox, 100
    /// permits and a listener on loopback.
    async fn two_threads() -> (Arc<Balance>, Seat, Reader, Arc<Semaphore>, TcpListener) {
        two_threads_with_room(INBOX).await
    }

    /// [`two_threads`] with inboxes of `room` connections.
    async fn two_threads_with_room(
        room: usize,
    ) -> (Arc<Balance>, Seat, Reader, Arc<Semaphore>, TcpListener) {
        let (balance, mut inboxes) = Balance::with_room(2, room);
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
        let (balance, seat, other, permits, listener) = two_threads().await;
        let (kept, mut clients) = connect(9, &seat, &permits, &listener).await;
        assert_eq!(kept.len(), 5, "kept where accepted");
        assert_eq!(open(&balance), [5, 4], "counted where they are served");
        assert_eq!(
            permits.available_permits(),
            91,
            "every connection keeps its permit"
        );
        // The handed ones arrive whole in the other thread's inbox, in order, and talk.
        let mut taken = Vec::new();
        while let Some(handed) = other.try_recv() {
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

    #[tokio::test]
    async fn a_full_inbox_leaves_the_connection_where_it_was_accepted() {
        let (balance, seat, other, permits, listener) = two_threads_with_room(2).await;
        let (kept, _clients) = connect(9, &seat, &permits, &listener).await;
        assert_eq!(kept.len(), 7, "two handed over, then the inbox was full");
        assert_eq!(open(&balance), [7, 2], "counted where they are served");
        assert!(other.try_recv().is_some() && other.try_recv().is_some());
        assert!(other.try_recv().is_none());
    }

    #[tokio::test]
    async fn a_thread_waiting_on_its_inbox_wakes_for_a_connection() {
        let (_balance, seat, other, permits, listener) = two_threads().await;
        let waiting = tokio::spawn(async move { other.recv().await.arrive().is_some() });
        tokio::task::yield_now().await;
        // Three connections on the first thread: the third goes to the idle one.
        let _open = connect(3, &seat, &permits, &listener).await;
        assert!(waiting.await.unwrap(), "the handed connection arrived");
    }
}
