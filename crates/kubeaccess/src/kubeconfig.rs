//! The controller's clients: `--kubeconfig FILE`, else kube's inference (KUBECONFIG,
//! `~/.kube/config`, then the in-cluster ServiceAccount); `--context NAME`
//! picks one of the kubeconfig's contexts instead of its current one.
//!
//! The token is never held by this code: kube keeps it in a `SecretString`
//! (and re-reads a token file at least once a minute), so nothing here can
//! print it, and errors are kube's, which name URLs and status codes only.
//! Only the token's `exp` claim is read here ([`Credential`]), for the
//! metric that warns before it lapses.

use std::{
    path::{Path, PathBuf},
    time::Duration,
};

use clock::Clock;
use kube::{
    Client, Config,
    client::ClientBuilder,
    config::{KubeConfigOptions, Kubeconfig},
};
use secrecy::ExposeSecret;

use crate::server_clock::ServerClock;

/// Why no client could be made.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// The kubeconfig file could not be read or used.
    #[error("cannot use the kubeconfig {}: {source}", path.display())]
    Kubeconfig {
        /// The file.
        path: std::path::PathBuf,
        /// The cause.
        #[source]
        source: kube::config::KubeconfigError,
    },
    /// The kubeconfig found through KUBECONFIG or `~/.kube/config` could
    /// not be used with the context asked for.
    #[error(
        "cannot use the context {context:?} of the kubeconfig (KUBECONFIG or ~/.kube/config): {source}"
    )]
    Context {
        /// The context.
        context: String,
        /// The cause.
        #[source]
        source: kube::config::KubeconfigError,
    },
    /// No configuration could be inferred.
    #[error("no cluster configuration (give --kubeconfig, set KUBECONFIG, or run in a Pod): {0}")]
    Infer(#[source] kube::config::InferConfigError),
    /// kube could not build a client.
    #[error("cannot build a client: {0}")]
    Client(#[source] kube::Error),
    /// The API server's URL is not `https://`: the credential would cross
    /// the network in clear.
    #[error(
        "the API server {url} is not https://: the controller's credential would be sent in clear; use the server's https:// URL"
    )]
    Plain {
        /// The URL, as configured.
        url: String,
    },
}

impl ClusterError {
    /// The exit code this error stands for: the kubeconfig named or
    /// inferred is the caller's to fix; a client kube could not build, or
    /// an API server in clear, a failure that changed nothing.
    pub fn exit(&self) -> protocol::exit::Exit {
        use protocol::exit::Exit;
        match self {
            ClusterError::Kubeconfig { .. }
            | ClusterError::Context { .. }
            | ClusterError::Infer(_) => Exit::Usage,
            ClusterError::Client(_) | ClusterError::Plain { .. } => Exit::FailedSafe,
        }
    }
}

/// Where the cluster's configuration comes from: `--kubeconfig` (else
/// kube's inference) and `--context` (else the kubeconfig's current one).
#[derive(Debug, Clone, Copy, Default)]
pub struct Source<'a> {
    /// The kubeconfig file named.
    pub kubeconfig: Option<&'a Path>,
    /// The context named.
    pub context: Option<&'a str>,
}

/// A client for the cluster, for requests (each bounded).
pub async fn client(kubeconfig: Source<'_>) -> Result<Client, ClusterError> {
    Ok(connect(kubeconfig).await?.requests)
}

/// What [`connect`] makes of the configuration.
pub struct Clients {
    /// For requests, each bounded by a short read timeout.
    pub requests: Client,
    /// For watches, whose read timeout outlasts the API server's own watch
    /// timeout (kube's watcher asks for 290 s and bookmarks arrive about
    /// once a minute): with the short one, every quiet watch would break
    /// and be restarted every 20 s, which is exactly the polling the
    /// watches replace.
    pub watches: Client,
    /// Where the credential's expiry can be read.
    pub credential: Credential,
    /// The API server's clock, as the answers to both clients show it.
    pub server_clock: ServerClock,
}

/// The clients for the cluster, and where their credential's expiry can
/// be read.
pub async fn connect(source: Source<'_>) -> Result<Clients, ClusterError> {
    connect_at(source, None).await
}

/// [`connect`], to `server` instead of the kubeconfig's own (`run`'s
/// failover: [`crate::failover`]), with the kubeconfig's credential and CA.
pub async fn connect_at(
    source: Source<'_>,
    server: Option<&http::Uri>,
) -> Result<Clients, ClusterError> {
    let mut config = load(source).await?;
    if let Some(s) = server {
        config.cluster_url = s.clone();
    }
    if config.cluster_url.scheme_str() != Some("https") {
        return Err(ClusterError::Plain {
            url: config.cluster_url.to_string(),
        });
    }
    let credential = Credential::of(&config);
    let mut watching = config.clone();
    watching.read_timeout = Some(Duration::from_secs(330));
    let server_clock = ServerClock::new(Clock::system());
    let dated = |config: Config| -> Result<Client, ClusterError> {
        Ok(ClientBuilder::try_from(config)
            .map_err(ClusterError::Client)?
            .with_layer(&server_clock)
            .build())
    };
    Ok(Clients {
        requests: dated(config)?,
        watches: dated(watching)?,
        credential,
        server_clock: server_clock.clone(),
    })
}

