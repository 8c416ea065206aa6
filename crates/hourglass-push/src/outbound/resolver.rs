//! The HTTP client's resolver: names become addresses here, and only here,
//! so the addresses it hands the connector are the ones connected to.

use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;

use reqwest::dns::{Addrs, Name, Resolve, Resolving};

use super::refusal_of_resolved;

/// Turns a DNS name into addresses. [`SystemLookup`] asks the system's
/// resolver; a test or a DNS cache may stand in for it.
pub trait Lookup: Send + Sync + 'static {
    /// The addresses of `host`, in the order to try them.
    fn lookup(&self, host: &str) -> Pin<Box<dyn Future<Output = io::Result<Vec<IpAddr>>> + Send>>;
}

/// The system's resolver (`getaddrinfo`, on tokio's blocking threads).
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemLookup;

impl Lookup for SystemLookup {
    fn lookup(&self, host: &str) -> Pin<Box<dyn Future<Output = io::Result<Vec<IpAddr>>> + Send>> {
        let host = host.to_owned();
        Box::pin(async move { Ok(tokio::net::lookup_host((host.as_str(), 0)).await?.map(|a| a.ip()).collect()) })
    }
}

/// A [`Resolve`] for reqwest that, when guarding, keeps a name's public
/// addresses only, and fails with the [`Refusal`](super::Refusal) when it
/// has none: the connector never sees a forbidden address. Unguarded, for
/// hosts the allow list opens, it hands on every address.
#[derive(Clone)]
pub struct GuardedResolver {
    lookup: Arc<dyn Lookup>,
    guard: bool,
}

impl GuardedResolver {
    /// A resolver on `lookup` that refuses forbidden addresses.
    pub fn guarding(lookup: Arc<dyn Lookup>) -> GuardedResolver {
        GuardedResolver { lookup, guard: true }
    }

    /// A resolver on `lookup` that refuses nothing: for allowed hosts.
    pub fn open(lookup: Arc<dyn Lookup>) -> GuardedResolver {
        GuardedResolver { lookup, guard: false }
    }

    /// The addresses a connection to `name` may use.
    pub async fn resolve_name(&self, name: &str) -> Result<Vec<IpAddr>, Box<dyn std::error::Error + Send + Sync>> {
        let found = self.lookup.lookup(name).await?;
        if !self.guard {
            return Ok(found);
        }
        if let Some(refusal) = refusal_of_resolved(name, &found) {
            return Err(Box::new(refusal));
        }
        Ok(found.into_iter().filter(|&ip| super::forbidden(ip).is_none()).collect())
    }
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let this = self.clone();
        Box::pin(async move {
            let ips = this.resolve_name(name.as_str()).await?;
            if ips.is_empty() {
                return Err(io::Error::new(io::ErrorKind::NotFound, format!("{} has no address", name.as_str())).into());
            }
            // Port 0: the connector puts the URL's port in.
            let addrs: Addrs = Box::new(ips.into_iter().map(|ip| SocketAddr::new(ip, 0)));
            Ok(addrs)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outbound::{Forbidden, Refusal};

    struct Fixed(Vec<IpAddr>);

    impl Lookup for Fixed {
        fn lookup(&self, _: &str) -> Pin<Box<dyn Future<Output = io::Result<Vec<IpAddr>>> + Send>> {
            let ips = self.0.clone();
            Box::pin(async move { Ok(ips) })
        }
    }

    fn fixed(ips: &[&str]) -> Arc<dyn Lookup> {
        Arc::new(Fixed(ips.iter().map(|s| s.parse().unwrap()).collect()))
    }

    #[tokio::test]
    async fn guarding_keeps_public_addresses_and_refuses_a_name_with_none() {
        let mixed = GuardedResolver::guarding(fixed(&["127.0.0.1", "93.184.215.14", "::1"]));
        assert_eq!(mixed.resolve_name("mixed.test").await.unwrap(), vec!["93.184.215.14".parse::<IpAddr>().unwrap()]);

        let private = GuardedResolver::guarding(fixed(&["::ffff:127.0.0.1", "10.0.0.1"]));
        let err = private.resolve_name("rebind.test").await.unwrap_err();
        let refusal = err.downcast_ref::<Refusal>().expect("a refusal");
        assert_eq!(refusal.range(), Forbidden::Loopback);
        assert_eq!(refusal.host(), "rebind.test");
    }

    #[tokio::test]
    async fn open_hands_on_every_address() {
        let open = GuardedResolver::open(fixed(&["127.0.0.1", "10.0.0.1"]));
        assert_eq!(open.resolve_name("allowed.test").await.unwrap().len(), 2);
    }

    #[tokio::test]
    async fn the_system_resolves_localhost_to_loopback_and_guarding_refuses_it() {
        let system = GuardedResolver::guarding(Arc::new(SystemLookup));
        let err = system.resolve_name("localhost").await.unwrap_err();
        assert_eq!(err.downcast_ref::<Refusal>().expect("a refusal").range(), Forbidden::Loopback);
    }
}
