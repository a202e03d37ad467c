//! The connection as kubectl would make it: the kubeconfig (file, context,
//! cluster, user) or the in-cluster config, the flags that override it, and
//! the credentials it carries (registered so no message repeats them).

use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::Duration;

use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::Config;

use crate::connect::ConnectSettings;

use super::error::{ConnectError, PemError};
use super::proxy::resolve_proxy;

/// Where we are connected, for the report (never a credential).
#[derive(Debug, Clone, Default)]
pub struct Endpoint {
    /// API server URL.
    pub server: String,
    /// kubeconfig context, when one was used.
    pub context: Option<String>,
    /// Connection settings that weaken security (`--insecure-skip-tls-verify`,
    /// a bearer token over plain `http://`): said on stderr and in the report.
    pub warnings: Vec<String>,
    /// The per-request timeout (`None`: `--request-timeout 0`, no limit).
    pub timeout: Option<Duration>,
}

/// Per-request timeout when `--request-timeout` is not given: long enough
/// for a 500-item page from a loaded server, short enough that a request
/// nobody answers is retried (and the run ends) instead of hanging it.
/// Single requests only: watch streams are long-lived by design and are
/// guarded by kube-runtime's idle timeout (server timeout + 5 s) instead.
pub(crate) const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// The limit on one request: `--request-timeout` (`0` = none, as kubectl's),
/// else `DEFAULT_REQUEST_TIMEOUT`.
pub(crate) fn request_timeout(flag: Option<Duration>) -> Option<Duration> {
    match flag {
        Some(t) if t.is_zero() => None,
        Some(t) => Some(t),
        None => Some(DEFAULT_REQUEST_TIMEOUT),
    }
}

/// The contexts of the kubeconfig `--kubeconfig` names (else `$KUBECONFIG`,
/// every file of it merged as kubectl merges them, else `~/.kube/config`),
/// in the file's order, and its `current-context`.
pub fn kubeconfig_contexts(
    path: Option<&std::path::Path>,
) -> Result<(Vec<String>, Option<String>), ConnectError> {
    let k = match path {
        Some(p) => Kubeconfig::read_from(p).map_err(|source| ConnectError::Kubeconfig {
            path: Some(p.to_owned()),
            source,
        })?,
        None if kubeconfig_missing() => return Err(ConnectError::NoConfig),
        None => Kubeconfig::read().map_err(|source| ConnectError::Kubeconfig {
            path: Some(default_kubeconfig_path()),
            source,
        })?,
    };
    let names = k.contexts.iter().map(|c| c.name.clone()).collect();
    Ok((names, k.current_context))
}

/// Build the client config from kubectl-style flags.
pub(crate) async fn load_config(
    args: &ConnectSettings,
) -> Result<(Config, Endpoint), ConnectError> {
    let opts = KubeConfigOptions {
        context: args.context.clone(),
        cluster: args.cluster.clone(),
        user: args.user.clone(),
    };
    let kubeconfig = read_kubeconfig(args)?;
    let mut kubeconfig_proxy = None;
    let (mut config, context) = match kubeconfig {
        Some(k) => {
            let context = args.context.clone().or_else(|| k.current_context.clone());
            kubeconfig_proxy = cluster_proxy_url(&k, args, context.as_deref());
            let config = Config::from_custom_kubeconfig(k, &opts)
                .await
                .map_err(|source| ConnectError::Kubeconfig { path: None, source })?;
            (config, context)
        }
        None if args.server.is_some() => {
            let url = parse_server(args.server.as_deref().unwrap_or_default())?;
            (Config::new(url), None)
        }
        None => match Config::incluster() {
            Ok(c) => (c, None),
            Err(_) => return Err(ConnectError::NoConfig),
        },
    };
    apply_overrides(&mut config, args)?;
    config.proxy_url = resolve_proxy(kubeconfig_proxy.as_deref(), &config.cluster_url, &|k| {
        std::env::var(k).ok()
    })?;
    register_credentials(&config);
    // A CronJob or CI has no one to answer a plugin's prompt, and an
    // interactive plugin writes its stderr straight to ours: capture it.
    if !std::io::stdin().is_terminal() {
        if let Some(exec) = config.auth_info.exec.as_mut() {
            exec.interactive_mode = Some(kube::config::ExecInteractiveMode::Never);
        }
    }
    let server = config
        .cluster_url
        .to_string()
        .trim_end_matches('/')
        .to_owned();
    let warnings = insecure_warnings(&config, &server);
    let timeout = request_timeout(args.request_timeout);
    let endpoint = Endpoint {
        server,
        context,
        warnings,
        timeout,
    };
    Ok((config, endpoint))
}