/// The configuration [`connect`] makes its clients from, with its bounds
/// (timeouts, no retries of its own) set: for a command that needs what
/// the kubeconfig says beyond a client, such as the CA it verifies the
/// API server with (`fleet-role enroll --bundle`, `fleet-role kubeconfig`).
pub async fn load(source: Source<'_>) -> Result<Config, ClusterError> {
    let options = KubeConfigOptions {
        context: source.context.map(str::to_string),
        ..KubeConfigOptions::default()
    };
    let mut config = match (source.kubeconfig, source.context) {
        (Some(path), _) => {
            let err = |source| ClusterError::Kubeconfig {
                path: path.into(),
                source,
            };
            let kc = Kubeconfig::read_from(path).map_err(err)?;
            Config::from_custom_kubeconfig(kc, &options)
                .await
                .map_err(err)?
        }
        // A context names a kubeconfig's entry: the in-cluster
        // configuration has none to pick.
        (None, Some(context)) => {
            Config::from_kubeconfig(&options)
                .await
                .map_err(|source| ClusterError::Context {
                    context: context.to_string(),
                    source,
                })?
        }
        (None, None) => Config::infer().await.map_err(ClusterError::Infer)?,
    };
    // Bounded requests: a controller waiting on a dead API server must come
    // back to its loop (and its Lease) rather than hang.
    config.connect_timeout = Some(Duration::from_secs(5));
    config.read_timeout = Some(Duration::from_secs(20));
    config.write_timeout = Some(Duration::from_secs(10));
    // kube retries 429, 503 and 504 by itself (up to 15 times, backing off
    // to 1,000 s): an eviction refused by a PodDisruptionBudget (429) would
    // hang the loop, and no retry would be bounded by a step's timeout.
    // The loop retries at its own pace instead.
    config.default_retry = false;
    Ok(config)
}

/// Where the expiry of the controller's credential can be read, for
/// `fleet_role_credential_expiry_timestamp_seconds`. A ServiceAccount
/// token is a JWT whose `exp` claim says when it lapses (`kubectl create
/// token` makes one that lapses in an hour unless `--duration` says
/// otherwise); a client certificate's `notAfter` would need an X.509
/// parser this crate does not carry, and an exec plugin's credential is
/// the plugin's to renew.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Credential {
    /// Nothing says when the credential lapses (a client certificate, an
    /// exec plugin, a token that is no JWT, no credential at all).
    #[default]
    Unknown,
    /// A token given in the kubeconfig: its `exp`, read once (the token
    /// itself is not kept).
    Expires(i64),
    /// A token file (in a Pod, the ServiceAccount's projected token, which
    /// the kubelet rotates and kube re-reads): read again at each look.
    TokenFile(PathBuf),
}

impl Credential {
    /// Where `config`'s credential says when it lapses. kube sends the
    /// inline token over the token file when both are given: so does this.
    pub fn of(config: &Config) -> Self {
        let auth = &config.auth_info;
        if let Some(token) = &auth.token {
            return jwt_expiry(token.expose_secret())
                .map_or(Credential::Unknown, Credential::Expires);
        }
        match &auth.token_file {
            Some(file) => Credential::TokenFile(file.into()),
            None => Credential::Unknown,
        }
    }

    /// When the credential lapses (unix seconds), if it says.
    pub fn expiry(&self) -> Option<i64> {
        match self {
            Credential::Unknown => None,
            Credential::Expires(at) => Some(*at),
            Credential::TokenFile(path) => crate::token::file_expiry(path),
        }
    }

    /// What `run` warns of at its start, at `now` (unix seconds): a token
    /// that has lapsed (every request will be refused), or an inline one
    /// that lapses within [`EXPIRY_WARNING_SECS`] (nothing renews it:
    /// `kubectl create token` gives an hour unless told otherwise). A token
    /// file is re-read at each request and a Pod's is rotated by the
    /// kubelet long before its hour is out, so only a lapsed one is named.
    pub fn warning(&self, now: i64) -> Option<String> {
        let at = self.expiry()?;
        let when = k8s_openapi::jiff::Timestamp::from_second(at)
            .map_or_else(|_| at.to_string(), |t| t.to_string());
        if at <= now {
            return Some(format!(
                "the controller's token lapsed at {when}: the API server will refuse every request (401); give it a new token (docs/controller.md)"
            ));
        }
        let left = at - now;
        (matches!(self, Credential::Expires(_)) && left < EXPIRY_WARNING_SECS).then(|| {
            format!(
                "the controller's token lapses at {when}, in {} h {} min, and nothing renews a token written in the kubeconfig: give it a longer-lived one (kubectl create token --duration, or a ServiceAccount token Secret) before then (docs/controller.md)",
                left / 3600,
                left % 3600 / 60
            )
        })
    }
}

