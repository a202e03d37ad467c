//! Which proxy a connection goes through: the kubeconfig cluster's
//! `proxy-url`, else `HTTPS_PROXY`/`HTTP_PROXY` unless `NO_PROXY` matches
//! the server (host names, domains, IPs and CIDRs, as Go's httpproxy reads
//! them).

use super::error::ConnectError;

/// The proxy to use, as kubectl chooses it: the kubeconfig cluster's
/// `proxy-url` when set; else `HTTPS_PROXY` (`HTTP_PROXY` for an
/// `http://` server), unless `NO_PROXY` names the server. (kube itself
/// checks `NO_PROXY` against the proxy's address, not the server's, and
/// ignores the environment with `--server`; so we choose here.)
pub(crate) fn resolve_proxy(
    kubeconfig_proxy: Option<&str>,
    server: &http::Uri,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<http::Uri>, ConnectError> {
    let parse = |what: &'static str, raw: &str| -> Result<http::Uri, ConnectError> {
        let uri: http::Uri = raw.trim().parse().map_err(|cause| ConnectError::Url {
            what,
            raw: raw.to_owned(),
            cause,
        })?;
        match uri.scheme_str() {
            Some("http" | "https" | "socks5") if uri.host().is_some() => Ok(uri),
            _ => Err(ConnectError::Flag {
                flag: what,
                problem: format!(
                    "{raw:?}: only http://, https:// and socks5:// proxies are supported"
                ),
            }),
        }
    };
    if let Some(p) = kubeconfig_proxy {
        return parse("kubeconfig proxy-url", p).map(Some);
    }
    let var = |names: &[&str]| {
        names
            .iter()
            .find_map(|n| env(n).filter(|v| !v.trim().is_empty()))
    };
    let proxy = if server.scheme_str() == Some("http") {
        var(&["HTTP_PROXY", "http_proxy"])
    } else {
        var(&["HTTPS_PROXY", "https_proxy"])
    };
    let Some(proxy) = proxy else { return Ok(None) };
    if let Some(no) = var(&["NO_PROXY", "no_proxy"]) {
        if no_proxy_matches(&no, server) {
            return Ok(None);
        }
    }
    parse("HTTPS_PROXY", &proxy).map(Some)
}

/// Whether `NO_PROXY` (comma-separated: `*`, host names with or without a
/// leading dot matching subdomains, IP addresses, IPv4/IPv6 CIDRs, each
/// optionally with `:port`) covers `server`.
pub(crate) fn no_proxy_matches(no_proxy: &str, server: &http::Uri) -> bool {
    let Some(host) = server.host() else {
        return false;
    };
    let host = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_ascii_lowercase();
    let port = server
        .port_u16()
        .unwrap_or(if server.scheme_str() == Some("http") {
            80
        } else {
            443
        });
    let ip: Option<std::net::IpAddr> = host.parse().ok();
    no_proxy
        .split(',')
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .any(|entry| {
            if entry == "*" {
                return true;
            }
            if let Some((net, bits)) = entry.split_once('/') {
                return match (ip, net.parse::<std::net::IpAddr>(), bits.parse::<u32>()) {
                    (Some(ip), Ok(net), Ok(bits)) => in_cidr(ip, net, bits),
                    _ => false,
                };
            }
            let (name, want_port) = match entry.rsplit_once(':') {
                Some((n, p)) if !n.contains(':') || n.ends_with(']') => (n, p.parse::<u16>().ok()),
                _ => (entry, None),
            };
            if want_port.is_some_and(|p| p != port) {
                return false;
            }
            let name = name
                .trim_start_matches('[')
                .trim_end_matches(']')
                .to_ascii_lowercase();
            if let (Some(ip), Ok(n)) = (ip, name.parse::<std::net::IpAddr>()) {
                return ip == n;
            }
            let bare = name.trim_start_matches("*.").trim_start_matches('.');
            host == bare || host.ends_with(&format!(".{bare}"))
        })
}