/// The kubeconfig `--kubeconfig` names, else `$KUBECONFIG` or
/// `~/.kube/config`; `None` when there is none at all (then `--server` or
/// the in-cluster config).
fn read_kubeconfig(args: &ConnectSettings) -> Result<Option<Kubeconfig>, ConnectError> {
    match &args.kubeconfig {
        Some(path) => {
            Kubeconfig::read_from(path)
                .map(Some)
                .map_err(|source| ConnectError::Kubeconfig {
                    path: Some(path.clone()),
                    source,
                })
        }
        None => match Kubeconfig::read() {
            Ok(k) => Ok(Some(k)),
            Err(e) if kubeconfig_missing() => {
                tracing::debug!("no kubeconfig: {e}");
                Ok(None)
            }
            Err(source) => Err(ConnectError::Kubeconfig {
                path: Some(default_kubeconfig_path()),
                source,
            }),
        },
    }
}

/// What the connection to `server` exposes: certificates not verified, a
/// bearer token over plain http.
fn insecure_warnings(config: &Config, server: &str) -> Vec<String> {
    let mut warnings = Vec::new();
    if config.accept_invalid_certs {
        warnings.push(format!(
            "TLS certificate verification is disabled for {server} (--insecure-skip-tls-verify or the kubeconfig): the connection can be intercepted"
        ));
    }
    if config.cluster_url.scheme_str() == Some("http") && sends_bearer(config) {
        warnings.push(format!(
            "a bearer token is sent over plain http:// to {server}: anyone on the path can read it"
        ));
    }
    warnings
}

/// Whether requests will carry a bearer token (static, file, exec or
/// auth-provider).
fn sends_bearer(config: &Config) -> bool {
    let a = &config.auth_info;
    a.token.is_some() || a.token_file.is_some() || a.exec.is_some() || a.auth_provider.is_some()
}

/// Remember every credential the config carries, so no message can repeat
/// one (see [`crate::secrets`]).
fn register_credentials(config: &Config) {
    use secrecy::ExposeSecret;
    let a = &config.auth_info;
    for s in [&a.token, &a.password, &a.client_key_data]
        .into_iter()
        .flatten()
    {
        crate::secrets::register(s.expose_secret());
    }
    if let Some(exec) = &a.exec {
        for arg in exec.args.iter().flatten() {
            crate::secrets::register(arg);
        }
        for env in exec.env.iter().flatten() {
            if let Some(v) = env.get("value") {
                crate::secrets::register(v);
            }
        }
    }
    if let Some(p) = &a.auth_provider {
        for v in p.config.values() {
            crate::secrets::register(v);
        }
    }
}

/// Where kube read the kubeconfig from when `--kubeconfig` was not given
/// (`$KUBECONFIG` as set, else `~/.kube/config`), so a file that does not
/// parse is named in the error as kubectl names it.
fn default_kubeconfig_path() -> PathBuf {
    match std::env::var_os("KUBECONFIG") {
        Some(paths) if !paths.is_empty() => PathBuf::from(paths),
        _ => std::env::var_os("HOME")
            .map(PathBuf::from)
            .unwrap_or_default()
            .join(".kube")
            .join("config"),
    }
}

fn kubeconfig_missing() -> bool {
    if let Some(paths) = std::env::var_os("KUBECONFIG") {
        return std::env::split_paths(&paths).all(|p| !p.exists());
    }
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_default();
    !home.join(".kube").join("config").exists()
}

fn parse_server(s: &str) -> Result<http::Uri, ConnectError> {
    let with_scheme = if s.contains("://") {
        s.to_owned()
    } else {
        format!("https://{s}")
    };
    with_scheme.parse().map_err(|cause| ConnectError::Url {
        what: "--server",
        raw: s.to_owned(),
        cause,
    })
}

