//! `[mcp_server] fleet_forward_allow`: the addresses a fleet replica may forward a
//! request to.
//!
//! A replica learns where another one listens from the thread store (the
//! `internal_url` each replica writes about itself). The store is not where the
//! operator decides which machines belong to the fleet: whoever can write a row there
//! could name any URL. So before a replica contacts an owner it checks the owner's URL
//! against this list, which only the operator's configuration sets.
//!
//! An entry is `HOST` or `HOST:PORT` (no port: any port). `HOST` is one of
//!
//! * an IP address or a network in CIDR form (`10.0.0.5`, `10.0.0.0/8`, `::1`,
//!   `fd00::/64`; IPv6 with a port in brackets: `[fd00::/64]:8765`), which matches URLs
//!   whose host is an IP address literal inside it;
//! * a host name pattern (`replica-1.internal`, `replica-*.internal`, `*.svc.local`),
//!   matched label by label against the URL's host name as written (never resolved):
//!   the same number of labels, and `*` standing for one or more characters within one
//!   label.
//!
//! Without the key, the list is [`ForwardAllow::default_for`]: loopback, and the hosts
//! that look like this replica's own `--internal-url` (see there).

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use serde::{Deserialize, Serialize};

/// One entry of `fleet_forward_allow`, parsed when the configuration loads.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct ForwardAllowEntry {
    /// As the operator wrote it, for messages and for writing the key back.
    text: String,
    host: HostPattern,
    port: Option<u16>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum HostPattern {
    /// IP literals inside `network/prefix`.
    Net { network: IpAddr, prefix: u8 },
    /// Host names matching these lower-case labels (`*` within a label).
    Name(Vec<String>),
}

impl TryFrom<String> for ForwardAllowEntry {
    type Error = String;

    fn try_from(text: String) -> Result<Self, String> {
        let bad = |why: &str| {
            format!(
                "`{text}` is not an allowed forward target ({why}); write an IP address or \
                 network (`10.0.0.0/8`), or a host name pattern (`replica-*.internal`), \
                 optionally with `:PORT`"
            )
        };
        let trimmed = text.trim();
        if trimmed.is_empty() {
            return Err(bad("it is empty"));
        }
        let (host, port) = split_port(trimmed).map_err(|why| bad(&why))?;
        let host = if let Some((address, prefix)) = host.split_once('/') {
            let network: IpAddr = address
                .parse()
                .map_err(|_| bad("the part before `/` is not an IP address"))?;
            let prefix: u8 = prefix
                .parse()
                .map_err(|_| bad("the prefix length is not a number"))?;
            if prefix > max_prefix(network) {
                return Err(bad("the prefix length is longer than the address"));
            }
            match network {
                // An IPv4-mapped network is the IPv4 network it maps (see [`canonical`]).
                IpAddr::V6(v6) if prefix >= 96 && v6.to_ipv4_mapped().is_some() => {
                    HostPattern::Net {
                        network: canonical(network),
                        prefix: prefix - 96,
                    }
                }
                _ => HostPattern::Net { network, prefix },
            }
        } else if let Ok(address) = host.parse::<IpAddr>() {
            HostPattern::Net {
                network: canonical(address),
                prefix: max_prefix(canonical(address)),
            }
        } else {
            HostPattern::Name(name_pattern(host).map_err(|why| bad(&why))?)
        };
        Ok(Self {
            text: trimmed.to_string(),
            host,
            port,
        })
    }
}

impl From<ForwardAllowEntry> for String {
    fn from(entry: ForwardAllowEntry) -> Self {
        entry.text
    }
}

