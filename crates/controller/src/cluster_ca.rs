//! The cluster's CA, for a host's bundle and the controller's kubeconfig:
//! the certificates the admin's kubeconfig verified this very connection
//! with, else the `kube-root-ca.crt` ConfigMap.
//!
//! Why the kubeconfig's first: it is what the command's own connection to
//! the API server was verified against, so it is known to be the CA of the
//! servers the host will reach (k3s's `k3s.yaml` embeds
//! `server/tls/server-ca.crt`, the CA of every server's serving
//! certificate). A copy of that file taken from one server is no source:
//! that server's demotion deletes it. The `kube-root-ca.crt` ConfigMap
//! (key `ca.crt`, in every namespace) is published by
//! kube-controller-manager, which not every control plane runs, so it is
//! only the fallback, for a kubeconfig that names no CA of its own (one
//! that trusts the system's roots). A kubeconfig that skips verification
//! (`insecure-skip-tls-verify`) vouches for no CA: refused.

use std::path::PathBuf;

use base64::Engine;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::{Api, Client, Config};

/// The ConfigMap kube-controller-manager publishes the cluster's root CA
/// in, in every namespace.
pub const ROOT_CA_CONFIGMAP: &str = "kube-root-ca.crt";

/// Where the CA came from, for the summary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CaSource {
    /// The kubeconfig's certificate authority, which verified this
    /// connection.
    Kubeconfig,
    /// The `kube-root-ca.crt` ConfigMap of the namespace named.
    ConfigMap(String),
}

impl std::fmt::Display for CaSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CaSource::Kubeconfig => f.write_str("the kubeconfig's certificate authority"),
            CaSource::ConfigMap(ns) => write!(f, "the ConfigMap {ns}/{ROOT_CA_CONFIGMAP}"),
        }
    }
}

/// Why no CA could be had.
#[derive(Debug, thiserror::Error)]
pub enum CaError {
    /// The kubeconfig skips TLS verification.
    #[error(
        "the kubeconfig skips TLS verification (insecure-skip-tls-verify), so it vouches for no CA: use a kubeconfig that names the cluster's CA"
    )]
    Unverified,
    /// The kubeconfig's CA file could not be read.
    #[error("cannot read the kubeconfig's CA file {}: {source}", path.display())]
    File {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// Neither the kubeconfig nor the ConfigMap gives a CA.
    #[error(
        "the kubeconfig names no CA and the ConfigMap {namespace}/{ROOT_CA_CONFIGMAP} could not be read ({cause}): use a kubeconfig that names the cluster's CA (certificate-authority or certificate-authority-data)"
    )]
    None {
        /// The namespace read.
        namespace: String,
        /// Why the ConfigMap gave none.
        cause: String,
    },
    /// What was found is no PEM certificate.
    #[error("the CA from {0} holds no PEM certificate")]
    NotPem(CaSource),
}

/// The kubeconfig's own CA as PEM, if it names one: its file as it is,
/// else its certificates (DER, as kube holds them) encoded.
pub fn from_config(config: &Config) -> Result<Option<String>, CaError> {
    if config.accept_invalid_certs {
        return Err(CaError::Unverified);
    }
    if let Some(path) = &config.root_cert_file {
        let text = std::fs::read_to_string(path).map_err(|source| CaError::File {
            path: path.clone(),
            source,
        })?;
        return Ok(Some(text));
    }
    Ok(config
        .root_cert
        .as_ref()
        .filter(|c| !c.is_empty())
        .map(|certs| pem(certs)))
}

/// The admin's connection as the kubeconfig gives it (`--kubeconfig`,
/// `--context`), bounded as every client of the controller, and the
/// configuration it was made from (whose CA [`cluster_ca`] reads).
pub async fn admin(
    source: kubeaccess::kubeconfig::Source<'_>,
) -> Result<(Config, Client), kubeaccess::kubeconfig::ClusterError> {
    use kubeaccess::kubeconfig::ClusterError;
    let config = kubeaccess::kubeconfig::load(source).await?;
    if config.cluster_url.scheme_str() != Some("https") {
        return Err(ClusterError::Plain {
            url: config.cluster_url.to_string(),
        });
    }
    let client = Client::try_from(config.clone()).map_err(ClusterError::Client)?;
    Ok((config, client))
}

/// DER certificates as one PEM bundle (RFC 7468: base64 in lines of 64).
pub fn pem(certs: &[Vec<u8>]) -> String {
    let mut out = String::new();
    for der in certs {
        let b64 = base64::engine::general_purpose::STANDARD.encode(der);
        out.push_str("-----BEGIN CERTIFICATE-----\n");
        for line in b64.as_bytes().chunks(64) {
            out.push_str(&String::from_utf8_lossy(line));
            out.push('\n');
        }
        out.push_str("-----END CERTIFICATE-----\n");
    }
    out
}

/// The cluster's CA as PEM, and where it came from: the kubeconfig's,
/// else `namespace`'s `kube-root-ca.crt` ConfigMap.
pub async fn cluster_ca(
    config: &Config,
    client: &Client,
    namespace: &str,
) -> Result<(String, CaSource), CaError> {
    let (pem, source) = match from_config(config)? {
        Some(p) => (p, CaSource::Kubeconfig),
        None => {
            let none = |cause: String| CaError::None {
                namespace: namespace.to_string(),
                cause,
            };
            let cm = Api::<ConfigMap>::namespaced(client.clone(), namespace)
                .get_opt(ROOT_CA_CONFIGMAP)
                .await
                .map_err(|e| none(e.to_string()))?
                .ok_or_else(|| none("absent".into()))?;
            let text = cm
                .data
                .and_then(|mut d| d.remove("ca.crt"))
                .ok_or_else(|| none("no ca.crt key".into()))?;
            (text, CaSource::ConfigMap(namespace.to_string()))
        }
    };
    if !pem.contains("-----BEGIN CERTIFICATE-----") {
        return Err(CaError::NotPem(source));
    }
    Ok((pem, source))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn der_certificates_become_one_pem_block_each_in_lines_of_64() {
        let text = pem(&[vec![0u8; 100], vec![1u8; 3]]);
        assert_eq!(text.matches("-----BEGIN CERTIFICATE-----\n").count(), 2);
        assert_eq!(text.matches("-----END CERTIFICATE-----\n").count(), 2);
        assert!(text.lines().all(|l| l.len() <= 64), "{text}");
        let first: String = text
            .lines()
            .skip(1)
            .take_while(|l| !l.starts_with("-----"))
            .collect();
        let back = base64::engine::general_purpose::STANDARD
            .decode(first)
            .unwrap();
        assert_eq!(back, vec![0u8; 100]);
    }

    #[test]
    fn a_kubeconfig_that_skips_verification_gives_no_ca() {
        let mut c = Config::new("https://192.0.2.1:6443".parse().unwrap());
        c.root_cert = Some(vec![vec![1, 2, 3]]);
        c.accept_invalid_certs = true;
        assert!(matches!(from_config(&c), Err(CaError::Unverified)));
        c.accept_invalid_certs = false;
        assert!(
            from_config(&c)
                .unwrap()
                .unwrap()
                .contains("BEGIN CERTIFICATE")
        );
        c.root_cert = None;
        assert_eq!(from_config(&c).unwrap(), None);
    }
}
