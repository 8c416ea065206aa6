//! Which addresses a push never connects to unless allowed: every range that
//! is not a public unicast host on the Internet. An address of the node's
//! own network, its loopback or its cloud's metadata service (169.254.169.254)
//! is what a server-side request forgery is after.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Why an address is refused: the kind of range it is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Forbidden {
    /// `0.0.0.0/8`, `::`: no host, or this host.
    Unspecified,
    /// `127.0.0.0/8`, `::1`: this host.
    Loopback,
    /// `10/8`, `172.16/12`, `192.168/16`, `fc00::/7`: a private network.
    Private,
    /// `100.64.0.0/10`: a carrier's or a cloud's shared network (CGNAT).
    Shared,
    /// `169.254/16`, `fe80::/10`: link-local, where cloud metadata services answer.
    LinkLocal,
    /// `224/4`, `ff00::/8`: multicast.
    Multicast,
    /// `255.255.255.255`: broadcast.
    Broadcast,
    /// `192.0.2/24`, `198.51.100/24`, `203.0.113/24`, `2001:db8::/32`, `3fff::/20`: documentation.
    Documentation,
    /// `198.18.0.0/15`: benchmarking.
    Benchmarking,
    /// Reserved or special-purpose: `192.0.0/24`, `240/4`, `100::/64`, `fec0::/10`,
    /// `64:ff9b:1::/48`, `::/96`, the IETF's `2001::/23` but for public services.
    Reserved,
}

impl Forbidden {
    /// The range, in words.
    pub fn as_str(self) -> &'static str {
        match self {
            Forbidden::Unspecified => "an unspecified",
            Forbidden::Loopback => "a loopback",
            Forbidden::Private => "a private",
            Forbidden::Shared => "a shared (carrier-grade NAT)",
            Forbidden::LinkLocal => "a link-local",
            Forbidden::Multicast => "a multicast",
            Forbidden::Broadcast => "a broadcast",
            Forbidden::Documentation => "a documentation",
            Forbidden::Benchmarking => "a benchmarking",
            Forbidden::Reserved => "a reserved",
        }
    }
}

impl fmt::Display for Forbidden {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} address", self.as_str())
    }
}

/// The range `ip` is forbidden for, or `None` for a public unicast address.
/// An IPv6 address that carries an IPv4 one (v4-mapped `::ffff:a.b.c.d`,
/// NAT64 `64:ff9b::a.b.c.d`, 6to4 `2002:aabb:ccdd::`) is judged by that
/// IPv4 address, since that is where the packets go. Teredo (`2001::/32`)
/// is refused with the rest of the IETF's `2001::/23`.
///
/// ```
/// use hourglass_push::outbound::{forbidden, Forbidden};
///
/// assert_eq!(forbidden("127.0.0.1".parse().unwrap()), Some(Forbidden::Loopback));
/// assert_eq!(forbidden("::ffff:10.0.0.1".parse().unwrap()), Some(Forbidden::Private));
/// assert_eq!(forbidden("93.184.215.14".parse().unwrap()), None);
/// ```
pub fn forbidden(ip: IpAddr) -> Option<Forbidden> {
    match ip {
        IpAddr::V4(v4) => forbidden_v4(v4),
        IpAddr::V6(v6) => forbidden_v6(v6),
    }
}

fn forbidden_v4(ip: Ipv4Addr) -> Option<Forbidden> {
    let [a, b, c, _] = ip.octets();
    let range = match (a, b, c) {
        (0, _, _) => Forbidden::Unspecified,
        (10, _, _) => Forbidden::Private,
        (100, 64..=127, _) => Forbidden::Shared,
        (127, _, _) => Forbidden::Loopback,
        (169, 254, _) => Forbidden::LinkLocal,
        (172, 16..=31, _) => Forbidden::Private,
        // 192.0.0.9 and .10 are anycast services, but nothing a task needs.
        (192, 0, 0) => Forbidden::Reserved,
        (192, 0, 2) | (198, 51, 100) | (203, 0, 113) => Forbidden::Documentation,
        (192, 88, 99) => Forbidden::Reserved,
        (192, 168, _) => Forbidden::Private,
        (198, 18..=19, _) => Forbidden::Benchmarking,
        (224..=239, _, _) => Forbidden::Multicast,
        _ if ip == Ipv4Addr::BROADCAST => Forbidden::Broadcast,
        (240..=255, _, _) => Forbidden::Reserved,
        _ => return None,
    };
    Some(range)
}

fn forbidden_v6(ip: Ipv6Addr) -> Option<Forbidden> {
    if let Some(v4) = embedded_v4(ip) {
        return forbidden_v4(v4);
    }
    let s = ip.segments();
    let range = match s {
        [0, 0, 0, 0, 0, 0, 0, 0] => Forbidden::Unspecified,
        [0, 0, 0, 0, 0, 0, 0, 1] => Forbidden::Loopback,
        // IPv4-compatible addresses (deprecated) and anything else in ::/96.
        [0, 0, 0, 0, 0, 0, _, _] => Forbidden::Reserved,
        [0x64, 0xff9b, 1, ..] => Forbidden::Reserved,
        [0x100, 0, 0, 0, ..] => Forbidden::Reserved,
        [0x2001, 0xdb8, ..] => Forbidden::Documentation,
        [0x2001, 0x0002, 0, ..] => Forbidden::Benchmarking,
        // 2001::/23 is the IETF's special-purpose block (Teredo, AMT,
        // ORCHIDv2, ...): no receiver of a task lives there.
        [0x2001, 0x0000..=0x01ff, ..] => Forbidden::Reserved,
        [0x3fff, 0x0000..=0x0fff, ..] => Forbidden::Documentation,
        [x, ..] if x & 0xfe00 == 0xfc00 => Forbidden::Private,
        [x, ..] if x & 0xffc0 == 0xfe80 => Forbidden::LinkLocal,
        [x, ..] if x & 0xffc0 == 0xfec0 => Forbidden::Reserved,
        [x, ..] if x & 0xff00 == 0xff00 => Forbidden::Multicast,
        _ => return None,
    };
    Some(range)
}