impl fmt::Display for ForwardAllowEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// `HOST[:PORT]`, with IPv6 either bracketed (then a port may follow) or bare (no port).
fn split_port(entry: &str) -> Result<(&str, Option<u16>), String> {
    let parse_port = |port: &str| {
        port.parse::<u16>()
            .ok()
            .filter(|port| *port != 0)
            .map(Some)
            .ok_or_else(|| format!("`{port}` is not a port"))
    };
    if let Some(rest) = entry.strip_prefix('[') {
        let (host, after) = rest
            .split_once(']')
            .ok_or_else(|| "a `[` without its `]`".to_string())?;
        return match after {
            "" => Ok((host, None)),
            _ => match after.strip_prefix(':') {
                Some(port) => Ok((host, parse_port(port)?)),
                None => Err(format!("`{after}` after `]`")),
            },
        };
    }
    if entry.matches(':').count() > 1 {
        // A bare IPv6 address or network: a port would need brackets.
        return Ok((entry, None));
    }
    match entry.rsplit_once(':') {
        Some((host, port)) => Ok((host, parse_port(port)?)),
        None => Ok((entry, None)),
    }
}

/// The labels of a host name pattern, lower-cased.
fn name_pattern(host: &str) -> Result<Vec<String>, String> {
    let host = host.strip_suffix('.').unwrap_or(host);
    let labels: Vec<String> = host.split('.').map(str::to_ascii_lowercase).collect();
    for label in &labels {
        if label.is_empty() {
            return Err("an empty label".to_string());
        }
        if !label
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '*')
        {
            return Err(format!("`{label}` has characters a host name cannot have"));
        }
    }
    Ok(labels)
}

/// IPv4-mapped IPv6 addresses (`::ffff:10.0.0.1`) are the IPv4 address they map: a URL
/// may spell one either way and reach the same machine.
fn canonical(address: IpAddr) -> IpAddr {
    match address {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(address, IpAddr::V4),
        v4 => v4,
    }
}

fn max_prefix(address: IpAddr) -> u8 {
    match address {
        IpAddr::V4(_) => 32,
        IpAddr::V6(_) => 128,
    }
}

fn in_network(address: IpAddr, network: IpAddr, prefix: u8) -> bool {
    let masked = |bits: u128, width: u32| {
        let keep = u32::from(prefix).min(width);
        if keep == 0 { 0 } else { bits >> (width - keep) }
    };
    match (address, network) {
        (IpAddr::V4(a), IpAddr::V4(n)) => {
            masked(u128::from(u32::from(a)), 32) == masked(u128::from(u32::from(n)), 32)
        }
        (IpAddr::V6(a), IpAddr::V6(n)) => masked(u128::from(a), 128) == masked(u128::from(n), 128),
        _ => false,
    }
}

fn label_matches(pattern: &str, label: &str) -> bool {
    // `*` is one or more characters; the pieces between stars appear in order, the first
    // at the start and the last at the end.
    let pieces: Vec<&str> = pattern.split('*').collect();
    let [first, middle @ .., last] = pieces.as_slice() else {
        return pattern == label;
    };
    let Some(mut rest) = label.strip_prefix(first) else {
        return false;
    };
    // Each star stands for at least one character.
    for piece in middle {
        let Some(skipped) = rest.get(1..) else {
            return false;
        };
        let Some(at) = skipped.find(piece) else {
            return false;
        };
        rest = &skipped[at + piece.len()..];
    }
    rest.len() > last.len() && rest.ends_with(last)
}

/// A URL host as `reqwest`/`url` print it: an IPv6 literal in brackets, names lower-case.
enum UrlHost {
    Ip(IpAddr),
    Name(Vec<String>),
}

fn url_host(host: &str) -> UrlHost {
    let bare = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    match bare.parse::<IpAddr>() {
        Ok(address) => UrlHost::Ip(canonical(address)),
        Err(_) => {
            let name = bare.strip_suffix('.').unwrap_or(bare);
            UrlHost::Name(name.split('.').map(str::to_ascii_lowercase).collect())
        }
    }
}

impl ForwardAllowEntry {
    fn allows(&self, host: &UrlHost, port: u16) -> bool {
        if self.port.is_some_and(|allowed| allowed != port) {
            return false;
        }
        match (&self.host, host) {
            (HostPattern::Net { network, prefix }, UrlHost::Ip(address)) => {
                in_network(*address, *network, *prefix)
            }
            (HostPattern::Name(pattern), UrlHost::Name(labels)) => {
                pattern.len() == labels.len()
                    && pattern
                        .iter()
                        .zip(labels)
                        .all(|(pattern, label)| label_matches(pattern, label))
            }
            _ => false,
        }
    }

