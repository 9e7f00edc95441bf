//! Where tollgate's own connections on the model's behalf may go (WebFetch, the sandbox
//! proxy): which hosts a domain pattern may name, which addresses are internal, and the one
//! resolver both use, so a name is resolved once and the connection goes to the address that
//! was checked. Never connects by itself.

use std::collections::HashMap;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

use tollgate_policy::DomainPattern;

/// A kind of address no fetch or proxied connection reaches unless a rule names the address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InternalAddress {
    Unspecified,
    Loopback,
    /// RFC 1918.
    Private,
    /// 100.64.0.0/10.
    SharedCgnat,
    LinkLocal,
    /// 169.254.169.254, fd00:ec2::254, 169.254.170.2: the instance's credentials live here.
    CloudMetadata,
    /// fc00::/7.
    UniqueLocal,
    /// An IPv4 address written as IPv6 (`::ffff:a.b.c.d`, `::a.b.c.d`), whatever it holds.
    Ipv4InIpv6,
    Broadcast,
    Multicast,
    /// Documentation, benchmarking, reserved and protocol ranges: nothing public lives there.
    Reserved,
}

impl fmt::Display for InternalAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            InternalAddress::Unspecified => "an unspecified address",
            InternalAddress::Loopback => "a loopback address",
            InternalAddress::Private => "a private address",
            InternalAddress::SharedCgnat => "a shared (CGNAT) address",
            InternalAddress::LinkLocal => "a link-local address",
            InternalAddress::CloudMetadata => "a cloud metadata address",
            InternalAddress::UniqueLocal => "a unique-local address",
            InternalAddress::Ipv4InIpv6 => "an IPv4 address written as IPv6",
            InternalAddress::Broadcast => "a broadcast address",
            InternalAddress::Multicast => "a multicast address",
            InternalAddress::Reserved => "a reserved address",
        })
    }
}

/// Why `ip` is internal, or `None` for a public address.
pub fn internal_address(ip: IpAddr) -> Option<InternalAddress> {
    match ip {
        IpAddr::V4(v4) => internal_v4(v4),
        IpAddr::V6(v6) => internal_v6(v6),
    }
}

fn internal_v4(ip: Ipv4Addr) -> Option<InternalAddress> {
    let [a, b, c, d] = ip.octets();
    Some(match (a, b, c, d) {
        (169, 254, 169, 254) | (169, 254, 170, 2) | (100, 100, 100, 200) => {
            InternalAddress::CloudMetadata
        }
        (0, ..) => InternalAddress::Unspecified,
        (127, ..) => InternalAddress::Loopback,
        (10, ..) | (192, 168, ..) => InternalAddress::Private,
        (172, b, ..) if (16..32).contains(&b) => InternalAddress::Private,
        (100, b, ..) if (64..128).contains(&b) => InternalAddress::SharedCgnat,
        (169, 254, ..) => InternalAddress::LinkLocal,
        (255, 255, 255, 255) => InternalAddress::Broadcast,
        (224..=239, ..) => InternalAddress::Multicast,
        (240..=255, ..)
        | (192, 0, 0 | 2, _)
        | (198, 18 | 19, ..)
        | (198, 51, 100, _)
        | (203, 0, 113, _)
        | (192, 88, 99, _) => InternalAddress::Reserved,
        _ => return None,
    })
}