/// The IPv4 address an IPv6 one stands for, where it carries one: v4-mapped
/// (`::ffff:0:0/96`), NAT64's well-known prefix (`64:ff9b::/96`), 6to4
/// (`2002::/16`).
fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = ip.segments();
    let [_, _, _, _, _, _, hi, lo] = s;
    let tail = Ipv4Addr::new((hi >> 8) as u8, hi as u8, (lo >> 8) as u8, lo as u8);
    match s {
        [0, 0, 0, 0, 0, 0xffff, _, _] => Some(tail),
        [0x64, 0xff9b, 0, 0, 0, 0, _, _] => Some(tail),
        [0x2002, hi, lo, ..] => Some(Ipv4Addr::new((hi >> 8) as u8, hi as u8, (lo >> 8) as u8, lo as u8)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(ip: &str) -> Option<Forbidden> {
        forbidden(ip.parse().expect("an address"))
    }

    #[test]
    fn every_forbidden_ipv4_range_is_refused_at_both_ends() {
        let ranges = [
            ("0.0.0.0", "0.255.255.255", Forbidden::Unspecified),
            ("10.0.0.0", "10.255.255.255", Forbidden::Private),
            ("100.64.0.0", "100.127.255.255", Forbidden::Shared),
            ("127.0.0.0", "127.255.255.255", Forbidden::Loopback),
            ("169.254.0.0", "169.254.255.255", Forbidden::LinkLocal),
            ("172.16.0.0", "172.31.255.255", Forbidden::Private),
            ("192.0.0.0", "192.0.0.255", Forbidden::Reserved),
            ("192.0.2.0", "192.0.2.255", Forbidden::Documentation),
            ("192.88.99.0", "192.88.99.255", Forbidden::Reserved),
            ("192.168.0.0", "192.168.255.255", Forbidden::Private),
            ("198.18.0.0", "198.19.255.255", Forbidden::Benchmarking),
            ("198.51.100.0", "198.51.100.255", Forbidden::Documentation),
            ("203.0.113.0", "203.0.113.255", Forbidden::Documentation),
            ("224.0.0.0", "239.255.255.255", Forbidden::Multicast),
            ("240.0.0.0", "255.255.255.254", Forbidden::Reserved),
            ("255.255.255.255", "255.255.255.255", Forbidden::Broadcast),
        ];
        for (first, last, range) in ranges {
            assert_eq!(of(first), Some(range), "{first}");
            assert_eq!(of(last), Some(range), "{last}");
        }
    }

    #[test]
    fn public_ipv4_addresses_next_to_forbidden_ranges_pass() {
        for ip in [
            "1.1.1.1",
            "9.255.255.255",
            "11.0.0.0",
            "100.63.255.255",
            "100.128.0.0",
            "126.255.255.255",
            "128.0.0.0",
            "169.253.255.255",
            "172.15.255.255",
            "172.32.0.0",
            "192.0.1.0",
            "192.167.255.255",
            "192.169.0.0",
            "198.17.255.255",
            "198.20.0.0",
            "223.255.255.255",
        ] {
            assert_eq!(of(ip), None, "{ip}");
        }
    }

    #[test]
    fn ipv6_ranges_are_refused() {
        for (ip, range) in [
            ("::", Forbidden::Unspecified),
            ("::1", Forbidden::Loopback),
            ("::7f00:1", Forbidden::Reserved),
            ("fc00::1", Forbidden::Private),
            ("fdff:ffff::1", Forbidden::Private),
            ("fe80::1", Forbidden::LinkLocal),
            ("febf::1", Forbidden::LinkLocal),
            ("fec0::1", Forbidden::Reserved),
            ("ff02::1", Forbidden::Multicast),
            ("2001:db8::1", Forbidden::Documentation),
            ("3fff::1", Forbidden::Documentation),
            ("100::1", Forbidden::Reserved),
            ("64:ff9b:1::1", Forbidden::Reserved),
            ("2001:2::1", Forbidden::Benchmarking),
            ("2001:10::1", Forbidden::Reserved),
        ] {
            assert_eq!(of(ip), Some(range), "{ip}");
        }
        for ip in ["2606:4700::1111", "2a00:1450:4001::200e", "2001:4860:4860::8888", "4000::1"] {
            assert_eq!(of(ip), None, "{ip}");
        }
    }

    #[test]
    fn ipv6_forms_of_ipv4_addresses_are_judged_as_ipv4() {
        for (ip, range) in [
            ("::ffff:127.0.0.1", Some(Forbidden::Loopback)),
            ("::ffff:169.254.169.254", Some(Forbidden::LinkLocal)),
            ("::ffff:8.8.8.8", None),
            ("64:ff9b::10.1.2.3", Some(Forbidden::Private)),
            ("64:ff9b::8.8.8.8", None),
            ("2002:7f00:1::", Some(Forbidden::Loopback)),
            ("2002:0808:0808::1", None),
            ("2001:0:4136:e378:8000:63bf:f7f7:f7f7", Some(Forbidden::Reserved)),
        ] {
            assert_eq!(of(ip), range, "{ip}");
        }
    }

    #[test]
    fn a_reason_reads_as_words() {
        assert_eq!(Forbidden::Loopback.to_string(), "a loopback address");
        assert_eq!(Forbidden::Shared.to_string(), "a shared (carrier-grade NAT) address");
    }
}