    fn parsed(text: String) -> Option<Self> {
        Self::try_from(text).ok()
    }
}

/// The list a replica checks an owner's URL against before contacting it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForwardAllow {
    entries: Vec<ForwardAllowEntry>,
    /// Whether the operator wrote the list (messages say which key to change).
    configured: bool,
}

impl ForwardAllow {
    /// The configured list when there is one (an empty one forwards nowhere), else
    /// [`ForwardAllow::default_for`] this replica's own advertised URL.
    pub fn resolve(
        configured: Option<&[ForwardAllowEntry]>,
        own_host: Option<(&str, u16)>,
    ) -> Self {
        match configured {
            Some(entries) => Self {
                entries: entries.to_vec(),
                configured: true,
            },
            None => Self::default_for(own_host),
        }
    }

    /// Loopback on any port (`127.0.0.0/8`, `::1`, `localhost`), and the hosts like this
    /// replica's own advertised address `own_host` (its host and port), on that port:
    ///
    /// * an IPv4 address: its `/24` (`10.0.0.11:8765` allows `10.0.0.0/24:8765`);
    /// * an IPv6 address: its `/64`;
    /// * a host name of several labels: any name that differs only in the first label
    ///   (`replica-1.fleet.internal:8765` allows `*.fleet.internal:8765`);
    /// * a one-label name: that name.
    pub fn default_for(own_host: Option<(&str, u16)>) -> Self {
        let mut entries: Vec<ForwardAllowEntry> = ["127.0.0.0/8", "::1", "localhost"]
            .into_iter()
            .filter_map(|text| ForwardAllowEntry::parsed(text.to_string()))
            .collect();
        let own = own_host.and_then(|(host, port)| {
            let text = match url_host(host) {
                UrlHost::Ip(IpAddr::V4(v4)) if !v4.is_loopback() => {
                    let [a, b, c, _] = v4.octets();
                    format!("{}/24:{port}", Ipv4Addr::new(a, b, c, 0))
                }
                UrlHost::Ip(IpAddr::V6(v6)) if !v6.is_loopback() => {
                    let segments = v6.segments();
                    let network = Ipv6Addr::new(
                        segments[0],
                        segments[1],
                        segments[2],
                        segments[3],
                        0,
                        0,
                        0,
                        0,
                    );
                    format!("[{network}/64]:{port}")
                }
                UrlHost::Ip(_) => return None,
                UrlHost::Name(labels) if labels.len() > 1 => {
                    format!("*.{}:{port}", labels[1..].join("."))
                }
                UrlHost::Name(labels) => format!("{}:{port}", labels.join(".")),
            };
            ForwardAllowEntry::parsed(text)
        });
        entries.extend(own);
        Self {
            entries,
            configured: false,
        }
    }

    /// Whether a URL whose host is `host` (as a URL prints it: IPv6 in brackets) and
    /// whose port is `port` may be contacted.
    pub fn allows(&self, host: &str, port: u16) -> bool {
        let host = url_host(host);
        self.entries.iter().any(|entry| entry.allows(&host, port))
    }

