//! `fleet-role enroll NODE` and `fleet-role unenroll NODE`: one identity per
//! host.
//!
//! Enrolling makes, in the hosts' namespace, the host's ServiceAccount, the
//! Role and RoleBinding that let it get and update its own heartbeat Lease
//! and report ConfigMap, and those two objects (the objects are
//! [`kubeview::Identity::objects`], the same the lab and the tests make;
//! the roles every host shares are bound once by `fleet-role manifests`),
//! then asks the TokenRequest API for a token valid `--valid-days` and writes
//! it to a file of mode 0600 named for the host. The token is printed only
//! when asked (`--credential -`). Running it again rotates the credential:
//! the objects are applied again unchanged and a new token is written; the
//! old one stays valid until it expires, or until `unenroll` revokes them
//! all (deleting the ServiceAccount invalidates every token issued for it).
//! `unenroll` also deletes what earlier releases made for the host (its
//! ServiceAccount in the shared report's namespace and its three bindings).
//!
//! It needs a cluster admin's kubeconfig: the controller's own credential
//! can create none of these objects.

use std::{
    io::Write,
    os::unix::fs::{OpenOptionsExt, PermissionsExt},
    path::{Path, PathBuf},
};

use clap::{Args, ValueEnum};
use fleetdecide::one_line;
use k8s_openapi::api::{authentication::v1::TokenRequest, core::v1::ServiceAccount};
use kube::{
    Api, Client,
    api::{
        ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
    },
};
use kubeview::{
    Identity,
    identity::{ENROLL_FIELD_MANAGER, IdentityError},
};
use protocol::{Names, NodeName};
use serde_json::Value;

/// What `enroll` prints or does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Default)]
pub enum EnrollOutput {
    /// Create the objects and write the credential; print a summary.
    #[default]
    Text,
    /// Print the objects as YAML and change nothing (no credential: a token
    /// can only be issued for a ServiceAccount that exists).
    Yaml,
    /// Print a shell script for a Docker host, whose API server is reached
    /// only through its server container, and change nothing: it applies
    /// the objects with `docker exec --interactive CONTAINER kubectl apply`
    /// and writes the credential from `kubectl create token` there.
    Docker,
}

/// `fleet-role enroll NODE`.
#[derive(Debug, Args)]
pub struct EnrollArgs {
    /// The host's Node name.
    pub node: String,
    /// Where the credential goes (mode 0600, replaced atomically); `-` prints
    /// it on stdout. Default: `NODE.token` in the current directory.
    #[arg(long, value_name = "FILE")]
    pub credential: Option<PathBuf>,
    /// How many days the credential is valid (the actuator warns from 30
    /// days before it lapses); enroll again before then to rotate it.
    #[arg(long, default_value_t = 365, value_parser = clap::value_parser!(u32).range(1..=3650))]
    pub valid_days: u32,
    /// `text`: create and write; `yaml`: print the objects, change nothing;
    /// `docker`: print a script that does it through a server container.
    #[arg(long, value_enum, default_value_t)]
    pub output: EnrollOutput,
    /// With `--output docker`: the server container the script runs
    /// kubectl in.
    #[arg(long, value_name = "NAME", default_value = "k3s-server")]
    pub container: String,
    /// Write everything the host needs into the new directory DIR (mode
    /// 0700): its token, the cluster's CA, its actuator.toml and
    /// install.sh, the one command to run on the host as root.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["credential", "output"])]
    pub bundle: Option<PathBuf>,
    /// With --bundle: an API server the host's actuator is given, in place
    /// of those found from the Nodes; again for the next one.
    #[arg(long = "api", value_name = "URL", requires = "bundle")]
    pub api: Vec<String>,
    /// With --bundle: the API port of the servers found from the Nodes.
    #[arg(long, value_name = "PORT", default_value_t = 6443, requires = "bundle")]
    pub api_port: u16,
}

/// `fleet-role unenroll NODE`.
#[derive(Debug, Args)]
pub struct UnenrollArgs {
    /// The host's Node name.
    pub node: String,
}

