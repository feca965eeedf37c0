//! How a callback's host name becomes the addresses its attempt connects to: looked up once
//! per connection by the callback client itself, so what is connected to is what was
//! looked up.

use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;

use reqwest::dns::{Addrs, Name, Resolve, Resolving};

/// Where a host name's addresses come from: the system resolver in service, a table in
/// tests (which must never look up a name outside the machine).
pub trait Lookup: Send + Sync {
    fn lookup(&self, host: &str) -> Pin<Box<dyn Future<Output = io::Result<Vec<IpAddr>>> + Send>>;
}

/// The system resolver (getaddrinfo, on tokio's blocking pool).
pub struct SystemLookup;

impl Lookup for SystemLookup {
    fn lookup(&self, host: &str) -> Pin<Box<dyn Future<Output = io::Result<Vec<IpAddr>>> + Send>> {
        let host = host.to_owned();
        Box::pin(async move {
            let found = tokio::net::lookup_host((host.as_str(), 0)).await?;
            Ok(found.map(|a| a.ip()).collect())
        })
    }
}

/// The callback client's resolver: the addresses a [`Lookup`] gives, as they are.
pub(super) struct Resolver {
    pub(super) lookup: Arc<dyn Lookup>,
}

impl Resolve for Resolver {
    fn resolve(&self, name: Name) -> Resolving {
        let lookup = Arc::clone(&self.lookup);
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let found = lookup.lookup(&host).await?;
            let addrs: Addrs = Box::new(found.into_iter().map(|ip| SocketAddr::new(ip, 0)));
            Ok(addrs)
        })
    }
}
