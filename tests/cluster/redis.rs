//! A real `redis-server` per test, on a free loopback port, and a few lines of RESP to talk
//! to it (PING, GET, SET, INCR, HSET, PUBLISH ...): no client library between the test and
//! the bytes the routers see.
//!
//! The server keeps nothing on disk (`--save "" --appendonly no`), so a restart after
//! SIGKILL comes back empty, as a crashed cache without persistence does.

use std::future::Future;
use std::io;
use std::path::PathBuf;
use std::pin::Pin;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufStream};
use tokio::net::TcpStream;
use tokio::time::Instant;

/// One `redis-server` child process.
pub struct RedisServer {
    child: Option<Child>,
    port: u16,
    bin: PathBuf,
    /// Its working directory (`--dir`): nothing is saved there, but redis wants one.
    dir: tempfile::TempDir,
}

/// The redis-server binary: `LABROUTER_TEST_REDIS`, else `redis-server` on PATH. Missing is
/// a failure, never a skip.
fn binary() -> PathBuf {
    if let Some(path) = std::env::var_os("LABROUTER_TEST_REDIS") {
        let path = PathBuf::from(path);
        assert!(
            path.is_file(),
            "LABROUTER_TEST_REDIS={} is not a file: run scripts/test.sh, which installs redis-server",
            path.display()
        );
        return path;
    }
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|dir| dir.join("redis-server"))
        .find(|p| p.is_file())
        .unwrap_or_else(|| {
            panic!(
                "redis-server not found (neither LABROUTER_TEST_REDIS nor PATH): run \
                 scripts/test.sh, which installs it"
            )
        })
}

/// A loopback port nothing listens on right now.
fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

impl RedisServer {
    /// Starts redis-server on a free loopback port and waits until it answers PING.
    pub async fn start() -> RedisServer {
        let mut server = RedisServer {
            child: None,
            port: 0,
            bin: binary(),
            dir: tempfile::tempdir().unwrap(),
        };
        // A port found free can be taken before redis binds it: try a few.
        for _ in 0..5 {
            server.port = free_port();
            if server.launch().await {
                return server;
            }
        }
        panic!("redis-server did not start on any of 5 free ports");
    }