    /// The entries, for messages: `127.0.0.0/8, ::1, localhost, *.internal:8765`.
    pub fn describe(&self) -> String {
        let entries: Vec<&str> = self.entries.iter().map(|e| e.text.as_str()).collect();
        let list = if entries.is_empty() {
            "nothing".to_string()
        } else {
            entries.join(", ")
        };
        if self.configured {
            format!("mcp_server.fleet_forward_allow allows {list}")
        } else {
            format!("mcp_server.fleet_forward_allow is not set, so the default allows {list}")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(text: &str) -> ForwardAllowEntry {
        ForwardAllowEntry::try_from(text.to_string()).unwrap_or_else(|e| panic!("{e}"))
    }

    fn list(entries: &[&str]) -> ForwardAllow {
        let entries: Vec<ForwardAllowEntry> = entries.iter().map(|e| entry(e)).collect();
        ForwardAllow::resolve(Some(&entries), None)
    }

    #[test]
    fn networks_match_ip_literals_only() {
        let allow = list(&["10.0.0.0/8", "fd00::/64", "192.168.1.7:8765"]);
        assert!(allow.allows("10.1.2.3", 1));
        assert!(!allow.allows("11.0.0.1", 1));
        assert!(allow.allows("[fd00::5]", 80));
        assert!(!allow.allows("[fd00:0:0:1::5]", 80));
        assert!(allow.allows("192.168.1.7", 8765));
        assert!(!allow.allows("192.168.1.7", 8766));
        // The same machine spelled as an IPv4-mapped IPv6 address.
        assert!(allow.allows("[::ffff:a00:1]", 1));
        // A name that might resolve into the network is not matched by it.
        assert!(!allow.allows("ten.example", 1));
    }

    #[test]
    fn name_patterns_match_label_by_label() {
        let allow = list(&["replica-*.internal:8765", "db.example"]);
        assert!(allow.allows("replica-1.internal", 8765));
        assert!(allow.allows("REPLICA-22.internal", 8765));
        assert!(!allow.allows("replica-.internal", 8765));
        assert!(!allow.allows("replica-1.internal", 8766));
        assert!(!allow.allows("evil.replica-1.internal", 8765));
        assert!(!allow.allows("replica-1.internal.evil", 8765));
        assert!(!allow.allows("replica-1xinternal", 8765));
        assert!(allow.allows("db.example", 5));
        assert!(allow.allows("db.example.", 5));
        assert!(!allow.allows("10.0.0.1", 8765));
        assert!(label_matches("a*b*c", "axxbyc"));
        assert!(!label_matches("a*b*c", "abc"));
        assert!(label_matches("*", "x"));
        assert!(!label_matches("*", ""));
    }

    #[test]
    fn an_empty_list_allows_nothing() {
        let allow = list(&[]);
        assert!(!allow.allows("127.0.0.1", 8765));
        assert!(
            allow.describe().contains("allows nothing"),
            "{}",
            allow.describe()
        );
    }

    #[test]
    fn the_default_is_loopback_and_the_replicas_own_neighbourhood() {
        let none = ForwardAllow::default_for(None);
        assert!(none.allows("127.0.0.1", 9));
        assert!(none.allows("127.9.9.9", 9));
        assert!(none.allows("[::1]", 9));
        assert!(none.allows("localhost", 9));
        assert!(!none.allows("10.0.0.1", 9));
        let ip = ForwardAllow::default_for(Some(("10.0.0.11", 8765)));
        assert!(ip.allows("10.0.0.12", 8765));
        assert!(!ip.allows("10.0.0.12", 22));
        assert!(!ip.allows("10.0.1.12", 8765));
        let named = ForwardAllow::default_for(Some(("replica-1.fleet.internal", 8765)));
        assert!(named.allows("replica-2.fleet.internal", 8765));
        assert!(!named.allows("replica-2.other.internal", 8765));
        assert!(!named.allows("fleet.internal", 8765));
        let v6 = ForwardAllow::default_for(Some(("[fd00::11]", 8765)));
        assert!(v6.allows("[fd00::12]", 8765));
        assert!(!v6.allows("[fd01::12]", 8765));
        let single = ForwardAllow::default_for(Some(("replica", 8765)));
        assert!(single.allows("replica", 8765));
        assert!(!single.allows("other", 8765));
    }

    #[test]
    fn bad_entries_are_refused_with_the_syntax() {
        for bad in [
            "",
            "10.0.0.0/33",
            "10.0.0.0/x",
            "nothost/8",
            "host:0",
            "host:99999",
            "[::1",
            "[::1]x",
            "a..b",
            "evil.com/path",
            "user@host",
        ] {
            let error = ForwardAllowEntry::try_from(bad.to_string())
                .err()
                .unwrap_or_else(|| panic!("{bad} was accepted"));
            assert!(error.contains("host name pattern"), "{error}");
        }
        assert_eq!(entry("[fd00::/64]:8765").port, Some(8765));
        assert_eq!(entry(" 10.0.0.0/8 ").to_string(), "10.0.0.0/8");
    }
}