fn internal_v6(ip: Ipv6Addr) -> Option<InternalAddress> {
    let segments = ip.segments();
    if ip == Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254) {
        return Some(InternalAddress::CloudMetadata);
    }
    if ip.is_unspecified() {
        return Some(InternalAddress::Unspecified);
    }
    if ip.is_loopback() {
        return Some(InternalAddress::Loopback);
    }
    Some(match segments {
        // ::ffff:0:0/96 (mapped), ::/96 (compatible, deprecated), ::ffff:0:0:0/96 (translated).
        [0, 0, 0, 0, 0, 0xffff, _, _]
        | [0, 0, 0, 0, 0, 0, _, _]
        | [0, 0, 0, 0, 0xffff, 0, _, _] => InternalAddress::Ipv4InIpv6,
        // NAT64 (64:ff9b::/96, 64:ff9b:1::/48) and 6to4 (2002::/16) reach an IPv4 address too.
        [0x64, 0xff9b, ..] => embedded_v4(segments[6], segments[7]),
        [0x2002, high, low, ..] => embedded_v4(high, low),
        [first, ..] if first & 0xfe00 == 0xfc00 => InternalAddress::UniqueLocal,
        [first, ..] if first & 0xffc0 == 0xfe80 => InternalAddress::LinkLocal,
        // Site-local, deprecated but still routed inside some networks.
        [first, ..] if first & 0xffc0 == 0xfec0 => InternalAddress::Private,
        [first, ..] if first & 0xff00 == 0xff00 => InternalAddress::Multicast,
        [0x2001, 0xdb8, ..] | [0x100, 0, 0, 0, ..] | [0x2001, 0..=0x1ff, ..] => {
            InternalAddress::Reserved
        }
        _ => return None,
    })
}

/// An IPv4 address carried inside an IPv6 prefix: internal when the IPv4 one is, and a
/// translated address is refused as a whole either way (its target cannot be known here).
fn embedded_v4(high: u16, low: u16) -> InternalAddress {
    let [a, b] = high.to_be_bytes();
    let [c, d] = low.to_be_bytes();
    internal_v4(Ipv4Addr::new(a, b, c, d)).unwrap_or(InternalAddress::Ipv4InIpv6)
}

/// What the host part of a URL or a proxy request names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Host {
    Ip(IpAddr),
    /// A name, lower case, without a trailing dot.
    Name(String),
}

impl Host {
    /// `127.0.0.1`, `[::1]`, `::1` or a name (lower-cased, one trailing dot dropped).
    pub fn parse(text: &str) -> Host {
        let bare = text.trim_start_matches('[').trim_end_matches(']');
        match bare.parse::<IpAddr>() {
            Ok(ip) => Host::Ip(ip),
            Err(_) => Host::Name(text.trim_end_matches('.').to_ascii_lowercase()),
        }
    }

    /// Whether only a rule naming this host exactly may admit it: an address, `localhost`
    /// and its subdomains, and the cloud metadata names are never matched by a wildcard.
    pub fn literal_only(&self) -> bool {
        match self {
            Host::Ip(_) => true,
            Host::Name(name) => is_internal_name(name),
        }
    }

    /// The host as a domain rule writes it (`127.0.0.1`; an IPv6 address has no rule form).
    pub fn rule_text(&self) -> String {
        match self {
            Host::Ip(ip) => ip.to_string(),
            Host::Name(name) => name.clone(),
        }
    }
}

impl fmt::Display for Host {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Host::Ip(IpAddr::V6(ip)) => write!(f, "[{ip}]"),
            Host::Ip(ip) => write!(f, "{ip}"),
            Host::Name(name) => f.write_str(name),
        }
    }
}

/// Names that lead to the machine itself or to the cloud's metadata service.
pub fn is_internal_name(name: &str) -> bool {
    const NAMES: [&str; 7] = [
        "localhost",
        "localhost.localdomain",
        "metadata",
        "metadata.google.internal",
        "metadata.goog",
        "instance-data",
        "instance-data.ec2.internal",
    ];
    let name = name.trim_end_matches('.').to_ascii_lowercase();
    NAMES.contains(&name.as_str()) || name.ends_with(".localhost")
}

/// Whether `pattern` admits `host`: as the pattern matches, except that a wildcard never
/// admits an address or an internal name (only a rule naming it exactly does).
pub fn pattern_admits(pattern: &DomainPattern, host: &Host) -> bool {
    let text = host.rule_text();
    if !pattern.matches(&text) {
        return false;
    }
    !host.literal_only() || DomainPattern::parse(&text).as_ref() == Some(pattern)
}

/// Whether one of `patterns` names `ip` exactly, which lets a connection reach it although it
/// is internal.
pub fn names_address<'a>(
    mut patterns: impl Iterator<Item = &'a DomainPattern>,
    ip: IpAddr,
) -> bool {
    let Some(exact) = DomainPattern::parse(&ip.to_string()) else {
        return false;
    };
    patterns.any(|pattern| *pattern == exact)
}

