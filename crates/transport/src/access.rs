//! Who may use a listener, decided the same way on every one: a bearer token compared in
//! constant time, `--no-auth` only on loopback, and one `Host`/`Origin` policy against
//! DNS rebinding and web pages.

use std::net::SocketAddr;

use axum::http::{HeaderMap, header};

/// Compare without an early exit, so timing does not leak how much of a guess matched.
pub fn same_secret(given: &[u8], expected: &[u8]) -> bool {
    given.len() == expected.len()
        && given
            .iter()
            .zip(expected)
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0
}

/// Whether the request carries `Authorization: Bearer <expected>`.
pub fn bearer_matches(headers: &HeaderMap, expected: &str) -> bool {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "))
        .map(str::trim)
        .is_some_and(|given| same_secret(given.as_bytes(), expected.as_bytes()))
}

/// A listener without a token must not be reachable from other machines.
#[derive(Debug, thiserror::Error)]
#[error("--no-auth is only allowed on a loopback address; {0} is reachable from other machines")]
pub struct NoAuthOffLoopback(pub SocketAddr);

/// `Ok` when the listener on `addr` may go without a token (`authenticated: false`).
pub fn require_auth_off_loopback(
    addr: SocketAddr,
    authenticated: bool,
) -> Result<(), NoAuthOffLoopback> {
    if authenticated || addr.ip().is_loopback() {
        Ok(())
    } else {
        Err(NoAuthOffLoopback(addr))
    }
}

/// Which `Host` and `Origin` headers a TCP listener accepts.
///
/// * `Host` must be an IP address (any: a client that reached a `0.0.0.0` listener
///   through one of its addresses), `localhost`, or an allowed name (`mcp.internal`, or
///   `mcp.internal:8443` for that port only). DNS rebinding, the attack this stops,
///   always shows as a *name* in `Host`: the page's own, rebound to this machine.
/// * `Origin`, which browsers send and other clients do not, must be an allowed origin
///   or one of the listener's own (`http://127.0.0.1:PORT`): scheme, host and port
///   compared (an origin without a port has its scheme's default; `:*` allows any port).
///   A request without `Origin` passes.
///
/// A Unix socket has no `Host` to rebind: [`HostPolicy::unix_socket`] checks only
/// `Origin`, and allows none.
#[derive(Debug, Clone)]
pub struct HostPolicy {
    /// `None`: `Host` is not checked (a Unix socket).
    hosts: Option<Vec<Authority>>,
    origins: Vec<AllowedOrigin>,
}

