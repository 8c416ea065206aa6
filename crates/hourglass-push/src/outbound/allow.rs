//! The allow list: hosts, with or without a port, that a push may reach
//! whatever their addresses, for receivers on the node's own network.

use std::fmt;
use std::net::IpAddr;

use crate::limits::{ALLOW_ENTRIES_MAX, ALLOW_ENTRY_BYTES_MAX};

/// Hosts opened to push delivery: entries `HOST[:PORT]` (an IPv6 address in
/// brackets, `[::1]:8080`), or `*` for every host. A host is a DNS name,
/// matched without regard to case or a trailing dot, or an IP address,
/// matched as an address. Without a port an entry opens every port of its
/// host.
///
/// ```
/// use hourglass_push::outbound::AllowList;
///
/// let allow = AllowList::parse(["hooks.internal", "127.0.0.1:8080", "[::1]"]).unwrap();
/// assert!(allow.allows_url(&"http://HOOKS.internal./x".parse().unwrap()));
/// assert!(allow.allows_url(&"http://127.0.0.1:8080/".parse().unwrap()));
/// assert!(!allow.allows_url(&"http://127.0.0.1:8081/".parse().unwrap()));
/// assert!(allow.allows_url(&"https://[::1]/".parse().unwrap()));
/// assert!(AllowList::parse(["*"]).unwrap().allows_url(&"http://10.0.0.1/".parse().unwrap()));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AllowList {
    any: bool,
    entries: Vec<Entry>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    host: Host,
    port: Option<u16>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Host {
    /// Lowercase, no trailing dot.
    Name(Box<str>),
    Ip(IpAddr),
}

/// Why an allow-list entry was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum AllowError {
    /// More entries than [`ALLOW_ENTRIES_MAX`].
    TooMany,
    /// The entry is not `HOST[:PORT]` or `*`; the text says what is wrong.
    Malformed {
        /// The entry, cut to [`ALLOW_ENTRY_BYTES_MAX`].
        entry: String,
        /// What is wrong with it.
        why: &'static str,
    },
}

impl fmt::Display for AllowError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AllowError::TooMany => write!(f, "more than {ALLOW_ENTRIES_MAX} allow-list entries"),
            AllowError::Malformed { entry, why } => {
                write!(f, "allow-list entry {entry:?} is not HOST[:PORT] or *: {why}")
            }
        }
    }
}

impl std::error::Error for AllowError {}

impl AllowList {
    /// Allows nothing: every target must resolve to a public address.
    pub fn none() -> AllowList {
        AllowList::default()
    }

    /// Allows every host (`*`): for a node whose receivers are all its own.
    pub fn any() -> AllowList {
        AllowList { any: true, entries: Vec::new() }
    }

    /// A list of `entries`, each `HOST[:PORT]` or `*`.
    pub fn parse<S: AsRef<str>>(entries: impl IntoIterator<Item = S>) -> Result<AllowList, AllowError> {
        let mut list = AllowList::none();
        for entry in entries {
            list.add(entry.as_ref())?;
        }
        Ok(list)
    }

    /// Adds one entry, `HOST[:PORT]` or `*`.
    pub fn add(&mut self, entry: &str) -> Result<(), AllowError> {
        if self.entries.len() + usize::from(self.any) >= ALLOW_ENTRIES_MAX {
            return Err(AllowError::TooMany);
        }
        let entry = entry.trim();
        if entry == "*" {
            self.any = true;
            return Ok(());
        }
        let parsed = parse_entry(entry).map_err(|why| AllowError::Malformed { entry: cut(entry), why })?;
        self.entries.push(parsed);
        Ok(())
    }

    /// Whether it allows nothing.
    pub fn is_empty(&self) -> bool {
        !self.any && self.entries.is_empty()
    }

    /// Whether it allows every host.
    pub fn allows_any(&self) -> bool {
        self.any
    }

    /// Whether `url`'s host, on its port (the scheme's if none is written),
    /// is allowed.
    pub fn allows_url(&self, url: &url::Url) -> bool {
        if self.any {
            return true;
        }
        let (Some(host), Some(port)) = (url.host(), url.port_or_known_default()) else { return false };
        let host = match host {
            url::Host::Domain(name) => Host::Name(normal_name(name).into()),
            url::Host::Ipv4(ip) => Host::Ip(ip.into()),
            url::Host::Ipv6(ip) => Host::Ip(ip.into()),
        };
        self.entries.iter().any(|e| e.host == host && e.port.is_none_or(|p| p == port))
    }
}

/// A DNS name as entries and URLs are compared: lowercase, no trailing dot.
pub(crate) fn normal_name(name: &str) -> String {
    name.strip_suffix('.').unwrap_or(name).to_ascii_lowercase()
}