/// A connection refused before it was made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("{host} resolves to {ip}, {class}; only a rule naming {ip} itself reaches it")]
    Internal {
        host: String,
        ip: IpAddr,
        class: InternalAddress,
    },
    #[error("cannot resolve {host}: {reason}")]
    Unresolved { host: String, reason: String },
}

/// How names become addresses: the system's resolver, or a fixed table (a test's hosts file;
/// a name not in it does not resolve).
#[derive(Clone, Default)]
pub enum Resolver {
    #[default]
    System,
    Fixed(Arc<HashMap<String, Vec<IpAddr>>>),
}

impl fmt::Debug for Resolver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Resolver::System => f.write_str("Resolver::System"),
            Resolver::Fixed(map) => write!(f, "Resolver::Fixed({} names)", map.len()),
        }
    }
}

impl Resolver {
    pub fn fixed(entries: impl IntoIterator<Item = (String, Vec<IpAddr>)>) -> Resolver {
        Resolver::Fixed(Arc::new(
            entries
                .into_iter()
                .map(|(name, ips)| (name.to_ascii_lowercase(), ips))
                .collect(),
        ))
    }

    /// Every address of `host` (an address is its own), never empty.
    pub async fn resolve(&self, host: &Host, port: u16) -> Result<Vec<IpAddr>, Refusal> {
        let name = match host {
            Host::Ip(ip) => return Ok(vec![*ip]),
            Host::Name(name) => name,
        };
        let unresolved = |reason: String| Refusal::Unresolved {
            host: name.clone(),
            reason,
        };
        let mut ips: Vec<IpAddr> = match self {
            Resolver::Fixed(map) => map.get(name).cloned().unwrap_or_default(),
            Resolver::System => tokio::net::lookup_host((name.as_str(), port))
                .await
                .map_err(|err| unresolved(err.to_string()))?
                .map(|addr| addr.ip())
                .collect(),
        };
        ips.dedup();
        if ips.is_empty() {
            return Err(unresolved("no address".into()));
        }
        Ok(ips)
    }

