//! Why a connection could not be set up, in a file of its own (as
//! kube-client's `config` keeps its errors apart from the loaders), so the
//! kubeconfig loader and the proxy rules both use it without using each
//! other.

use std::path::PathBuf;

/// A kubeconfig failure in one line: an unreadable file is named once with
/// the system's reason (kube's own text quotes the path twice, the second
/// time in Debug form); anything else goes through
/// `crate::secrets::describe`.
fn kubeconfig_message(
    path: Option<&std::path::Path>,
    source: &kube::config::KubeconfigError,
) -> String {
    if let kube::config::KubeconfigError::ReadConfig(io, read) = source {
        return format!("{}: {io}", read.display());
    }
    let prefix = path
        .map(|p| format!("{}: ", p.display()))
        .unwrap_or_default();
    format!("{prefix}{}", crate::secrets::describe(source))
}

/// Failures to set up a connection. All are configuration errors (exit 2).
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// The kubeconfig could not be read or used. Displayed through
    /// `crate::secrets::describe`, as an exec plugin's failure carries
    /// its env, arguments and output.
    #[error("kubeconfig: {}", kubeconfig_message(.path.as_deref(), .source))]
    Kubeconfig {
        /// The file given with `--kubeconfig`, if one was.
        path: Option<std::path::PathBuf>,
        /// Why it could not be read or used.
        #[source]
        source: kube::config::KubeconfigError,
    },
    /// No kubeconfig and not inside a pod.
    #[error("no kubeconfig found ($KUBECONFIG, ~/.kube/config) and not running in a pod; pass --kubeconfig or --server")]
    NoConfig,
    /// A URL (`--server`, a proxy) does not parse.
    #[error("{what}: {raw:?} is not a URL: {cause}")]
    Url {
        /// Which setting: the flag, or where the proxy came from.
        what: &'static str,
        /// The value as given.
        raw: String,
        /// Why it is not a URL.
        cause: http::uri::InvalidUri,
    },
    /// The `--certificate-authority` file cannot be read.
    #[error("--certificate-authority: {}: {cause}", .path.display())]
    CertificateAuthority {
        /// The file.
        path: PathBuf,
        /// Why it cannot be read.
        cause: std::io::Error,
    },
    /// The `--certificate-authority` file holds no usable certificate.
    #[error("--certificate-authority: {}: {cause}", .path.display())]
    CertificateBundle {
        /// The file.
        path: PathBuf,
        /// What is wrong with its content.
        cause: PemError,
    },
    /// A flag value is unusable.
    #[error("{flag}: {problem}")]
    Flag {
        /// The flag.
        flag: &'static str,
        /// What is wrong.
        problem: String,
    },
    /// The HTTP client could not be built (an exec credential plugin runs
    /// then, so its failure lands here).
    /// (Displayed through `crate::secrets::describe_with`: kube's own text of
    /// an exec-plugin failure carries its env, arguments and output.)
    #[error(
        "cannot build the Kubernetes client: {}",
        crate::secrets::describe_with(.source, .exec_program.as_deref())
    )]
    Client {
        /// The kubeconfig's exec credential plugin, as configured: named in
        /// its failure (this cluster's own, in a fleet).
        exec_program: Option<String>,
        /// Why the client could not be built.
        #[source]
        source: kube::Error,
    },
}

/// What is wrong with a certificate bundle.
#[derive(Debug, thiserror::Error)]
pub enum PemError {
    /// The PEM reader refused it.
    #[error("not a PEM certificate bundle: {0}")]
    NotPem(rustls_pki_types::pem::Error),
    /// It is PEM, with no certificate in it.
    #[error("no certificate found")]
    Empty,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An error whose message carries its cause does not also expose it
    /// as `source()`: the one-line chain names the cause once.
    #[test]
    fn a_chain_names_the_cause_once() {
        let cause = "http://a b".parse::<http::Uri>().unwrap_err();
        let text = cause.to_string();
        let url = ConnectError::Url {
            what: "--server",
            raw: "http://a b".into(),
            cause,
        };
        let pem = ConnectError::CertificateBundle {
            path: "ca.pem".into(),
            cause: PemError::Empty,
        };
        for (e, cause) in [(url, text), (pem, "no certificate found".into())] {
            let chain = crate::cluster::error_chain(&e);
            assert_eq!(chain.matches(&cause).count(), 1, "{chain}");
            assert!(std::error::Error::source(&e).is_none(), "{chain}");
        }
    }

    /// The exec plugin runs when the client is built: that failure names
    /// the plugin configured for this client, whoever prints the chain.
    #[test]
    fn a_client_that_could_not_be_built_names_its_own_plugin() {
        use std::os::unix::process::ExitStatusExt;
        let out = std::process::Output {
            status: std::process::ExitStatus::from_raw(7 << 8),
            stdout: b"token-printed".to_vec(),
            stderr: Vec::new(),
        };
        let e = ConnectError::Client {
            exec_program: Some("/opt/cluster-b/plugin".into()),
            source: kube::Error::Auth(kube::client::AuthError::AuthExecRun {
                cmd: r#"A="{\"json\": 1}" "/opt/cluster-b/plugin" "--x""#.into(),
                out: Box::new(out),
            }),
        };
        for m in [e.to_string(), crate::cluster::error_chain(&e)] {
            assert!(m.contains("\"/opt/cluster-b/plugin\""), "{m}");
            assert!(
                m.contains("exit status 7") && !m.contains("token-printed"),
                "{m}"
            );
        }
    }
}
