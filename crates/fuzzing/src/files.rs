//! What the actuator reads on its host: files under the host root, and the
//! answers of the programs and listeners it asks.

use std::{collections::BTreeMap, net::IpAddr};

use host::{
    addresses::LocalAddresses,
    join::env_assignment,
    k3s_config,
    k3s_version::{K3sVersion, SUPPORTED_MINORS},
    systemd::{ActiveState, UnitState},
};
use protocol::JoinUrl;
use serde::{Deserialize, de::IgnoredAny};

use crate::{one_line, text};

/// The role file's text (`/var/lib/fleet-role/role`), read with
/// [`host::role::parse`]: a role read is the file's text without its white
/// space, and written again (as `host::role::write` writes it) reads the
/// same.
///
/// Who writes it: root on the host (the actuator, its package's install
/// script, an operator's hand); both k3s units' `ExecCondition` read it.
pub fn role_file(data: &[u8]) {
    let Some(raw) = text(data) else {
        return;
    };
    if let Ok(role) = host::role::parse(raw) {
        assert_eq!(role.as_str(), raw.trim());
        assert_eq!(host::role::parse(&format!("{role}\n")), Ok(role));
    }
}

/// `systemctl show -p ActiveState,SubState,Result,InactiveExitTimestampMonotonic`'s
/// answer, read with [`UnitState::parse`] (and [`ActiveState::parse`]): a
/// state read is written again as the same lines and reads the same, and a
/// refusal says why on one line.
///
/// Who writes it: systemd, through whatever `systemctl` is first on the
/// actuator's `PATH`; the state's words come from the units (root's).
/// Read lossily as UTF-8, as the actuator reads it.
pub fn unit_state(data: &[u8]) {
    let raw = String::from_utf8_lossy(data);
    for word in raw.split_whitespace().take(8) {
        if let Some(state) = ActiveState::parse(word) {
            assert_eq!(state.as_str(), word);
        }
    }
    match UnitState::parse(&raw) {
        Ok(s) => {
            assert_eq!(ActiveState::parse(s.active.as_str()), Some(s.active));
            let again = format!(
                "ActiveState={}\nSubState={}\nResult={}\nInactiveExitTimestampMonotonic={}\n",
                s.active.as_str(),
                s.sub,
                s.result,
                s.inactive_exit
            );
            assert_eq!(UnitState::parse(&again).as_ref(), Ok(&s), "{again:?}");
            let _ = (s.is_stopped(), s.to_string());
        }
        Err(why) => assert!(one_line(&why), "{why:?}"),
    }
}

/// k3s's `server:` key, as `host::join` and `host::eligibility` read it.
#[derive(Debug, Default, Deserialize)]
struct ServerKey {
    server: Option<String>,
}

/// k3s's `node-name:` and `node-ip:` keys, as `host::identity` reads them.
#[derive(Debug, Default, Deserialize)]
struct IdentityKeys {
    #[serde(rename = "node-name")]
    node_name: Option<String>,
    #[serde(rename = "node-ip")]
    node_ip: Option<OneOrMany>,
}

/// `node-ip:` as k3s takes it: one string, or a list.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

/// The snapshot keys, as `host::k3s::SnapshotConfig` reads them.
#[derive(Debug, Default, Deserialize)]
struct SnapshotKeys {
    #[serde(rename = "etcd-snapshot-dir")]
    dir: Option<String>,
    #[serde(rename = "etcd-snapshot-compress")]
    compress: Option<Flag>,
}

/// A boolean flag's value: YAML's `true`, or text k3s passes on.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Flag {
    Bool(bool),
    Text(String),
}

/// What the product goes on to do with the keys it read: the server as a
/// join URL, the node-ips as addresses, the snapshot flag's text.
fn use_keys(server: &ServerKey, identity: &IdentityKeys, snapshot: &SnapshotKeys) {
    if let Some(url) = &server.server {
        let _ = JoinUrl::parse(url.trim());
    }
    if let Some(name) = &identity.node_name {
        let _ = protocol::NodeName::parse(name.trim());
    }
    let ips = match &identity.node_ip {
        Some(OneOrMany::One(s)) => vec![s.as_str()],
        Some(OneOrMany::Many(v)) => v.iter().map(String::as_str).collect(),
        None => vec![],
    };
    for ip in ips.iter().flat_map(|s| s.split(',')).map(str::trim) {
        let _ = ip.parse::<IpAddr>();
    }
    if let Some(dir) = &snapshot.dir {
        let _ = dir.starts_with('/') && !dir.chars().any(char::is_control);
    }
    let _compress: Option<bool> = match &snapshot.compress {
        Some(Flag::Text(t)) => match t.to_ascii_lowercase().as_str() {
            "true" | "1" | "t" => Some(true),
            "false" | "0" | "f" => Some(false),
            _ => None,
        },
        Some(Flag::Bool(b)) => Some(*b),
        None => None,
    };
}