    /// The addresses of `host` a connection may use: the public ones and those `exact` names
    /// (a rule naming the address itself). The caller connects only to these, so an internal
    /// address among a name's answers is never reached; with none left, the refusal says why.
    pub async fn checked(
        &self,
        host: &Host,
        port: u16,
        exact: impl Fn(IpAddr) -> bool,
    ) -> Result<Vec<IpAddr>, Refusal> {
        let ips = self.resolve(host, port).await?;
        let mut refused = None;
        let mut usable = Vec::with_capacity(ips.len());
        for ip in ips {
            match internal_address(ip) {
                Some(class) if !exact(ip) => {
                    refused.get_or_insert(Refusal::Internal {
                        host: host.to_string(),
                        ip,
                        class,
                    });
                }
                _ => usable.push(ip),
            }
        }
        match refused {
            Some(refusal) if usable.is_empty() => Err(refusal),
            _ => Ok(usable),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn internal_addresses_are_named_by_class() {
        let table: [(&str, Option<InternalAddress>); 34] = [
            ("127.0.0.1", Some(InternalAddress::Loopback)),
            ("127.255.1.2", Some(InternalAddress::Loopback)),
            ("0.0.0.0", Some(InternalAddress::Unspecified)),
            ("10.1.2.3", Some(InternalAddress::Private)),
            ("172.16.0.1", Some(InternalAddress::Private)),
            ("172.31.255.255", Some(InternalAddress::Private)),
            ("192.168.1.1", Some(InternalAddress::Private)),
            ("100.64.0.1", Some(InternalAddress::SharedCgnat)),
            ("100.127.255.254", Some(InternalAddress::SharedCgnat)),
            ("169.254.1.1", Some(InternalAddress::LinkLocal)),
            ("169.254.169.254", Some(InternalAddress::CloudMetadata)),
            ("255.255.255.255", Some(InternalAddress::Broadcast)),
            ("224.0.0.1", Some(InternalAddress::Multicast)),
            ("240.0.0.1", Some(InternalAddress::Reserved)),
            ("::", Some(InternalAddress::Unspecified)),
            ("::1", Some(InternalAddress::Loopback)),
            ("::ffff:7f00:1", Some(InternalAddress::Ipv4InIpv6)),
            ("::ffff:8.8.8.8", Some(InternalAddress::Ipv4InIpv6)),
            ("::127.0.0.1", Some(InternalAddress::Ipv4InIpv6)),
            ("64:ff9b::7f00:1", Some(InternalAddress::Loopback)),
            ("64:ff9b::808:808", Some(InternalAddress::Ipv4InIpv6)),
            ("2002:a9fe:a9fe::", Some(InternalAddress::CloudMetadata)),
            ("fc00::1", Some(InternalAddress::UniqueLocal)),
            ("fd12:3456::1", Some(InternalAddress::UniqueLocal)),
            ("fd00:ec2::254", Some(InternalAddress::CloudMetadata)),
            ("fe80::1", Some(InternalAddress::LinkLocal)),
            ("ff02::1", Some(InternalAddress::Multicast)),
            ("2001:db8::1", Some(InternalAddress::Reserved)),
            ("8.8.8.8", None),
            ("172.32.0.1", None),
            ("100.128.0.1", None),
            ("1.1.1.1", None),
            ("2606:4700::1111", None),
            ("2a00:1450:4001::200e", None),
        ];
        for (ip, want) in table {
            assert_eq!(internal_address(ip.parse().unwrap()), want, "{ip}");
        }
    }

    #[test]
    fn wildcards_never_admit_addresses_or_internal_names() {
        let star = DomainPattern::parse("*").unwrap();
        let sub = DomainPattern::parse("*.localhost").unwrap();
        let quad = DomainPattern::parse("*.0.0.1").unwrap();
        for host in [
            "localhost",
            "metadata",
            "[::1]",
            "[::ffff:7f00:1]",
            "127.0.0.1",
            "a.localhost",
            "LOCALHOST.",
        ] {
            let host = Host::parse(host);
            for pattern in [&star, &sub, &quad] {
                assert!(!pattern_admits(pattern, &host), "{pattern:?} {host}");
            }
        }
        assert!(pattern_admits(&star, &Host::parse("docs")));
        let exact = DomainPattern::parse("127.0.0.1").unwrap();
        assert!(pattern_admits(&exact, &Host::parse("127.0.0.1")));
        let exact = DomainPattern::parse("localhost").unwrap();
        assert!(pattern_admits(&exact, &Host::parse("localhost")));
        assert!(names_address(
            [&exact, &DomainPattern::parse("127.0.0.1").unwrap()].into_iter(),
            "127.0.0.1".parse().unwrap()
        ));
        assert!(!names_address(
            [&star].into_iter(),
            "127.0.0.1".parse().unwrap()
        ));
    }

    #[tokio::test]
    async fn a_name_is_checked_by_every_address_it_resolves_to() {
        let resolver = Resolver::fixed([
            ("public.test".into(), vec!["93.184.216.34".parse().unwrap()]),
            (
                "mixed.test".into(),
                vec![
                    "93.184.216.34".parse().unwrap(),
                    "10.0.0.1".parse().unwrap(),
                ],
            ),
            ("local.test".into(), vec!["127.0.0.1".parse().unwrap()]),
        ]);
        let host = |name: &str| Host::parse(name);
        assert!(
            resolver
                .checked(&host("public.test"), 80, |_| false)
                .await
                .is_ok()
        );
        assert_eq!(
            resolver.checked(&host("mixed.test"), 80, |_| false).await,
            Ok(vec!["93.184.216.34".parse().unwrap()]),
            "the internal answer is dropped, the connection goes to the public one"
        );
        assert!(
            resolver
                .checked(&host("local.test"), 80, |_| false)
                .await
                .is_err()
        );
        assert!(
            resolver
                .checked(&host("local.test"), 80, |_| true)
                .await
                .is_ok()
        );
        assert!(matches!(
            resolver.checked(&host("unknown.test"), 80, |_| true).await,
            Err(Refusal::Unresolved { .. })
        ));
    }
}
