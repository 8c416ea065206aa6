//! Outbound safety: where a push may connect.
//!
//! A push target is a URL a user wrote, and the node that fetches it sits
//! inside a network the user may not reach: its loopback, its private
//! networks, its cloud's metadata service. Fetching whatever a user names
//! from there is a server-side request forgery (SSRF). So, unless the
//! [`AllowList`] opens the host, a push refuses every address that is not a
//! public unicast one ([`forbidden`]), and checks **the address it
//! connects to**, not the name:
//! - an IP-literal URL is checked as written ([`Outbound::check_url`]),
//!   before any connection;
//! - a DNS name is resolved by [`GuardedResolver`], the HTTP client's only
//!   resolver, which hands the connector the public addresses alone. A name
//!   that answers a public address to a check and a private one to the
//!   connection (DNS rebinding) cannot get through: there is no separate
//!   check to fool.
//!
//! No proxy is used (a proxy would resolve the name itself) and redirects
//! are not followed (a public receiver could redirect to a private one).
//! At enqueue, [`Outbound::check_url`] refuses what can be known then: an
//! IP literal in a forbidden range, or a name that always means this host
//! (`localhost`, `*.localhost`). A name resolved at delivery that leads
//! only to forbidden addresses makes the task dead with the [`Refusal`] as
//! its reason.

mod allow;
mod ranges;
mod resolver;

use std::fmt;
use std::net::IpAddr;

pub use allow::{AllowError, AllowList};
pub use ranges::{forbidden, Forbidden};
pub use resolver::{GuardedResolver, Lookup, SystemLookup};

/// Why a target was refused: its host leads to a forbidden address, and the
/// allow list does not open it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    host: Box<str>,
    address: Option<IpAddr>,
    range: Forbidden,
}

impl Refusal {
    /// The host of the refused target, as the URL names it.
    pub fn host(&self) -> &str {
        &self.host
    }

    /// The address refused, if the host was resolved or is one.
    pub fn address(&self) -> Option<IpAddr> {
        self.address
    }

    /// The kind of range refused.
    pub fn range(&self) -> Forbidden {
        self.range
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Refusal { host, address, range } = self;
        match address {
            None => write!(f, "target refused: {host} names {range}")?,
            Some(ip) if ip.to_string() == **host => write!(f, "target refused: {ip} is {range}")?,
            Some(ip) => write!(f, "target refused: {host} resolves to {ip}, {range}")?,
        }
        f.write_str(", and the host is not on the push allow list")
    }
}

impl std::error::Error for Refusal {}

/// The outbound rules of one node: its [`AllowList`], and the checks that
/// stand before a connection.
#[derive(Debug, Clone, Default)]
pub struct Outbound {
    allow: AllowList,
}

impl Outbound {
    /// The rules with `allow` as the allow list.
    pub fn new(allow: AllowList) -> Outbound {
        Outbound { allow }
    }

    /// The allow list.
    pub fn allow(&self) -> &AllowList {
        &self.allow
    }

    /// Whether the allow list opens `url`'s host and port: such a target is
    /// sent with no check of its addresses.
    pub fn allows(&self, url: &url::Url) -> bool {
        self.allow.allows_url(url)
    }

    /// What can be known of `url` without resolving it: refused if its host
    /// is an IP address in a forbidden range, or a name that always means
    /// this host, unless the allow list opens it. The API calls this at
    /// enqueue; a push calls it before every request, since an IP literal
    /// never reaches the resolver.
    ///
    /// ```
    /// use hourglass_push::outbound::{AllowList, Outbound};
    ///
    /// let strict = Outbound::default();
    /// let url = "http://169.254.169.254/latest/meta-data".parse().unwrap();
    /// assert_eq!(
    ///     strict.check_url(&url).unwrap_err().to_string(),
    ///     "target refused: 169.254.169.254 is a link-local address, and the host is not on the push allow list",
    /// );
    /// assert!(strict.check_url(&"http://localhost:8080/".parse().unwrap()).is_err());
    /// assert!(strict.check_url(&"https://hooks.example.com/".parse().unwrap()).is_ok());
    ///
    /// let open = Outbound::new(AllowList::parse(["localhost:8080"]).unwrap());
    /// assert!(open.check_url(&"http://localhost:8080/".parse().unwrap()).is_ok());
    /// ```
    pub fn check_url(&self, url: &url::Url) -> Result<(), Refusal> {
        if self.allows(url) {
            return Ok(());
        }
        let refused = |address: Option<IpAddr>, range| Refusal { host: host_text(url).into(), address, range };
        match url.host() {
            Some(url::Host::Ipv4(ip)) => check_ip(ip.into()).map_err(|range| refused(Some(ip.into()), range)),
            Some(url::Host::Ipv6(ip)) => check_ip(ip.into()).map_err(|range| refused(Some(ip.into()), range)),
            Some(url::Host::Domain(name)) if names_this_host(name) => Err(refused(None, Forbidden::Loopback)),
            Some(url::Host::Domain(_)) | None => Ok(()),
        }
    }
}