/// Why enrolling or unenrolling failed.
#[derive(Debug, thiserror::Error)]
pub enum EnrollError {
    /// The Node name is not one.
    #[error(transparent)]
    Node(#[from] protocol::InvalidValue),
    /// The Node name cannot make a ServiceAccount name.
    #[error(transparent)]
    Identity(#[from] IdentityError),
    /// An object could not be written or deleted (403: the kubeconfig is
    /// not a cluster admin's).
    #[error("{what}: {source}")]
    Api {
        /// The object and the write.
        what: String,
        /// The cause.
        #[source]
        source: kube::Error,
    },
    /// The TokenRequest API answered without a token.
    #[error("the TokenRequest for {0} answered without a token")]
    NoToken(String),
    /// The credential file could not be written.
    #[error("cannot write the credential to {}: {source}", path.display())]
    Credential {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The objects could not be shown as YAML.
    #[error("cannot show the objects as YAML: {0}")]
    Yaml(String),
    /// `--container` names no Docker container.
    #[error(
        "--container {0:?} is not a Docker container name (a letter or digit, then letters, digits, _, . or -)"
    )]
    Container(String),
}

fn identity(raw: &str) -> Result<Identity, EnrollError> {
    Ok(Identity::of(&NodeName::parse(raw)?)?)
}

/// The host's objects as YAML documents, for `--output yaml` (an operator's
/// review, or Ansible's `k8s` module).
pub fn yaml(names: &Names, id: &Identity) -> Result<String, EnrollError> {
    let objects = id.objects(names);
    serde_saphyr::to_string_multiple(&objects).map_err(|e| EnrollError::Yaml(e.to_string()))
}

/// The script of `--output docker`: run on a Docker host whose API server
/// is reachable only through the server container `container`, it applies
/// the host's objects there (`docker exec --interactive`: Docker hands the
/// command its standard input only with it, and kubectl refuses an empty
/// manifest), then issues a token valid `valid_days` and writes it alone
/// (no newline, mode 0600 from the umask) to `NODE.token`. Every name in it
/// is checked (a Node name, a container name), so none needs quoting
/// beyond the script's own.
pub fn docker_script(
    names: &Names,
    id: &Identity,
    container: &str,
    valid_days: u32,
) -> Result<String, EnrollError> {
    if !protocol::validate::is_container_name(container) {
        return Err(EnrollError::Container(one_line(container)));
    }
    let mut objects = yaml(names, id)?;
    // The heredoc's end marker must start a line of its own.
    if !objects.ends_with('\n') {
        objects.push('\n');
    }
    let node = id.node().as_str();
    let hours = u64::from(valid_days) * 24;
    Ok(format!(
        "#!/bin/sh\n\
         # fleet-role enroll {node} --output docker: run on {node}'s Docker host.\n\
         set -eu\n\
         docker exec --interactive '{container}' kubectl apply --server-side \\\n  \
         --field-manager='{manager}' --force-conflicts --filename - <<'FLEET_ROLE_OBJECTS'\n\
         {objects}FLEET_ROLE_OBJECTS\n\
         umask 077\n\
         # The token alone: the actuator sends the file as it is.\n\
         docker exec '{container}' kubectl create token '{sa}' --namespace '{ns}' \\\n  \
         --duration {hours}h | tr -d '\\n' > '{node}.token.new'\n\
         mv '{node}.token.new' '{node}.token'\n",
        manager = ENROLL_FIELD_MANAGER,
        sa = id.name(),
        ns = names.hosts_namespace,
    ))
}

/// What `enroll` made.
#[derive(Debug)]
pub struct Enrolled {
    /// The identity.
    pub identity: Identity,
    /// Where the credential was written (`None`: printed on stdout).
    pub credential: Option<PathBuf>,
    /// When the credential lapses (RFC 3339, as the API answered).
    pub expires: Option<String>,
}

/// The API of `kind` (of `api_version`) in `namespace` (`None`: a cluster
/// object), for the few kinds enroll writes and unenroll deletes.
fn dynamic(
    client: &Client,
    api_version: &str,
    kind: &str,
    namespace: Option<&str>,
) -> Api<DynamicObject> {
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let resource = ApiResource::from_gvk(&GroupVersionKind::gvk(group, version, kind));
    match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
        None => Api::all_with(client.clone(), &resource),
    }
}