/// Why a request was refused (answered 403 with these words).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HostRefusal {
    #[error("the Host header is missing")]
    MissingHost,
    #[error("Host `{0}` is not a name this server answers to (allow it with --allow-host)")]
    Host(String),
    #[error("requests from the web origin `{0}` are refused (allow it with --allow-origin)")]
    Origin(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Authority {
    host: String,
    port: Option<u16>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct AllowedOrigin {
    scheme: String,
    host: String,
    /// `None`: any port (`:*`).
    port: Option<u16>,
}

impl HostPolicy {
    /// The policy of a listener bound to `bound`, with the extra `hosts` and `origins`
    /// an operator allowed. Entries that do not parse allow nothing.
    pub fn new(bound: SocketAddr, hosts: &[String], origins: &[String]) -> Self {
        let host_names = std::iter::once("localhost").chain(hosts.iter().map(String::as_str));
        let port = bound.port();
        let mut origin_names: Vec<String> = if bound.ip().is_loopback() {
            vec![
                format!("http://127.0.0.1:{port}"),
                format!("http://localhost:{port}"),
                format!("http://[::1]:{port}"),
            ]
        } else {
            vec![format!("http://{bound}")]
        };
        origin_names.extend(origins.iter().cloned());
        Self {
            hosts: Some(host_names.filter_map(parse_authority).collect()),
            origins: origin_names
                .iter()
                .filter_map(|o| parse_allowed_origin(o))
                .collect(),
        }
    }

    /// The policy of a Unix socket: any `Host`, no `Origin`.
    pub fn unix_socket() -> Self {
        Self {
            hosts: None,
            origins: Vec::new(),
        }
    }

    /// `Ok` when a request with these headers may be served.
    pub fn check(&self, headers: &HeaderMap) -> Result<(), HostRefusal> {
        let Some(hosts) = &self.hosts else {
            return self.check_origin(headers);
        };
        let host = headers.get(header::HOST).ok_or(HostRefusal::MissingHost)?;
        let host_text = String::from_utf8_lossy(host.as_bytes()).into_owned();
        let allowed = parse_authority(&host_text).is_some_and(|given| {
            given.host.parse::<std::net::IpAddr>().is_ok()
                || hosts.iter().any(|allowed| {
                    allowed.host == given.host && allowed.port.is_none_or(|p| given.port == Some(p))
                })
        });
        if !allowed {
            return Err(HostRefusal::Host(host_text));
        }
        self.check_origin(headers)
    }

    fn check_origin(&self, headers: &HeaderMap) -> Result<(), HostRefusal> {
        let Some(origin) = headers.get(header::ORIGIN) else {
            return Ok(());
        };
        let text = String::from_utf8_lossy(origin.as_bytes()).into_owned();
        let allowed = parse_origin(&text).is_some_and(|(scheme, host, port)| {
            self.origins.iter().any(|allowed| {
                allowed.scheme == scheme
                    && allowed.host == host
                    && allowed.port.is_none_or(|p| port == Some(p))
            })
        });
        if allowed {
            Ok(())
        } else {
            Err(HostRefusal::Origin(text))
        }
    }
}

fn normalize_host(host: &str) -> String {
    host.trim_start_matches('[')
        .trim_end_matches(']')
        .to_ascii_lowercase()
}

fn parse_authority(text: &str) -> Option<Authority> {
    let text = text.trim();
    if text.is_empty() {
        return None;
    }
    if let Ok(authority) = text.parse::<axum::http::uri::Authority>() {
        return Some(Authority {
            host: normalize_host(authority.host()),
            port: authority.port_u16(),
        });
    }
    // A bare IPv6 address (`::1`) is not an authority.
    text.parse::<std::net::Ipv6Addr>().ok().map(|ip| Authority {
        host: ip.to_string(),
        port: None,
    })
}

/// `(scheme, host, port)` of an origin, the port defaulted from the scheme.
fn parse_origin(text: &str) -> Option<(String, String, Option<u16>)> {
    let uri = text.trim().parse::<axum::http::Uri>().ok()?;
    let scheme = uri.scheme_str()?.to_ascii_lowercase();
    let authority = uri.authority()?;
    let port = authority.port_u16().or(match scheme.as_str() {
        "http" => Some(80),
        "https" => Some(443),
        _ => None,
    });
    Some((scheme, normalize_host(authority.host()), port))
}

fn parse_allowed_origin(text: &str) -> Option<AllowedOrigin> {
    let text = text.trim();
    if let Some(base) = text.strip_suffix(":*") {
        let (scheme, host, _) = parse_origin(base)?;
        return Some(AllowedOrigin {
            scheme,
            host,
            port: None,
        });
    }
    let (scheme, host, port) = parse_origin(text)?;
    Some(AllowedOrigin {
        scheme,
        host,
        port: Some(port?),
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::expect_used, clippy::unwrap_used)]

    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(
                axum::http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                value.parse().unwrap(),
            );
        }
        map
    }

    #[test]
    fn tokens_compare_whole() {
        let h = headers(&[("authorization", "Bearer secret-token")]);
        assert!(bearer_matches(&h, "secret-token"));
        assert!(!bearer_matches(&h, "secret-tokem"));
        assert!(!bearer_matches(&h, "secret"));
        assert!(!bearer_matches(&headers(&[]), "secret"));
        assert!(!bearer_matches(
            &headers(&[("authorization", "Basic c2VjcmV0")]),
            "secret"
        ));
    }

    #[test]
    fn no_auth_only_on_loopback() {
        assert!(require_auth_off_loopback("127.0.0.1:1".parse().unwrap(), false).is_ok());
        assert!(require_auth_off_loopback("[::1]:1".parse().unwrap(), false).is_ok());
        assert!(require_auth_off_loopback("0.0.0.0:1".parse().unwrap(), false).is_err());
        assert!(require_auth_off_loopback("0.0.0.0:1".parse().unwrap(), true).is_ok());
    }

    #[test]
    fn hosts_and_origins() {
        let policy = HostPolicy::new(
            "127.0.0.1:8765".parse().unwrap(),
            &["mcp.internal".into(), "edge.internal:8443".into()],
            &[
                "http://localhost:5173".into(),
                "https://app.example:*".into(),
            ],
        );
        for host in [
            "127.0.0.1:8765",
            "localhost:8765",
            "LOCALHOST",
            "[::1]:8765",
            "mcp.internal:1",
            "edge.internal:8443",
        ] {
            assert_eq!(policy.check(&headers(&[("host", host)])), Ok(()), "{host}");
        }
        for host in [
            "evil.example",
            "edge.internal:8444",
            "localhost.evil.example",
        ] {
            assert!(policy.check(&headers(&[("host", host)])).is_err(), "{host}");
        }
        assert_eq!(policy.check(&headers(&[])), Err(HostRefusal::MissingHost));
        let with_origin = |origin| headers(&[("host", "127.0.0.1:8765"), ("origin", origin)]);
        for origin in [
            "http://127.0.0.1:8765",
            "http://localhost:5173",
            "https://app.example",
            "https://APP.example:9",
        ] {
            assert_eq!(policy.check(&with_origin(origin)), Ok(()), "{origin}");
        }
        for origin in [
            "http://evil.example",
            "http://localhost:5174",
            "http://localhost",
            "null",
            "http://app.example",
        ] {
            assert!(policy.check(&with_origin(origin)).is_err(), "{origin}");
        }
    }

    #[test]
    fn a_unix_socket_takes_any_host_and_no_origin() {
        let policy = HostPolicy::unix_socket();
        assert!(policy.check(&headers(&[("host", "whatever")])).is_ok());
        assert!(policy.check(&headers(&[])).is_ok());
        assert!(
            policy
                .check(&headers(&[
                    ("host", "localhost"),
                    ("origin", "http://localhost")
                ]))
                .is_err()
        );
    }

    #[test]
    fn a_wildcard_listener_is_reached_by_address_never_by_an_unknown_name() {
        let policy = HostPolicy::new("0.0.0.0:9000".parse().unwrap(), &[], &[]);
        for host in [
            "0.0.0.0:9000",
            "10.1.2.3:9000",
            "[fd00::5]:9000",
            "10.1.2.3",
        ] {
            assert!(policy.check(&headers(&[("host", host)])).is_ok(), "{host}");
        }
        assert!(
            policy
                .check(&headers(&[("host", "devbox.lan:9000")]))
                .is_err()
        );
    }
}