fn check_ip(ip: IpAddr) -> Result<(), Forbidden> {
    forbidden(ip).map_or(Ok(()), Err)
}

/// `localhost` and its subdomains always resolve to a loopback address
/// (RFC 6761).
fn names_this_host(name: &str) -> bool {
    let name = allow::normal_name(name);
    name == "localhost" || name.ends_with(".localhost")
}

/// A URL's host as written in it, brackets of an IPv6 address left out.
fn host_text(url: &url::Url) -> String {
    match url.host() {
        Some(url::Host::Ipv6(ip)) => ip.to_string(),
        Some(host) => host.to_string(),
        None => String::new(),
    }
}

/// Refuses `name` resolved to `addresses` when there are some and none of
/// them is public: the refusal names the first.
pub(crate) fn refusal_of_resolved(name: &str, addresses: &[IpAddr]) -> Option<Refusal> {
    if addresses.iter().any(|&ip| forbidden(ip).is_none()) {
        return None;
    }
    let first = *addresses.first()?;
    let range = forbidden(first)?;
    Some(Refusal { host: name.into(), address: Some(first), range })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(outbound: &Outbound, url: &str) -> Result<(), String> {
        outbound.check_url(&url.parse().expect("a URL")).map_err(|r| r.to_string())
    }

    #[test]
    fn ip_literals_in_forbidden_ranges_are_refused_with_the_range() {
        let strict = Outbound::default();
        assert_eq!(
            check(&strict, "http://127.0.0.1:9000/"),
            Err("target refused: 127.0.0.1 is a loopback address, and the host is not on the push allow list".into())
        );
        assert_eq!(
            check(&strict, "http://[::ffff:10.1.2.3]/"),
            Err("target refused: ::ffff:10.1.2.3 is a private address, and the host is not on the push allow list"
                .into())
        );
        assert!(check(&strict, "http://[::]/").unwrap_err().contains("an unspecified address"));
        assert!(check(&strict, "http://0x7f.1/").unwrap_err().contains("127.0.0.1 is a loopback address"));
        assert_eq!(check(&strict, "https://8.8.8.8/"), Ok(()));
    }

    #[test]
    fn localhost_names_are_refused_and_other_names_wait_for_resolution() {
        let strict = Outbound::default();
        assert_eq!(
            check(&strict, "http://LOCALHOST./"),
            Err("target refused: localhost. names a loopback address, and the host is not on the push allow list"
                .into())
        );
        assert!(check(&strict, "http://api.localhost/").is_err());
        assert_eq!(check(&strict, "http://localhost.example.com/"), Ok(()));
    }

    #[test]
    fn the_allow_list_opens_its_hosts_on_its_ports() {
        let outbound = Outbound::new(AllowList::parse(["127.0.0.1:9000", "localhost"]).unwrap());
        assert_eq!(check(&outbound, "http://127.0.0.1:9000/"), Ok(()));
        assert!(check(&outbound, "http://127.0.0.1:9001/").is_err());
        assert_eq!(check(&outbound, "http://localhost:1234/"), Ok(()));
    }

    #[test]
    fn a_resolved_name_is_refused_only_when_no_address_is_public() {
        let ips = |list: &[&str]| list.iter().map(|s| s.parse().unwrap()).collect::<Vec<IpAddr>>();
        let refusal = refusal_of_resolved("rebind.test", &ips(&["10.0.0.1", "127.0.0.1"])).unwrap();
        assert_eq!(
            refusal.to_string(),
            "target refused: rebind.test resolves to 10.0.0.1, a private address, and the host is not on the push allow list"
        );
        assert_eq!(refusal.address(), Some("10.0.0.1".parse().unwrap()));
        assert_eq!(refusal.host(), "rebind.test");
        assert_eq!(refusal.range(), Forbidden::Private);
        assert_eq!(refusal_of_resolved("nothing.test", &[]), None);
        assert_eq!(refusal_of_resolved("mixed.test", &ips(&["10.0.0.1", "8.8.8.8"])), None);
    }
}
