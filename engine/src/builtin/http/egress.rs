//! Where the `durable.http` step may connect: public addresses only, unless the operator allows
//! more (`DURABLE_CONNECTION_ALLOW`, a comma-separated list of host names and CIDRs). Every
//! name is resolved by [`GuardedResolver`], which hands the HTTP client only addresses that
//! pass, so the address checked is the address connected to (a name that resolves to a private
//! address a second time, DNS rebinding, gets nothing); literal addresses in a URL, the first
//! one and every redirect's, are checked before the client sees them.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use ipnet::IpNet;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};

/// The variable listing the non-public hosts and networks the `http` step may reach.
pub const CONNECTION_ALLOW_ENV: &str = "DURABLE_CONNECTION_ALLOW";

/// Why an address was refused: the message names what to allow.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EgressError {
    /// The address is loopback, private, link-local or otherwise not public.
    #[error(
        "`{host}` resolves to {address}, which is not a public address; an operator can allow it with {CONNECTION_ALLOW_ENV}={host} (or its network as a CIDR)"
    )]
    Refused {
        /// The host as the URL named it.
        host: String,
        /// The address it came to.
        address: IpAddr,
    },
    /// The name resolved to nothing.
    #[error("`{0}` does not resolve to any address")]
    NoAddress(String),
    /// An entry of the allow list is neither a host name nor a CIDR.
    #[error(
        "{CONNECTION_ALLOW_ENV} entry `{0}` is neither a host name nor an address or CIDR (`10.0.0.0/8`)"
    )]
    BadEntry(String),
}

/// The operator's exceptions to "public addresses only".
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EgressPolicy {
    hosts: Vec<String>,
    nets: Vec<IpNet>,
}

impl EgressPolicy {
    /// Public addresses only.
    pub fn public_only() -> Self {
        Self::default()
    }

    /// The policy of a comma-separated list of host names, addresses and CIDRs.
    pub fn parse(list: &str) -> Result<Self, EgressError> {
        let mut policy = Self::default();
        for entry in list.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            if let Ok(net) = entry.parse::<IpNet>() {
                policy.nets.push(net);
            } else if let Ok(ip) = entry.parse::<IpAddr>() {
                policy.nets.push(IpNet::from(ip));
            } else if entry.len() <= 253
                && entry
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.'))
            {
                policy.hosts.push(entry.to_ascii_lowercase());
            } else {
                return Err(EgressError::BadEntry(entry.chars().take(100).collect()));
            }
        }
        Ok(policy)
    }

    /// The policy `DURABLE_CONNECTION_ALLOW` sets (public addresses only when unset).
    pub fn from_env() -> Result<Self, EgressError> {
        match std::env::var(CONNECTION_ALLOW_ENV) {
            Ok(list) => Self::parse(&list),
            Err(_) => Ok(Self::public_only()),
        }
    }

    /// Whether `host` (as a URL named it) may be reached at `address`.
    pub fn check(&self, host: &str, address: IpAddr) -> Result<(), EgressError> {
        let host_allowed = || {
            let host = host.trim_end_matches('.').to_ascii_lowercase();
            self.hosts.contains(&host)
        };
        if is_public(address) || self.nets.iter().any(|n| n.contains(&address)) || host_allowed() {
            Ok(())
        } else {
            Err(EgressError::Refused {
                host: host.to_owned(),
                address,
            })
        }
    }
}

/// Whether `ip` is an address on the public internet: not loopback, private, shared (CGNAT),
/// link-local, unspecified, broadcast, multicast, documentation, benchmarking or reserved, and
/// for IPv6 not unique-local, site-local, or an IPv4 address in disguise that is not public
/// (mapped, compatible, NAT64, 6to4, Teredo).
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => is_public_v6(v6),
    }
}

fn is_public_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    !(ip.is_unspecified()
        || ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_broadcast()
        || ip.is_multicast()
        || ip.is_documentation()
        || a == 0
        || (a == 100 && (64..128).contains(&b))
        || (a == 192 && b == 0 && c == 0)
        || (a == 198 && (18..20).contains(&b))
        || a >= 240)
}

fn is_public_v6(ip: Ipv6Addr) -> bool {
    let segments = ip.segments();
    let embedded_v4 =
        |hi: u16, lo: u16| Ipv4Addr::new((hi >> 8) as u8, hi as u8, (lo >> 8) as u8, lo as u8);
    if let Some(v4) = ip.to_ipv4_mapped() {
        return is_public_v4(v4);
    }
    match segments {
        // IPv4-compatible (deprecated) ::a.b.c.d, and NAT64 64:ff9b::a.b.c.d.
        [0, 0, 0, 0, 0, 0, hi, lo] if hi != 0 => return is_public_v4(embedded_v4(hi, lo)),
        [0x64, 0xff9b, 0, 0, 0, 0, hi, lo] => return is_public_v4(embedded_v4(hi, lo)),
        // 6to4 2002:a.b.c.d::/48.
        [0x2002, hi, lo, ..] => return is_public_v4(embedded_v4(hi, lo)),
        // Teredo 2001::/32 carries an obfuscated client address: refuse.
        [0x2001, 0, ..] => return false,
        _ => {}
    }
    !(ip.is_unspecified()
        || ip.is_loopback()
        || ip.is_multicast()
        || (segments[0] & 0xfe00) == 0xfc00 // unique local fc00::/7
        || (segments[0] & 0xffc0) == 0xfe80 // link-local fe80::/10
        || (segments[0] & 0xffc0) == 0xfec0 // site-local fec0::/10
        || (segments[0] == 0x2001 && segments[1] == 0x0db8)) // documentation
}