/// Flags win over the kubeconfig, as in kubectl.
fn apply_overrides(config: &mut Config, args: &ConnectSettings) -> Result<(), ConnectError> {
    if let Some(s) = &args.server {
        config.cluster_url = parse_server(s)?;
    }
    if let Some(t) = &args.token {
        // As kubectl: --token replaces every kubeconfig credential, keeping
        // only impersonation.
        let a = &mut config.auth_info;
        *a = kube::config::AuthInfo {
            token: Some(t.clone().into()),
            impersonate: a.impersonate.take(),
            impersonate_uid: a.impersonate_uid.take(),
            impersonate_groups: a.impersonate_groups.take(),
            ..Default::default()
        };
    }
    if let Some(ca) = &args.certificate_authority {
        let pem = std::fs::read(ca).map_err(|cause| ConnectError::CertificateAuthority {
            path: ca.clone(),
            cause,
        })?;
        config.root_cert =
            Some(
                pem_certs(&pem).map_err(|cause| ConnectError::CertificateBundle {
                    path: ca.clone(),
                    cause,
                })?,
            );
        config.root_cert_file = None;
    }
    if args.insecure_skip_tls_verify {
        config.accept_invalid_certs = true;
    }
    if let Some(n) = &args.tls_server_name {
        config.tls_server_name = Some(n.clone());
    }
    if let Some(u) = &args.as_user {
        config.auth_info.impersonate = Some(u.clone());
    }
    if !args.as_group.is_empty() {
        if args.as_user.is_none() && config.auth_info.impersonate.is_none() {
            return Err(ConnectError::Flag {
                flag: "--as-group",
                problem: "requires --as (impersonating groups needs a user)".into(),
            });
        }
        config.auth_info.impersonate_groups = Some(args.as_group.clone());
    }
    // `--request-timeout` is applied by `ApiClient` around single requests, never
    // as the client's read timeout: that would cut every watch quiet for
    // longer (no event, no bookmark) and make the usage watchers re-list.
    // We own retries: every 429/503/504 is counted and honours Retry-After.
    config.default_retry = false;
    // kube sends no User-Agent: an audit log then names the user only, and
    // a CronJob's ServiceAccount shared with other tools hides who deleted.
    config.headers.push((
        http::header::USER_AGENT,
        http::HeaderValue::from_static(USER_AGENT),
    ));
    Ok(())
}

/// The User-Agent of every request, as kubectl sends `kubectl/v1.35.4 ...`:
/// what an audit log records beside the user as the writer.
pub(crate) const USER_AGENT: &str = concat!("kubectl-cilium-gc/v", env!("CARGO_PKG_VERSION"));

/// The `proxy-url` of the kubeconfig cluster the flags select.
fn cluster_proxy_url(
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

/// DER certificates from a PEM bundle (rustls-pki-types' PEM reader).
fn pem_certs(pem: &[u8]) -> Result<Vec<Vec<u8>>, PemError> {
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::CertificateDer;
    let certs = CertificateDer::pem_slice_iter(pem)
        .map(|c| c.map(|der| der.to_vec()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(PemError::NotPem)?;
    if certs.is_empty() {
        return Err(PemError::Empty);
    }
    Ok(certs)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 12: `--request-timeout 0` meant 60 s; it means no limit, as
    /// kubectl's, and no flag means the default.
    #[test]
    fn request_timeout_zero_is_no_limit() {
        assert_eq!(request_timeout(Some(Duration::ZERO)), None);
        let five = Duration::from_secs(5);
        assert_eq!(request_timeout(Some(five)), Some(five));
        assert_eq!(request_timeout(None), Some(DEFAULT_REQUEST_TIMEOUT));
    }

    #[test]
    fn pem_bundles_decode() {
        let pem = b"junk\n-----BEGIN CERTIFICATE-----\nAAEC\nAwQ=\n-----END CERTIFICATE-----\n";
        assert_eq!(pem_certs(pem).unwrap(), vec![vec![0, 1, 2, 3, 4]]);
        assert!(pem_certs(b"nothing").is_err());
    }
}
