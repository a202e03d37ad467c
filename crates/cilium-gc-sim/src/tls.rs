//! A CA generated at start, a server certificate for 127.0.0.1/localhost
//! signed by it, and the kubeconfigs that trust the CA and carry the
//! bearer token (one simulator's, and a fleet's with a context per
//! cluster). kubectl (Go) and kube (rustls) both verify the chain, so the
//! server cert needs the IP SAN and the serverAuth usage.

use std::sync::Arc;

use base64::Engine;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

use crate::error::SimError;

/// Certificates of one simulator (kept across restarts so the kubeconfig stays valid).
#[derive(Clone)]
pub(crate) struct Tls {
    /// CA certificate, PEM.
    pub ca_pem: String,
    server_cert: CertificateDer<'static>,
    server_key: Vec<u8>,
}

impl Tls {
    /// Generate a CA and a server certificate.
    pub(crate) fn generate() -> Result<Self, SimError> {
        let mut ca = CertificateParams::new(Vec::<String>::new()).map_err(tls_err)?;
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.distinguished_name
            .push(DnType::CommonName, "kubectl-cilium-gc sim CA");
        ca.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca_key = KeyPair::generate().map_err(tls_err)?;
        let ca_cert = ca.self_signed(&ca_key).map_err(tls_err)?;
        let issuer = Issuer::new(ca, ca_key);

        let mut leaf = CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()])
            .map_err(tls_err)?;
        leaf.distinguished_name
            .push(DnType::CommonName, "kube-apiserver");
        leaf.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        leaf.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        let leaf_key = KeyPair::generate().map_err(tls_err)?;
        let leaf_cert = leaf.signed_by(&leaf_key, &issuer).map_err(tls_err)?;
        Ok(Tls {
            ca_pem: ca_cert.pem(),
            server_cert: leaf_cert.der().clone(),
            server_key: leaf_key.serialize_der(),
        })
    }

    /// The rustls server configuration (h2 and http/1.1 via ALPN).
    pub(crate) fn server_config(&self) -> Result<Arc<rustls::ServerConfig>, SimError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.server_key.clone()));
        let mut cfg = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(tls_err)?
            .with_no_client_auth()
            .with_single_cert(vec![self.server_cert.clone()], key)
            .map_err(tls_err)?;
        cfg.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(Arc::new(cfg))
    }

    /// A kubeconfig with one cluster, user and context, all named `sim`.
    pub(crate) fn kubeconfig(&self, url: &str, token: &str) -> String {
        let ca = base64::engine::general_purpose::STANDARD.encode(self.ca_pem.as_bytes());
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: sim\n  cluster:\n    server: {url}\n    certificate-authority-data: {ca}\nusers:\n- name: sim\n  user:\n    token: {token}\ncontexts:\n- name: sim\n  context:\n    cluster: sim\n    user: sim\ncurrent-context: sim\npreferences: {{}}\n"
        )
    }
}

/// One context of a fleet kubeconfig: its cluster and user bear its name.
pub(crate) struct FleetMember<'a> {
    /// Context, cluster and user name.
    pub name: &'a str,
    /// The server.
    pub url: &'a str,
    /// The CA to trust (PEM); `None` skips verification (a server nobody
    /// answers, whose certificate is never seen).
    pub ca: Option<&'a str>,
    /// Bearer token.
    pub token: &'a str,
}

/// One kubeconfig with a context per member, `current` its current context.
pub(crate) fn fleet_kubeconfig(members: &[FleetMember<'_>], current: &str) -> String {
    let (mut clusters, mut users, mut contexts) = (String::new(), String::new(), String::new());
    for m in members {
        let (name, url, token) = (m.name, m.url, m.token);
        let trust = match m.ca {
            Some(pem) => format!(
                "certificate-authority-data: {}",
                base64::engine::general_purpose::STANDARD.encode(pem.as_bytes())
            ),
            None => "insecure-skip-tls-verify: true".to_owned(),
        };
        clusters.push_str(&format!(
            "- name: {name:?}\n  cluster:\n    server: {url}\n    {trust}\n"
        ));
        users.push_str(&format!("- name: {name:?}\n  user:\n    token: {token}\n"));
        contexts.push_str(&format!(
            "- name: {name:?}\n  context:\n    cluster: {name:?}\n    user: {name:?}\n"
        ));
    }
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n{clusters}users:\n{users}contexts:\n{contexts}current-context: {current:?}\npreferences: {{}}\n"
    )
}

fn tls_err(e: impl std::fmt::Display) -> SimError {
    SimError::Tls(e.to_string())
}
