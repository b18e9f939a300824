//! `fleet-role kubeconfig --output FILE`: the controller's own kubeconfig,
//! for `fleet-role run` as a systemd service
//! (`/etc/fleet-role/controller.kubeconfig`).
//!
//! Its credential is a TokenRequest for the controller's ServiceAccount
//! ([`crate::manifests::CONTROLLER_SERVICE_ACCOUNT`] in
//! [`crate::manifests::CONTROLLER_NAMESPACE`], made by `fleet-role
//! manifests controller`), as `enroll` issues one for a host; its server
//! and CA are the ones the admin's kubeconfig reached and verified
//! ([`crate::cluster_ca`]). The file is written with mode 0600, atomically;
//! the token is printed only when asked (`--output -`). Running it again
//! rotates the credential (the old token stays valid until it lapses).

use std::path::PathBuf;

use base64::Engine;
use clap::Args;
use fleetdecide::one_line;
use k8s_openapi::api::{authentication::v1::TokenRequest, core::v1::ServiceAccount};
use kube::{Api, Client, Config, api::PostParams};
use serde_json::json;

use crate::{
    cluster_ca::{self, CaError},
    enroll::write_credential,
    manifests::{CONTROLLER_NAMESPACE, CONTROLLER_SERVICE_ACCOUNT},
};

/// `fleet-role kubeconfig`.
#[derive(Debug, Args)]
pub struct KubeconfigArgs {
    /// Where the kubeconfig goes (mode 0600, replaced atomically); `-`
    /// prints it, token included, on stdout.
    #[arg(long, value_name = "FILE")]
    pub output: PathBuf,
    /// How many days its credential is valid (`fleet-role run` warns from
    /// 30 days before it lapses); run again before then to rotate it.
    #[arg(long, default_value_t = 365, value_parser = clap::value_parser!(u32).range(1..=3650))]
    pub valid_days: u32,
    /// The API server it names (https://HOST:PORT): default, the one this
    /// command's kubeconfig reaches.
    #[arg(long, value_name = "URL")]
    pub server: Option<String>,
}

/// Why no kubeconfig was written.
#[derive(Debug, thiserror::Error)]
pub enum KubeconfigError {
    /// `--server` is no `https://` URL.
    #[error("--server {0:?} is not an https:// URL: the token would cross the network in clear")]
    Server(String),
    /// No CA.
    #[error(transparent)]
    Ca(#[from] CaError),
    /// The TokenRequest failed (404: the controller's objects are not
    /// applied; 403: the kubeconfig is not an admin's).
    #[error(
        "requesting a token for the ServiceAccount {CONTROLLER_NAMESPACE}/{CONTROLLER_SERVICE_ACCOUNT} (apply `fleet-role manifests controller` first): {0}"
    )]
    Token(#[source] kube::Error),
    /// The answer held no token.
    #[error("the TokenRequest answered without a token")]
    NoToken,
    /// The file could not be written.
    #[error("cannot write the kubeconfig to {}: {source}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

/// The kubeconfig's text: one cluster (`server`, the CA embedded), one
/// user (the token), one context in the controller's namespace.
pub fn render(server: &str, ca_pem: &str, token: &str) -> String {
    let ca = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    let doc = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "fleet-role", "cluster": {
            "server": server,
            "certificate-authority-data": ca,
        }}],
        "users": [{"name": "fleet-role", "user": {"token": token}}],
        "contexts": [{"name": "fleet-role", "context": {
            "cluster": "fleet-role",
            "user": "fleet-role",
            "namespace": CONTROLLER_NAMESPACE,
        }}],
        "current-context": "fleet-role",
    });
    serde_saphyr::to_string(&doc).expect("a JSON document serializes as YAML")
}

/// Issues the controller's token and writes (or, for `-`, returns) its
/// kubeconfig. Returns the file written (`None`: the text to print) and
/// the token's expiry.
pub async fn write(
    config: &Config,
    client: &Client,
    args: &KubeconfigArgs,
) -> Result<(Option<String>, String), KubeconfigError> {
    let server = match &args.server {
        Some(s) => {
            let uri: http::Uri = s
                .parse()
                .map_err(|_| KubeconfigError::Server(one_line(s)))?;
            if uri.scheme_str() != Some("https") || uri.host().is_none() {
                return Err(KubeconfigError::Server(one_line(s)));
            }
            s.trim_end_matches('/').to_string()
        }
        None => config
            .cluster_url
            .to_string()
            .trim_end_matches('/')
            .to_string(),
    };
    let (ca, _) = cluster_ca::cluster_ca(config, client, CONTROLLER_NAMESPACE).await?;
    let request: TokenRequest = serde_json::from_value(json!({
        "spec": {"audiences": [], "expirationSeconds": i64::from(args.valid_days) * 86_400},
    }))
    .expect("a TokenRequest");
    let status = Api::<ServiceAccount>::namespaced(client.clone(), CONTROLLER_NAMESPACE)
        .create_token_request(CONTROLLER_SERVICE_ACCOUNT, &PostParams::default(), &request)
        .await
        .map_err(KubeconfigError::Token)?
        .status
        .filter(|s| !s.token.is_empty())
        .ok_or(KubeconfigError::NoToken)?;
    let text = render(&server, &ca, &status.token);
    let expires = status.expiration_timestamp.0.to_string();
    if args.output.as_os_str() == "-" {
        return Ok((Some(text), expires));
    }
    write_credential(&args.output, &text).map_err(|source| KubeconfigError::Write {
        path: args.output.clone(),
        source,
    })?;
    Ok((None, expires))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kubeconfig_is_one_kube_can_read_with_its_server_ca_and_token() {
        let text = render(
            "https://10.0.0.1:6443",
            "-----BEGIN CERTIFICATE-----\nAA==\n-----END CERTIFICATE-----\n",
            "t0k.en",
        );
        let kc: kube::config::Kubeconfig = serde_saphyr::from_str(&text).expect(&text);
        assert_eq!(kc.current_context.as_deref(), Some("fleet-role"));
        let cluster = kc.clusters[0].cluster.as_ref().unwrap();
        assert_eq!(cluster.server.as_deref(), Some("https://10.0.0.1:6443"));
        let ca = base64::engine::general_purpose::STANDARD
            .decode(cluster.certificate_authority_data.as_deref().unwrap())
            .unwrap();
        assert!(
            String::from_utf8(ca)
                .unwrap()
                .starts_with("-----BEGIN CERTIFICATE-----")
        );
        let user = kc.auth_infos[0].auth_info.as_ref().unwrap();
        use secrecy::ExposeSecret;
        assert_eq!(user.token.as_ref().unwrap().expose_secret(), "t0k.en");
        let context = kc.contexts[0].context.as_ref().unwrap();
        assert_eq!(context.namespace.as_deref(), Some(CONTROLLER_NAMESPACE));
    }
}