    /// Spawns redis-server on `self.port`; true once it answers PING, false if it exited.
    async fn launch(&mut self) -> bool {
        let child = Command::new(&self.bin)
            .args([
                "--bind",
                "127.0.0.1",
                "--port",
                &self.port.to_string(),
                "--dir",
            ])
            .arg(self.dir.path())
            .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", self.bin.display()));
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            if let Ok(mut c) = self.try_client().await {
                if c.cmd(&["PING"]).await == Reply::Str("PONG".into()) {
                    // Another test's server may have taken the port between `free_port`
                    // and this one's bind: only our own child counts.
                    if self.answering_is_ours(&mut c).await {
                        return true;
                    }
                    let mut child = self.child.take().unwrap();
                    let _ = child.kill();
                    let _ = child.wait();
                    return false;
                }
            }
            let exited = self.child.as_mut().unwrap().try_wait().unwrap().is_some();
            if exited {
                self.child = None;
                return false;
            }
            assert!(
                Instant::now() < deadline,
                "redis-server on port {} did not answer PING within 5 s",
                self.port
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Whether the server answering on the port is our child (`INFO server`'s process_id).
    async fn answering_is_ours(&self, c: &mut Resp) -> bool {
        let pid = self.child.as_ref().unwrap().id();
        match c.cmd(&["INFO", "server"]).await {
            Reply::Str(info) => info
                .lines()
                .any(|l| l.trim() == format!("process_id:{pid}")),
            _ => false,
        }
    }

    /// Sends `signal` (`STOP`, `CONT`) to the server: a stopped Redis keeps its sockets open
    /// and answers nothing, as a wedged one does.
    #[allow(dead_code)] // tests/shared_tasks uses it; tests/cluster does not
    pub fn signal(&self, signal: &str) {
        let pid = self.child.as_ref().expect("a running redis-server").id();
        let ok = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(pid.to_string())
            .status()
            .expect("kill runs");
        assert!(ok.success(), "kill -{signal} {pid}");
    }

    /// `redis://127.0.0.1:PORT/0`, what the routers get in `LABROUTER_REDIS_URL`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }

    /// SIGKILL: no shutdown, no goodbye to the connected routers.
    pub fn kill9(&mut self) {
        let mut child = self.child.take().expect("redis-server is running");
        child.kill().unwrap();
        child.wait().unwrap();
    }

    /// Starts it again on the same port (empty: nothing was saved).
    pub async fn restart(&mut self) {
        assert!(self.child.is_none(), "restart after kill9");
        let deadline = Instant::now() + Duration::from_secs(5);
        // The port is ours again at once (redis sets SO_REUSEADDR); retry if not.
        while !self.launch().await {
            assert!(
                Instant::now() < deadline,
                "redis-server did not come back on port {}",
                self.port
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    async fn try_client(&self) -> io::Result<Resp> {
        let stream = TcpStream::connect(("127.0.0.1", self.port)).await?;
        Ok(Resp {
            io: BufStream::new(stream),
        })
    }

    /// A fresh connection for the test's own commands.
    pub async fn client(&self) -> Resp {
        self.try_client().await.expect("redis-server answers")
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

// === RESP ===

/// A reply, RESP2 (and RESP3's null): simple and bulk strings are both `Str`.
#[derive(Clone, Debug, PartialEq)]
pub enum Reply {
    Nil,
    Int(i64),
    Str(String),
    Err(String),
    Arr(Vec<Reply>),
}

impl Reply {
    /// The string, or `None` for nil; panics on anything else.
    pub fn text(&self) -> Option<&str> {
        match self {
            Reply::Nil => None,
            Reply::Str(s) => Some(s),
            other => panic!("expected a string, got {other:?}"),
        }
    }

    pub fn int(&self) -> i64 {
        match self {
            Reply::Int(n) => *n,
            other => panic!("expected an integer, got {other:?}"),
        }
    }
}

/// One connection speaking RESP, one command at a time.
pub struct Resp {
    io: BufStream<TcpStream>,
}

impl Resp {
    /// Sends `args` as a command and reads its reply; an I/O error panics (the test's own
    /// Redis is expected to be up whenever the test talks to it).
    pub async fn cmd(&mut self, args: &[&str]) -> Reply {
        let mut out = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            out.extend_from_slice(a.as_bytes());
            out.extend_from_slice(b"\r\n");
        }
        self.io.write_all(&out).await.expect("write to redis");
        self.io.flush().await.expect("write to redis");
        read_reply(&mut self.io).await.expect("read from redis")
    }

    /// `cmd`, asserting the reply is not an error.
    pub async fn ok(&mut self, args: &[&str]) -> Reply {
        let reply = self.cmd(args).await;
        assert!(!matches!(reply, Reply::Err(_)), "{args:?}: {reply:?}");
        reply
    }

    pub async fn get(&mut self, key: &str) -> Option<String> {
        self.ok(&["GET", key]).await.text().map(str::to_string)
    }

    pub async fn incr(&mut self, key: &str) -> i64 {
        self.ok(&["INCR", key]).await.int()
    }

    /// PUBLISH; the number of subscribers that got it.
    pub async fn publish(&mut self, channel: &str, message: &str) -> i64 {
        self.ok(&["PUBLISH", channel, message]).await.int()
    }

    /// HSET of `fields` as (field, value) pairs.
    pub async fn hset(&mut self, key: &str, fields: &[(&str, &str)]) {
        let mut args = vec!["HSET", key];
        for (f, v) in fields {
            args.push(f);
            args.push(v);
        }
        self.ok(&args).await;
    }
}

fn bad(what: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what)
}

/// Reads one reply (recursively for arrays).
fn read_reply(
    io: &mut BufStream<TcpStream>,
) -> Pin<Box<dyn Future<Output = io::Result<Reply>> + Send + '_>> {
    Box::pin(async move {
        let mut line = String::new();
        if io.read_line(&mut line).await? == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        let line = line.trim_end_matches("\r\n");
        let (kind, rest) = line.split_at_checked(1).ok_or_else(|| bad(line.into()))?;
        let number = || rest.parse::<i64>().map_err(|_| bad(line.to_string()));
        Ok(match kind {
            "+" => Reply::Str(rest.to_string()),
            "-" => Reply::Err(rest.to_string()),
            ":" => Reply::Int(number()?),
            "_" => Reply::Nil,
            "$" => match usize::try_from(number()?) {
                Err(_) => Reply::Nil,
                Ok(len) => {
                    let mut buf = vec![0; len + 2];
                    io.read_exact(&mut buf).await?;
                    buf.truncate(len);
                    Reply::Str(String::from_utf8(buf).map_err(|e| bad(e.to_string()))?)
                }
            },
            "*" => match usize::try_from(number()?) {
                Err(_) => Reply::Nil,
                Ok(n) => {
                    let mut items = Vec::with_capacity(n);
                    for _ in 0..n {
                        items.push(read_reply(io).await?);
                    }
                    Reply::Arr(items)
                }
            },
            _ => return Err(bad(format!("unexpected reply {line:?}"))),
        })
    })
}