fn parse_entry(entry: &str) -> Result<Entry, &'static str> {
    if entry.is_empty() {
        return Err("it is empty");
    }
    if entry.len() > ALLOW_ENTRY_BYTES_MAX {
        return Err("it is too long");
    }
    if entry.contains("://") {
        return Err("a host, not a URL");
    }
    // A bare IPv6 address has colons of its own: it takes no port.
    if let Ok(ip) = entry.parse::<IpAddr>() {
        return Ok(Entry { host: Host::Ip(ip), port: None });
    }
    let (host, port) = if let Some(rest) = entry.strip_prefix('[') {
        let (ip, after) = rest.split_once(']').ok_or("a [ without its ]")?;
        let ip = ip.parse::<std::net::Ipv6Addr>().map_err(|_| "not an IPv6 address in [ ]")?;
        let port = match after {
            "" => None,
            _ => Some(after.strip_prefix(':').ok_or("text after ]")?),
        };
        (Host::Ip(ip.into()), port)
    } else {
        let (host, port) = match entry.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (entry, None),
        };
        let host = match host.parse::<IpAddr>() {
            Ok(ip) => Host::Ip(ip),
            Err(_) => Host::Name(dns_name(host)?.into()),
        };
        (host, port)
    };
    let port = match port {
        None => None,
        Some(port) => match port.parse::<u16>() {
            Ok(0) | Err(_) => return Err("the port is not 1 to 65535"),
            Ok(port) => Some(port),
        },
    };
    Ok(Entry { host, port })
}

/// A DNS name's normal form, if it is one: labels of letters, digits, `-`
/// and `_`, at most 63 bytes each and 253 in all.
fn dns_name(host: &str) -> Result<String, &'static str> {
    let name = normal_name(host);
    let label_ok = |l: &str| {
        !l.is_empty() && l.len() <= 63 && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    };
    if name.is_empty() || name.len() > 253 || !name.split('.').all(label_ok) {
        return Err("not a DNS name or an IP address");
    }
    Ok(name)
}

fn cut(entry: &str) -> String {
    entry[..entry.floor_char_boundary(ALLOW_ENTRY_BYTES_MAX)].to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allows(list: &AllowList, url: &str) -> bool {
        list.allows_url(&url.parse().expect("a URL"))
    }

    #[test]
    fn an_entry_without_a_port_opens_every_port_and_scheme() {
        let list = AllowList::parse(["receiver.local"]).unwrap();
        assert!(allows(&list, "http://receiver.local/"));
        assert!(allows(&list, "https://receiver.local:8443/hook"));
        assert!(allows(&list, "http://Receiver.Local./"));
        assert!(!allows(&list, "http://other.local/"));
        assert!(!allows(&list, "http://sub.receiver.local/"));
    }

    #[test]
    fn an_entry_with_a_port_opens_that_port_only_and_default_ports_count() {
        let list = AllowList::parse(["hooks:443", "10.0.0.7:8080", "[fd00::1]:9000"]).unwrap();
        assert!(allows(&list, "https://hooks/"));
        assert!(!allows(&list, "http://hooks/"));
        assert!(allows(&list, "http://10.0.0.7:8080/"));
        assert!(!allows(&list, "http://10.0.0.7/"));
        assert!(allows(&list, "http://[fd00::1]:9000/"));
        assert!(!allows(&list, "http://[fd00::1]:9001/"));
    }

    #[test]
    fn addresses_match_as_addresses_not_as_text() {
        let list = AllowList::parse(["::1", "127.0.0.1"]).unwrap();
        assert!(allows(&list, "http://[0:0::1]:1234/"));
        // The URL parser writes 127.1 and 2130706433 as 127.0.0.1.
        assert!(allows(&list, "http://127.1/"));
        assert!(allows(&list, "http://2130706433/"));
        assert!(!allows(&list, "http://localhost/"));
    }

    #[test]
    fn star_opens_everything_and_nothing_opens_nothing() {
        assert!(allows(&AllowList::parse([" * "]).unwrap(), "http://169.254.169.254/"));
        assert!(AllowList::any().allows_any());
        assert!(!allows(&AllowList::none(), "http://127.0.0.1/"));
        assert!(AllowList::none().is_empty());
    }

    #[test]
    fn malformed_entries_say_why() {
        for (entry, why) in [
            ("", "it is empty"),
            ("host:0", "the port is not 1 to 65535"),
            ("host:http", "the port is not 1 to 65535"),
            ("[::1", "a [ without its ]"),
            ("[10.0.0.1]", "not an IPv6 address in [ ]"),
            ("[::1]8080", "text after ]"),
            ("ho st", "not a DNS name or an IP address"),
            ("a..b", "not a DNS name or an IP address"),
            ("http://host", "a host, not a URL"),
        ] {
            let err = AllowList::parse([entry]).unwrap_err();
            assert_eq!(err, AllowError::Malformed { entry: entry.to_owned(), why }, "{entry:?}");
        }
        let long = "a".repeat(ALLOW_ENTRY_BYTES_MAX + 1);
        assert!(AllowList::parse([long.as_str()]).unwrap_err().to_string().contains("it is too long"));
    }

    #[test]
    fn the_list_is_bounded() {
        let entries: Vec<String> = (0..ALLOW_ENTRIES_MAX).map(|i| format!("h{i}")).collect();
        let mut list = AllowList::parse(&entries).unwrap();
        assert_eq!(list.add("one-more"), Err(AllowError::TooMany));
    }
}