/// How far ahead `run` warns of an inline token's expiry: a week, as the
/// alert `FleetRoleCredentialExpiring` does.
pub const EXPIRY_WARNING_SECS: i64 = 7 * 86_400;

pub use crate::token::jwt_expiry;

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine;

    fn jwt(claims: &str) -> String {
        let b = |s: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(s);
        format!("{}.{}.c2ln", b(r#"{"alg":"RS256"}"#), b(claims))
    }

    #[tokio::test]
    async fn a_plain_http_api_server_is_refused_before_the_token_is_ever_sent() {
        let dir = tempfile::tempdir().unwrap();
        let kubeconfig = dir.path().join("kubeconfig");
        std::fs::write(
            &kubeconfig,
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: http://10.0.0.1:6443\nusers:\n- name: u\n  user:\n    token: secret-token\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\ncurrent-context: x\n",
        )
        .unwrap();
        let source = Source {
            kubeconfig: Some(&kubeconfig),
            context: None,
        };
        let err = connect(source).await.err().expect("refused");
        let text = err.to_string();
        assert!(text.contains("is not https://"), "{text}");
        assert!(!text.contains("secret-token"), "{text}");
        // `run`'s failover candidates too.
        std::fs::write(
            &kubeconfig,
            std::fs::read_to_string(&kubeconfig)
                .unwrap()
                .replace("http://", "https://"),
        )
        .unwrap();
        let plain: http::Uri = "http://10.0.0.2:6443".parse().unwrap();
        assert!(matches!(
            connect_at(source, Some(&plain)).await,
            Err(ClusterError::Plain { .. })
        ));
    }

    #[test]
    fn a_tokens_expiry_is_its_exp_claim_and_a_token_without_one_says_nothing() {
        assert_eq!(
            jwt_expiry(&jwt(
                r#"{"sub":"system:serviceaccount:x:y","exp":1800000000}"#
            )),
            Some(1_800_000_000)
        );
        assert_eq!(jwt_expiry(&jwt(r#"{"sub":"y"}"#)), None);
        assert_eq!(jwt_expiry("not-a-jwt"), None);
        assert_eq!(jwt_expiry("a.%%%.c"), None);
    }

    #[test]
    fn run_warns_of_an_inline_token_lapsing_within_a_week_and_of_any_lapsed_token_only() {
        let now = 1_800_000_000;
        let inline = |left: i64| Credential::Expires(now + left).warning(now);
        assert_eq!(inline(EXPIRY_WARNING_SECS), None, "a week away");
        let soon = inline(3_600 + 120).expect("an hour away");
        assert!(soon.contains("in 1 h 2 min"), "{soon}");
        assert!(soon.contains("at 2027-01-15T09:02:00Z"), "{soon}");
        let lapsed = inline(0).expect("lapsed");
        assert!(
            lapsed.contains("lapsed") && lapsed.contains("401"),
            "{lapsed}"
        );
        // A token file rotates: named only once it has lapsed.
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("token");
        std::fs::write(&file, jwt(&format!(r#"{{"exp":{}}}"#, now + 60))).unwrap();
        assert_eq!(Credential::TokenFile(file.clone()).warning(now), None);
        std::fs::write(&file, jwt(&format!(r#"{{"exp":{}}}"#, now - 1))).unwrap();
        assert!(Credential::TokenFile(file).warning(now).is_some());
        assert_eq!(Credential::Unknown.warning(now), None);
    }

    #[test]
    fn a_token_file_is_read_again_at_each_look() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("token");
        std::fs::write(&file, jwt(r#"{"exp":100}"#)).unwrap();
        let c = Credential::TokenFile(file.clone());
        assert_eq!(c.expiry(), Some(100));
        // The kubelet rotates a projected token in place.
        std::fs::write(&file, jwt(r#"{"exp":200}"#)).unwrap();
        assert_eq!(c.expiry(), Some(200));
        std::fs::remove_file(&file).unwrap();
        assert_eq!(c.expiry(), None);
    }

    #[test]
    fn an_inline_token_is_preferred_to_a_token_file_as_kube_sends_it() {
        let mut config = Config::new("https://127.0.0.1:6443".parse().unwrap());
        assert_eq!(Credential::of(&config), Credential::Unknown);
        config.auth_info.token_file = Some("/var/run/token".into());
        assert_eq!(
            Credential::of(&config),
            Credential::TokenFile("/var/run/token".into())
        );
        config.auth_info.token = Some(jwt(r#"{"exp":42}"#).into());
        assert_eq!(Credential::of(&config), Credential::Expires(42));
    }
}