/// Applies `objects` in order, server-side, as [`ENROLL_FIELD_MANAGER`]
/// (forced: enroll owns these objects, and a second run must converge; the
/// Lease's and the report's objects carry no field the host writes, so a
/// second run leaves the host's heartbeat and report as they are).
async fn apply(client: &Client, objects: &[Value]) -> Result<(), EnrollError> {
    let params = PatchParams::apply(ENROLL_FIELD_MANAGER).force();
    for o in objects {
        let version = o["apiVersion"].as_str().unwrap_or_default();
        let kind = o["kind"].as_str().unwrap_or_default();
        let name = o["metadata"]["name"].as_str().unwrap_or_default();
        let ns = o["metadata"]["namespace"].as_str();
        let what = format!("applying {kind} {}/{name}", ns.unwrap_or_default());
        dynamic(client, version, kind, ns)
            .patch(name, &params, &Patch::Apply(o))
            .await
            .map_err(|source| EnrollError::Api { what, source })?;
    }
    Ok(())
}

/// Enrolls `args.node`: its identity made, a token issued and written.
/// Returns what was made and, for `--credential -`, the token to print.
pub async fn enroll(
    client: &Client,
    names: &Names,
    args: &EnrollArgs,
) -> Result<(Enrolled, Option<String>), EnrollError> {
    let id = identity(&args.node)?;
    apply(client, &id.objects(names)).await?;
    let request: TokenRequest = serde_json::from_value(serde_json::json!({
        "spec": {"audiences": [], "expirationSeconds": i64::from(args.valid_days) * 86_400},
    }))
    .expect("a TokenRequest");
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), &names.hosts_namespace);
    let answer = accounts
        .create_token_request(id.name(), &PostParams::default(), &request)
        .await
        .map_err(|source| EnrollError::Api {
            what: format!("requesting a token for {}", id.name()),
            source,
        })?;
    let status = answer
        .status
        .filter(|s| !s.token.is_empty())
        .ok_or_else(|| EnrollError::NoToken(id.name().to_string()))?;
    let expires = Some(status.expiration_timestamp.0.to_string());
    let (credential, shown) = match &args.credential {
        Some(p) if p.as_os_str() == "-" => (None, Some(status.token)),
        other => {
            let path = other
                .clone()
                .unwrap_or_else(|| PathBuf::from(format!("{}.token", id.node().as_str())));
            write_credential(&path, &status.token).map_err(|source| EnrollError::Credential {
                path: path.clone(),
                source,
            })?;
            (Some(path), None)
        }
    };
    Ok((
        Enrolled {
            identity: id,
            credential,
            expires,
        },
        shown,
    ))
}

/// Writes `token` to `path` with mode 0600, atomically: a new file beside it
/// (created with its final mode, so the token is never readable by others
/// even for a moment), synced, then renamed over. The token alone, no
/// newline: the actuator sends the file as it is.
pub fn write_credential(path: &Path, token: &str) -> std::io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = path
        .file_name()
        .ok_or_else(|| std::io::Error::other("the credential's path names no file"))?;
    let tmp = dir.join(format!(".{}.new", name.to_string_lossy()));
    let _ = std::fs::remove_file(&tmp);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)?;
    // A umask cannot widen it, but an odd filesystem could: say so rather
    // than leave a token readable.
    f.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    f.write_all(token.as_bytes())?;
    f.sync_all()?;
    drop(f);
    std::fs::rename(&tmp, path)?;
    std::fs::File::open(&dir)?.sync_all()
}

/// Removes `node`'s identity: its ServiceAccount (which revokes every token
/// issued for it), its Role and RoleBinding, its heartbeat Lease and its
/// report ConfigMap, then what earlier releases made for it (its
/// ServiceAccount in the shared report's namespace and its three bindings).
/// One already gone is no error. Returns what was deleted. The host's copy
/// of its report stays on the host, and its key of the shared report of
/// earlier releases stays until that ConfigMap is deleted.
pub async fn unenroll(
    client: &Client,
    names: &Names,
    node: &str,
) -> Result<Vec<String>, EnrollError> {
    let id = identity(node)?;
    let dp = DeleteParams::default();
    let mut removed = Vec::new();
    // The ServiceAccounts first: from then on no token of them works,
    // whatever happens to the rest.
    let mut all: Vec<_> = id
        .objects(names)
        .into_iter()
        .chain(id.legacy_objects(names))
        .map(|o| {
            let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
            (
                text(&o["apiVersion"]),
                text(&o["kind"]),
                o["metadata"]["namespace"].as_str().map(String::from),
                text(&o["metadata"]["name"]),
            )
        })
        .collect();
    all.sort_by_key(|(_, kind, _, _)| kind != "ServiceAccount");
    for (version, kind, ns, name) in all {
        let result = dynamic(client, &version, &kind, ns.as_deref())
            .delete(&name, &dp)
            .await
            .map(drop);
        let shown = match &ns {
            None => format!("{kind} {name}"),
            Some(ns) => format!("{kind} {ns}/{name}"),
        };
        match result {
            Ok(()) => removed.push(shown),
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(source) => {
                return Err(EnrollError::Api {
                    what: format!("deleting {shown}"),
                    source,
                });
            }
        }
    }
    Ok(removed)
}