fn in_cidr(ip: std::net::IpAddr, net: std::net::IpAddr, bits: u32) -> bool {
    use std::net::IpAddr::{V4, V6};
    match (ip, net) {
        (V4(a), V4(b)) if bits <= 32 => {
            let mask = if bits == 0 {
                0
            } else {
                u32::MAX << (32 - bits)
            };
            u32::from(a) & mask == u32::from(b) & mask
        }
        (V6(a), V6(b)) if bits <= 128 => {
            let mask = if bits == 0 {
                0
            } else {
                u128::MAX << (128 - bits)
            };
            u128::from(a) & mask == u128::from(b) & mask
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn uri(s: &str) -> http::Uri {
        s.parse().unwrap()
    }

    fn covers(no_proxy: &str, server: &str) -> bool {
        no_proxy_matches(no_proxy, &uri(server))
    }

    #[test]
    fn star_covers_every_server() {
        assert!(covers("*", "https://anything.example:6443"));
        assert!(covers("foo, *", "https://[::1]:6443"));
        assert!(!covers("", "https://a.example"));
        assert!(!covers(" , ", "https://a.example"));
    }

    #[test]
    fn host_names_and_domains() {
        assert!(covers("api.example.com", "https://api.example.com:6443"));
        assert!(covers("API.Example.com", "https://api.example.com"));
        // A bare domain or a leading dot or `*.` covers subdomains.
        assert!(covers("example.com", "https://api.example.com"));
        assert!(covers(".example.com", "https://api.example.com"));
        assert!(covers("*.example.com", "https://api.example.com"));
        assert!(covers(".example.com", "https://example.com"));
        // Not a suffix on a label boundary.
        assert!(!covers("ample.com", "https://api.example.com"));
        assert!(!covers("other.com", "https://api.example.com"));
    }

    #[test]
    fn ports_must_match_when_given() {
        assert!(covers(
            "api.example.com:6443",
            "https://api.example.com:6443"
        ));
        assert!(!covers(
            "api.example.com:443",
            "https://api.example.com:6443"
        ));
        // The scheme's default port when the URL names none.
        assert!(covers("api.example.com:443", "https://api.example.com"));
        assert!(covers("api.example.com:80", "http://api.example.com"));
        assert!(!covers("api.example.com:443", "http://api.example.com"));
        assert!(covers("127.0.0.1:6443", "https://127.0.0.1:6443"));
        assert!(!covers("127.0.0.1:6444", "https://127.0.0.1:6443"));
    }

    #[test]
    fn ipv4_addresses_and_cidrs() {
        assert!(covers("127.0.0.1", "https://127.0.0.1:6443"));
        assert!(!covers("127.0.0.2", "https://127.0.0.1:6443"));
        assert!(covers("127.0.0.0/8", "https://127.1.2.3:6443"));
        assert!(covers("10.0.0.0/24", "https://10.0.0.255"));
        assert!(!covers("10.0.0.0/24", "https://10.0.1.0"));
        assert!(covers("10.0.0.7/32", "https://10.0.0.7"));
        assert!(!covers("10.0.0.7/32", "https://10.0.0.8"));
        assert!(covers("0.0.0.0/0", "https://192.0.2.1"));
        // A CIDR never matches a host name, nor an address of the other family.
        assert!(!covers("127.0.0.0/8", "https://localhost"));
        assert!(!covers("127.0.0.0/8", "https://[::1]"));
        // Malformed prefix lengths match nothing.
        assert!(!covers("10.0.0.0/33", "https://10.0.0.1"));
        assert!(!covers("10.0.0.0/x", "https://10.0.0.1"));
    }

    #[test]
    fn ipv6_addresses_and_cidrs() {
        assert!(covers("::1", "https://[::1]:6443"));
        assert!(covers("[::1]", "https://[::1]:6443"));
        assert!(covers("[::1]:6443", "https://[::1]:6443"));
        assert!(!covers("[::1]:443", "https://[::1]:6443"));
        // Written differently, the same address.
        assert!(covers("0:0:0:0:0:0:0:1", "https://[::1]"));
        assert!(covers("fd00::/8", "https://[fd12:3456::1]:6443"));
        assert!(!covers("fd00::/8", "https://[fe80::1]"));
        assert!(covers("::/0", "https://[2001:db8::1]"));
        assert!(covers("2001:db8::/128", "https://[2001:db8::]"));
        assert!(!covers("2001:db8::/129", "https://[2001:db8::]"));
        assert!(!covers("::1", "https://127.0.0.1"));
    }

    #[test]
    fn proxy_choice_follows_kubectl() {
        let env = |vars: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                vars.iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| (*v).to_owned())
            }
        };
        let server = uri("https://127.0.0.1:6443");
        // kubeconfig proxy-url wins over the environment and NO_PROXY.
        let e = env(&[("HTTPS_PROXY", "http://env:3128"), ("NO_PROXY", "*")]);
        let p = resolve_proxy(Some("socks5://kc:1080"), &server, &e).unwrap();
        assert_eq!(p.unwrap().host(), Some("kc"));
        // HTTPS_PROXY for an https server, unless NO_PROXY covers it.
        let p = resolve_proxy(None, &server, &e).unwrap();
        assert_eq!(p, None);
        let e = env(&[
            ("https_proxy", "http://env:3128"),
            ("no_proxy", "10.0.0.0/8"),
        ]);
        let p = resolve_proxy(None, &server, &e).unwrap();
        assert_eq!(p.unwrap().host(), Some("env"));
        // HTTP_PROXY for an http server; HTTPS_PROXY is not read then.
        let e = env(&[("HTTPS_PROXY", "http://s:1")]);
        assert_eq!(resolve_proxy(None, &uri("http://h"), &e).unwrap(), None);
        let e = env(&[("HTTP_PROXY", "http://p:1"), ("HTTPS_PROXY", "  ")]);
        let p = resolve_proxy(None, &uri("http://h"), &e).unwrap();
        assert_eq!(p.unwrap().host(), Some("p"));
        assert_eq!(resolve_proxy(None, &server, &e).unwrap(), None, "blank");
        // Unsupported schemes are a clear error.
        let e = env(&[("HTTPS_PROXY", "ftp://p:1")]);
        assert!(resolve_proxy(None, &server, &e).is_err());
        assert!(resolve_proxy(Some("p:1"), &server, &e).is_err());
    }
}