/// One of k3s's config files (`/etc/rancher/k3s/config.yaml` or a file of
/// `config.yaml.d/`), read with [`k3s_config::parse`] and then for the keys
/// fleet-role reads of it (`server:`, `node-name:`, `node-ip:`, the
/// snapshot keys), as the product's own shapes read them: the keys are
/// listed sorted and once each, and what is said of a file or a value that
/// does not read is one short line that never quotes the file's `token:`.
///
/// Who writes it: root on the host (an operator, install.sh's
/// `INSTALL_K3S_EXEC`, a provisioning tool, the Ansible role; fleet-role's
/// own drop-ins).
pub fn k3s_config(data: &[u8]) {
    let Some(raw) = text(data) else {
        return;
    };
    let secret = raw.lines().find_map(|l| {
        let v = l.strip_prefix("token:")?.trim();
        (v.len() >= 8).then_some(v)
    });
    let unusable = |e: k3s_config::Unusable| {
        assert!(one_line(&e.why) && e.why.len() <= 120, "{:?}", e.why);
        if let Some(s) = secret {
            assert!(!e.why.contains(s), "{:?} shows the token", e.why);
        }
    };
    let mapping = match k3s_config::parse(raw.to_string()) {
        Ok(m) => m,
        Err(e) => return unusable(e),
    };
    let keys = mapping.keys();
    assert!(keys.windows(2).all(|w| w[0] < w[1]), "{keys:?}");
    if let Some(s) = secret {
        assert!(!format!("{mapping:?}").contains(s));
    }
    let server = mapping.get::<ServerKey>();
    let identity = mapping.get::<IdentityKeys>();
    let snapshot = mapping.get::<SnapshotKeys>();
    match (server, identity, snapshot) {
        (Ok(server), Ok(identity), Ok(snapshot)) => use_keys(&server, &identity, &snapshot),
        (server, identity, snapshot) => {
            for e in [server.err(), identity.err(), snapshot.err()]
                .into_iter()
                .flatten()
            {
                unusable(e);
            }
        }
    }
    match mapping.get::<BTreeMap<String, IgnoredAny>>() {
        Ok(all) => assert!(all.keys().eq(keys.iter()), "{keys:?}"),
        Err(e) => unusable(e),
    }
}

/// `k3s --version`'s output, read with [`K3sVersion::parse`]: the version
/// word kept is one short line, and the warning goes with a release
/// outside [`SUPPORTED_MINORS`].
///
/// Who writes it: the `k3s` binary first on the actuator's `PATH` (root's;
/// an upgrade replaces it). Read lossily as UTF-8, as the actuator reads
/// it.
pub fn k3s_version(data: &[u8]) {
    let raw = String::from_utf8_lossy(data);
    let Some(v) = K3sVersion::parse(&raw) else {
        return;
    };
    assert!(one_line(&v.text) && v.text.chars().count() <= 65, "{v:?}");
    let supported = v.major == 1 && SUPPORTED_MINORS.contains(&v.minor);
    assert_eq!(v.supported(), supported);
    match v.warning() {
        Some(w) => assert!(!supported && one_line(&w), "{w:?}"),
        None => assert!(supported),
    }
}

/// `/proc/net/fib_trie` and `/proc/net/if_inet6`, the two texts separated by
/// the first NUL byte, read with [`LocalAddresses::parse`] and then asked
/// whether a few addresses are this host's.
///
/// Who writes it: the kernel (the addresses an operator, DHCP or a mesh
/// gave the host's interfaces); a test gives its own directory.
pub fn local_addresses(data: &[u8]) {
    let Some(raw) = text(data) else {
        return;
    };
    let (fib_trie, if_inet6) = raw.split_once('\0').unwrap_or((raw, ""));
    let local = LocalAddresses::parse(fib_trie, if_inet6);
    let mut asked: Vec<IpAddr> = ["127.0.0.1", "10.0.0.1", "0.0.0.0", "::1", "::ffff:10.0.0.1"]
        .iter()
        .filter_map(|a| a.parse().ok())
        .collect();
    // Every address the texts name, as a leaf or an interface's.
    asked.extend(
        raw.split(|c: char| c.is_whitespace() || c == '\0' || c == '/')
            .filter_map(|w| w.parse::<IpAddr>().ok())
            .take(64),
    );
    for ip in asked {
        let _ = local.contains(ip);
    }
    assert_eq!(
        LocalAddresses::parse(fib_trie, if_inet6),
        local,
        "the same texts read the same"
    );
}

/// An environment file of a k3s unit (`/etc/systemd/system/k3s.service.env`
/// and the others `host::join` names), read with
/// [`host::join::env_assignment`] for the keys fleet-role reads, the
/// server's URL then checked as a join URL (what `host::join` does next).
///
/// Who writes it: root on the host (install.sh, an operator, a
/// provisioning tool).
pub fn env_file(data: &[u8]) {
    let Some(raw) = text(data) else {
        return;
    };
    let keys = ["K3S_URL", "K3S_TOKEN", "K3S_TOKEN_FILE"];
    let Some((key, value)) = env_assignment(raw, &keys) else {
        return;
    };
    assert!(keys.contains(&key), "{key:?}");
    assert!(!value.is_empty(), "an empty value is no assignment");
    assert!(
        !value.starts_with(['"', '\'']) && !value.ends_with(['"', '\'']),
        "{value:?}"
    );
    if key == "K3S_URL" {
        let _ = JoinUrl::parse(value.trim());
    }
}

/// etcd's answer to `GET /health` on its metrics listener (the raw HTTP
/// response), read with [`host::etcd::healthy_answer`]: healthy only on a
/// `200` status line.
///
/// Who writes it: whatever listens on `127.0.0.1:2381` (k3s's etcd; any
/// local process that took the port first).
pub fn etcd_health(data: &[u8]) {
    if host::etcd::healthy_answer(data) {
        assert!(
            data.starts_with(b"HTTP/1.1 200") || data.starts_with(b"HTTP/1.0 200"),
            "healthy without a 200"
        );
    }
}