/// Resolves names for the `http` step's client, keeping only the addresses the policy allows.
#[derive(Clone, Debug)]
pub struct GuardedResolver {
    policy: Arc<EgressPolicy>,
}

impl GuardedResolver {
    /// A resolver under `policy`.
    pub fn new(policy: Arc<EgressPolicy>) -> Self {
        GuardedResolver { policy }
    }
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let policy = self.policy.clone();
        Box::pin(async move {
            let host = name.as_str().to_owned();
            let found: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let mut refusal = None;
            let allowed: Vec<SocketAddr> = found
                .into_iter()
                .filter(|a| match policy.check(&host, a.ip()) {
                    Ok(()) => true,
                    Err(e) => {
                        refusal.get_or_insert(e);
                        false
                    }
                })
                .collect();
            if allowed.is_empty() {
                let error = refusal.unwrap_or(EgressError::NoAddress(host));
                return Err(Box::new(error) as Box<dyn std::error::Error + Send + Sync>);
            }
            Ok(Box::new(allowed.into_iter()) as Addrs)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Addresses an attacker reaches for when a server fetches URLs for them.
    const PROBES: [&str; 22] = [
        "127.0.0.1",
        "127.1.2.3",
        "0.0.0.0",
        "10.0.0.1",
        "172.16.5.4",
        "192.168.1.1",
        "169.254.169.254",
        "100.64.0.1",
        "198.18.0.1",
        "224.0.0.1",
        "255.255.255.255",
        "240.0.0.1",
        "::1",
        "::",
        "fc00::1",
        "fd12:3456::1",
        "fe80::1",
        "::ffff:127.0.0.1",
        "::ffff:169.254.169.254",
        "64:ff9b::a9fe:a9fe",
        "2002:7f00:1::",
        "::127.0.0.1",
    ];

    #[test]
    fn every_probe_is_refused_and_public_addresses_pass() {
        let policy = EgressPolicy::public_only();
        for probe in PROBES {
            let ip: IpAddr = probe.parse().unwrap();
            assert!(policy.check("h", ip).is_err(), "{probe} must be refused");
        }
        for public in [
            "93.184.216.34",
            "8.8.8.8",
            "2606:4700::1111",
            "::ffff:8.8.8.8",
        ] {
            assert!(
                policy.check("h", public.parse().unwrap()).is_ok(),
                "{public}"
            );
        }
    }

    /// A name is checked as it resolves: `localhost` comes to loopback addresses only, so the
    /// client is handed none, unless the operator allows them.
    #[tokio::test]
    async fn a_name_that_resolves_to_a_private_address_gives_the_client_nothing() {
        let name = || -> Name { "localhost".parse().unwrap() };
        let refused = GuardedResolver::new(Arc::new(EgressPolicy::public_only()))
            .resolve(name())
            .await
            .err()
            .expect("refused");
        assert!(
            refused.to_string().contains("not a public address"),
            "{refused}"
        );
        let allowed = GuardedResolver::new(Arc::new(EgressPolicy::parse("127.0.0.1").unwrap()))
            .resolve(name())
            .await
            .expect("allowed")
            .collect::<Vec<_>>();
        assert!(!allowed.is_empty());
        assert!(
            allowed
                .iter()
                .all(|a| a.ip() == IpAddr::from([127, 0, 0, 1])),
            "{allowed:?}"
        );
    }

    #[test]
    fn the_operator_allows_hosts_and_networks_by_name() {
        let policy = EgressPolicy::parse("127.0.0.1, 10.1.0.0/16,Billing.Internal").unwrap();
        assert!(policy.check("x", "127.0.0.1".parse().unwrap()).is_ok());
        assert!(policy.check("x", "127.0.0.2".parse().unwrap()).is_err());
        assert!(policy.check("x", "10.1.200.3".parse().unwrap()).is_ok());
        assert!(policy.check("x", "10.2.0.1".parse().unwrap()).is_err());
        assert!(
            policy
                .check("billing.internal.", "10.9.9.9".parse().unwrap())
                .is_ok()
        );
        assert!(matches!(
            EgressPolicy::parse("http://x/").unwrap_err(),
            EgressError::BadEntry(_)
        ));
        let message = EgressPolicy::public_only()
            .check("metadata", "169.254.169.254".parse().unwrap())
            .unwrap_err()
            .to_string();
        assert!(
            message.contains("DURABLE_CONNECTION_ALLOW=metadata"),
            "{message}"
        );
    }
}
