//! Which proxy a connection goes through: the kubeconfig cluster's
//! `proxy-url`, else `HTTPS_PROXY`/`HTTP_PROXY` unless `NO_PROXY` matches
//! the server (host names, domains, IPs and CIDRs, as Go's httpproxy reads
//! them).

use kube::config::Kubeconfig;

use crate::settings::ConnectSettings;

use super::kubeconfig::ConnectError;

/// The `proxy-url` of the kubeconfig cluster the flags select.
pub(super) fn cluster_proxy_url(
    k: &Kubeconfig,
    args: &ConnectSettings,
    context: Option<&str>,
) -> Option<String> {
    let cluster = match &args.cluster {
        Some(c) => c.clone(),
        None => {
            let ctx = k
                .contexts
                .iter()
                .find(|c| Some(c.name.as_str()) == context)?;
            ctx.context.as_ref()?.cluster.clone()
        }
    };
    k.clusters
        .iter()
        .find(|c| c.name == cluster)?
        .cluster
        .as_ref()?
        .proxy_url
        .clone()
        .filter(|p| !p.trim().is_empty())
}

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
        let uri: http::Uri = raw.trim().parse().map_err(|source| ConnectError::Url {
            what,
            raw: raw.to_owned(),
            source,
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