/// What `enroll` prints (never the token, unless it was asked for).
pub fn summary(names: &Names, e: &Enrolled) -> String {
    let id = &e.identity;
    let mut out = format!(
        "enrolled {node}: ServiceAccount {ns}/{sa} with its own heartbeat Lease {ns}/{node} and report ConfigMap {ns}/{node} (the shared roles reach it through the group {group})\n",
        node = one_line(id.node().as_str()),
        ns = names.hosts_namespace,
        sa = id.name(),
        group = kubeview::identity::hosts_group(names),
    );
    if let Some(p) = &e.credential {
        out.push_str(&format!(
            "credential written to {} (mode 0600); copy it to the host's token_file\n",
            one_line(&p.display().to_string())
        ));
    }
    if let Some(x) = &e.expires {
        out.push_str(&format!(
            "valid until {}; run `fleet-role enroll {}` again before then to rotate it",
            one_line(x),
            one_line(id.node().as_str())
        ));
    }
    out
}

/// `fleet-role enroll` and `unenroll`, from their arguments to an exit code.
pub mod command {
    use super::*;
    use protocol::exit::{Exit, Marked};

    /// The host's identity from the NODE argument; a bad one is a usage error.
    fn node_identity(raw: &str) -> anyhow::Result<Identity> {
        identity(raw).map_err(|e| anyhow::Error::new(e).context(Marked(Exit::Usage)))
    }

    /// Runs `enroll`; `client` is made only when the API is needed.
    pub async fn enroll<F, Fut>(names: &Names, args: &EnrollArgs, client: F) -> anyhow::Result<Exit>
    where
        F: FnOnce() -> Fut,
        Fut: std::future::Future<Output = anyhow::Result<Client>>,
    {
        let id = node_identity(&args.node)?;
        match args.output {
            EnrollOutput::Yaml => {
                print!("{}", yaml(names, &id)?);
                return Ok(Exit::Done);
            }
            EnrollOutput::Docker => {
                let script = docker_script(names, &id, &args.container, args.valid_days)
                    .map_err(|e| anyhow::Error::new(e).context(Marked(Exit::Usage)))?;
                print!("{script}");
                return Ok(Exit::Done);
            }
            EnrollOutput::Text => {}
        }
        let (made, token) = super::enroll(&client().await?, names, args).await?;
        match token {
            // Asked for: the token alone on stdout, the summary on stderr.
            Some(t) => {
                println!("{t}");
                eprintln!("{}", summary(names, &made));
            }
            None => println!("{}", summary(names, &made)),
        }
        Ok(Exit::Done)
    }

    /// Runs `unenroll`.
    pub async fn unenroll<F, Fut>(
        names: &Names,
        args: &UnenrollArgs,
        client: F,
    ) -> anyhow::Result<Exit>
    where
        F: FnOnce() -> Fut,
        Fut: std::future::Future<Output = anyhow::Result<Client>>,
    {
        node_identity(&args.node)?;
        let removed = super::unenroll(&client().await?, names, &args.node).await?;
        if removed.is_empty() {
            println!(
                "{} was not enrolled: nothing to remove",
                one_line(&args.node)
            );
        } else {
            println!(
                "unenrolled {}: removed {} (every token of it is revoked)",
                one_line(&args.node),
                removed.join(", ")
            );
        }
        Ok(Exit::Done)
    }
}

#[cfg(test)]
mod tests;
