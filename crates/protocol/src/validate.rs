//! Checked constructors for every value that crosses from the API (or a flag)
//! into a file, a unit, a command line or a log line.
//!
//! The Kubernetes API is untrusted input here: anyone who can annotate a Node
//! could otherwise write a newline into a drop-in or a `;` into an argument.
//! Each type below can only hold a value that is safe in all of those places.

use std::{fmt, net::IpAddr, str::FromStr};

use serde::{Deserialize, Serialize};

/// A value that failed validation: what it was meant to be, and why not.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid {what} {shown}: {why}")]
pub struct InvalidValue {
    /// What the value was meant to be (`"swap id"`, `"join URL"`, …).
    pub what: &'static str,
    /// The value, escaped and cut short so that it is safe in one log line.
    pub shown: String,
    /// Why it was refused.
    pub why: &'static str,
}

impl InvalidValue {
    fn new(what: &'static str, raw: &str, why: &'static str) -> Self {
        Self {
            what,
            shown: shown(raw),
            why,
        }
    }
}

/// Renders an untrusted value for a message: [`one_line`](crate::text::one_line_within)
/// at most 48 characters, quoted.
pub fn shown(raw: &str) -> String {
    format!("\"{}\"", crate::text::one_line_within(raw, 48))
}

fn is_dns_label(s: &str, max: usize) -> bool {
    !s.is_empty()
        && s.len() <= max
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// A swap id: a DNS-label-like token (1 to 63 of `a-z0-9-`, alphanumeric at
/// both ends). It names snapshot files, so it must also be a safe file name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct SwapId(String);

impl SwapId {
    /// Checks a raw swap id.
    pub fn parse(raw: &str) -> Result<Self, InvalidValue> {
        if is_dns_label(raw, 63) {
            Ok(Self(raw.to_string()))
        } else {
            Err(InvalidValue::new(
                "swap id",
                raw,
                "must be 1-63 of a-z, 0-9 and '-', alphanumeric at both ends",
            ))
        }
    }
    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// The regrade Lease's holder identity: the controller's `identity` setting,
/// and the `controller_identity` an actuator accepts steps under. One check
/// for both sides, so a value one side takes the other cannot refuse: 1 to
/// 128 characters, none of them a control character or whitespace (it is
/// shown in log lines and compared byte for byte with the Lease's
/// `holderIdentity`, and the controller builds its instance id from it).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct HolderIdentity(String);

impl HolderIdentity {
    /// The longest identity taken, in characters.
    pub const MAX_CHARS: usize = 128;

    /// Checks a raw holder identity.
    pub fn parse(raw: &str) -> Result<Self, InvalidValue> {
        let count = raw.chars().count();
        if count == 0 || count > Self::MAX_CHARS {
            return Err(InvalidValue::new(
                "Lease holder identity",
                raw,
                "must be 1-128 characters",
            ));
        }
        if raw.chars().any(|c| c.is_control() || c.is_whitespace()) {
            return Err(InvalidValue::new(
                "Lease holder identity",
                raw,
                "must hold no spaces or control characters",
            ));
        }
        Ok(Self(raw.to_string()))
    }

    /// The identity as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The identity as an owned string.
    pub fn into_string(self) -> String {
        self.0
    }
}

/// A Kubernetes Node name (a DNS-1123 subdomain: at most 253 characters,
/// dot-separated labels of `a-z0-9-`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct NodeName(String);

impl NodeName {
    /// Checks a raw Node name.
    pub fn parse(raw: &str) -> Result<Self, InvalidValue> {
        if !raw.is_empty() && raw.len() <= 253 && raw.split('.').all(|l| is_dns_label(l, 63)) {
            Ok(Self(raw.to_string()))
        } else {
            Err(InvalidValue::new(
                "node name",
                raw,
                "must be a DNS-1123 subdomain of at most 253 characters",
            ))
        }
    }
    /// The name as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Whether `s` is a label name or value's characters: 1 to 63 of
/// `A-Za-z0-9-_.`, alphanumeric at both ends.
fn is_label_name(s: &str) -> bool {
    let alnum = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && alnum(s.chars().next())
        && alnum(s.chars().last())
}

/// A label key (`[prefix/]name`, the prefix a DNS subdomain): the spread
/// label the settings name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct LabelKey(String);

impl LabelKey {
    /// Checks a raw label key.
    pub fn parse(raw: &str) -> Result<Self, InvalidValue> {
        let (prefix, name) = raw
            .rsplit_once('/')
            .map_or((None, raw), |(p, n)| (Some(p), n));
        if is_label_name(name) && prefix.is_none_or(|p| NodeName::parse(p).is_ok()) {
            Ok(Self(raw.to_string()))
        } else {
            Err(InvalidValue::new(
                "label key",
                raw,
                "must be [prefix/]name: a DNS subdomain, then 1 to 63 of A-Za-z0-9-_. alphanumeric at both ends",
            ))
        }
    }
    /// The key as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A label's value as read from a Node (a zone): 1 to 63 of
/// `A-Za-z0-9-_.`, alphanumeric at both ends; `None` for anything else,
/// the empty value included.
pub fn label_value(raw: &str) -> Option<&str> {
    is_label_name(raw).then_some(raw)
}

macro_rules! text_newtype {
    ($($t:ty),*) => {$(
        impl fmt::Display for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }
        impl TryFrom<String> for $t {
            type Error = InvalidValue;
            fn try_from(raw: String) -> Result<Self, InvalidValue> {
                Self::parse(&raw)
            }
        }
        impl From<$t> for String {
            fn from(v: $t) -> String {
                v.0
            }
        }
        impl FromStr for $t {
            type Err = InvalidValue;
            fn from_str(raw: &str) -> Result<Self, InvalidValue> {
                Self::parse(raw)
            }
        }
    )*};
}
text_newtype!(SwapId, NodeName, LabelKey);

/// The role a host runs: which k3s unit may be active.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Role {
    /// `k3s.service`: an embedded-etcd member.
    Server,
    /// `k3s-agent.service`.
    Agent,
}

impl Role {
    /// Checks a raw role (`server` or `agent`).
    pub fn parse(raw: &str) -> Result<Self, InvalidValue> {
        match raw {
            "server" => Ok(Role::Server),
            "agent" => Ok(Role::Agent),
            _ => Err(InvalidValue::new(
                "role",
                raw,
                "must be 'server' or 'agent'",
            )),
        }
    }
    /// The role as written in the role file and the label.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Server => "server",
            Role::Agent => "agent",
        }
    }
    /// The systemd unit of this role.
    pub fn unit(self) -> &'static str {
        match self {
            Role::Server => "k3s",
            Role::Agent => "k3s-agent",
        }
    }
    /// The other role.
    pub fn other(self) -> Role {
        match self {
            Role::Server => Role::Agent,
            Role::Agent => Role::Server,
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A step the controller asks a host for through the `role-step` annotation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StepKind {
    /// agent → learner → voter.
    Promote,
    /// voter → etcd-only, role file `agent`.
    StepDown,
    /// Abandon a promotion: end as an agent.
    Rollback,
}

impl StepKind {
    /// Checks a raw step name.
    pub fn parse(raw: &str) -> Result<Self, InvalidValue> {
        match raw {
            "promote" => Ok(StepKind::Promote),
            "step-down" => Ok(StepKind::StepDown),
            "rollback" => Ok(StepKind::Rollback),
            _ => Err(InvalidValue::new(
                "step",
                raw,
                "must be 'promote', 'step-down' or 'rollback'",
            )),
        }
    }
    /// The step's name in the annotation and the report.
    pub fn as_str(self) -> &'static str {
        match self {
            StepKind::Promote => "promote",
            StepKind::StepDown => "step-down",
            StepKind::Rollback => "rollback",
        }
    }
    /// The `desired-role` a step must come with: a controller that writes one
    /// and not the other gets a refusal rather than a guess.
    pub fn desired_role(self) -> Role {
        match self {
            StepKind::Promote => Role::Server,
            StepKind::StepDown | StepKind::Rollback => Role::Agent,
        }
    }
}

impl fmt::Display for StepKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The URL of the server a promotion joins: `https://HOST:PORT` and nothing
/// more (no user, path, query or fragment), HOST an IP address or a DNS name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct JoinUrl(String);

impl JoinUrl {
    /// Checks a raw join URL.
    pub fn parse(raw: &str) -> Result<Self, InvalidValue> {
        let bad = |why| Err(InvalidValue::new("join URL", raw, why));
        let Some(rest) = raw.strip_prefix("https://") else {
            return bad("must start with https://");
        };
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        let (host, port) = if let Some(v6) = rest.strip_prefix('[') {
            let Some((ip, port)) = v6.split_once("]:") else {
                return bad("an IPv6 host must be [ADDR]:PORT");
            };
            if ip.parse::<std::net::Ipv6Addr>().is_err() {
                return bad("not an IPv6 address");
            }
            (ip, port)
        } else {
            let Some((host, port)) = rest.rsplit_once(':') else {
                return bad("must name a port: https://HOST:PORT");
            };
            if host.parse::<std::net::Ipv4Addr>().is_err() && NodeName::parse(host).is_err() {
                return bad("host must be an IPv4 address, [IPv6] or a DNS name");
            }
            (host, port)
        };
        let _ = host;
        match port.parse::<u16>() {
            Ok(p) if p > 0 && port.bytes().all(|b| b.is_ascii_digit()) => {}
            _ => return bad("port must be a number from 1 to 65535"),
        }
        Ok(Self(format!("https://{rest}")))
    }
    /// A join URL for a server address and port.
    pub fn for_address(addr: IpAddr, port: u16) -> Self {
        match addr {
            IpAddr::V4(a) => Self(format!("https://{a}:{port}")),
            IpAddr::V6(a) => Self(format!("https://[{a}]:{port}")),
        }
    }
    /// The URL as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Its host, as a URL writes it (`10.0.0.1`, `[fd00::1]`, `server-1`).
    pub fn host(&self) -> &str {
        let rest = self.0.trim_start_matches("https://");
        rest.rsplit_once(':').map_or(rest, |(h, _)| h)
    }

    /// Its port (a parsed URL always names one).
    pub fn port(&self) -> u16 {
        self.0
            .rsplit_once(':')
            .and_then(|(_, p)| p.parse().ok())
            .unwrap_or(6443)
    }
}
text_newtype!(JoinUrl);

/// Checks an address read from a Node (k3s's `node-address` annotation or an
/// `InternalIP`): a plain IPv4 or IPv6 address, nothing else.
pub fn parse_address(raw: &str) -> Result<IpAddr, InvalidValue> {
    raw.parse::<IpAddr>()
        .map_err(|_| InvalidValue::new("node address", raw, "must be an IPv4 or IPv6 address"))
}

/// Whether Docker would take `name` as a container's name: a letter or
/// digit, then letters, digits, `_`, `.` or `-` (Docker's own rule). Such
/// a name is also safe in a shell word and a URL path segment.
pub fn is_container_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphanumeric())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_label_key_is_an_optional_dns_prefix_and_a_name_and_a_zone_a_label_value() {
        for ok in [
            "topology.kubernetes.io/zone",
            "node-restriction.kubernetes.io/site",
            "site",
            "Site_1.a",
        ] {
            assert!(LabelKey::parse(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "a b",
            "-zone",
            "Example.org/zone",
            "x/",
            "/zone",
            "a/b/c",
            "zone\n",
        ] {
            assert!(LabelKey::parse(bad).is_err(), "{bad:?}");
        }
        assert_eq!(label_value("eu-west-1a"), Some("eu-west-1a"));
        for bad in ["", "a\nb", "-a", &"z".repeat(64)] {
            assert_eq!(label_value(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn a_join_urls_host_is_its_address_or_name_without_the_port() {
        for (url, host) in [
            ("https://10.0.0.1:6443", "10.0.0.1"),
            ("https://[fd00::1]:6443", "[fd00::1]"),
            ("https://server-1:6443/", "server-1"),
        ] {
            assert_eq!(JoinUrl::parse(url).unwrap().host(), host);
        }
    }

    #[test]
    fn a_holder_identity_is_1_to_128_characters_without_spaces_or_control_characters() {
        let long = "a".repeat(128);
        let long_multibyte = "é".repeat(128);
        for ok in [
            "fleet-role",
            "f",
            "fleet-role@ops.example.org",
            "system:serviceaccount:platform:fleet-role",
            long.as_str(),
            long_multibyte.as_str(),
        ] {
            assert_eq!(HolderIdentity::parse(ok).unwrap().as_str(), ok);
        }
        let too_long = "a".repeat(129);
        for bad in [
            "",
            too_long.as_str(),
            "fleet role",
            " fleet-role",
            "fleet-role ",
            "fleet\trole",
            "fleet-role\n",
            "fleet\u{0}role",
            "fleet\u{a0}role",
            "fleet\u{7f}",
        ] {
            let err = HolderIdentity::parse(bad).unwrap_err();
            assert_eq!(err.what, "Lease holder identity", "{bad:?}");
            assert!(!err.to_string().contains('\n'), "{err}");
        }
    }

    #[test]
    fn a_swap_id_is_a_dns_label() {
        assert!(SwapId::parse("swap-20261130-1").is_ok());
        assert!(SwapId::parse("a").is_ok());
        assert!(SwapId::parse(&"a".repeat(63)).is_ok());
        for bad in [
            "",
            "-a",
            "a-",
            "A",
            "a_b",
            "a b",
            "a;rm -rf /",
            "a\nb",
            "a/b",
            "../x",
            "é",
        ] {
            assert!(SwapId::parse(bad).is_err(), "{bad:?} accepted");
        }
        assert!(SwapId::parse(&"a".repeat(64)).is_err());
    }

    #[test]
    fn a_node_name_is_a_dns_subdomain() {
        assert!(NodeName::parse("runner-1.mesh").is_ok());
        assert!(NodeName::parse(&format!("{}.{}", "a".repeat(63), "b".repeat(63))).is_ok());
        for bad in [
            "",
            ".a",
            "a..b",
            "a.",
            "A",
            "a b",
            "a$(id)",
            "a\n",
            &"a".repeat(64),
        ] {
            assert!(NodeName::parse(bad).is_err(), "{bad:?} accepted");
        }
        let long = vec!["a".repeat(63); 4].join(".") + ".ab";
        assert!(long.len() > 253);
        assert!(NodeName::parse(&long).is_err());
    }

    #[test]
    fn a_join_url_is_https_host_and_port_only() {
        for good in [
            "https://10.0.0.1:6443",
            "https://srv.mesh:6443",
            "https://[fd7a::1]:6443",
            "https://a:1/",
        ] {
            assert!(JoinUrl::parse(good).is_ok(), "{good} refused");
        }
        assert_eq!(
            JoinUrl::parse("https://a:1/").unwrap().as_str(),
            "https://a:1"
        );
        for bad in [
            "http://10.0.0.1:6443",
            "https://10.0.0.1",
            "https://10.0.0.1:0",
            "https://10.0.0.1:65536",
            "https://10.0.0.1:+1",
            "https://user@10.0.0.1:6443",
            "https://10.0.0.1:6443/path",
            "https://10.0.0.1:6443?x=1",
            "https://10.0.0.1:6443\nserver: evil",
            "https://h;rm -rf /:6443",
            "https://[zz]:6443",
            "https://:6443",
            "",
        ] {
            assert!(JoinUrl::parse(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn an_address_must_be_a_plain_ip() {
        assert_eq!(
            parse_address("100.64.0.7").unwrap().to_string(),
            "100.64.0.7"
        );
        assert!(parse_address("fd7a:115c::5").is_ok());
        for bad in ["", "host", "1.2.3.4/24", "1.2.3.4 ", "1.2.3.4\n"] {
            assert!(parse_address(bad).is_err());
        }
        assert_eq!(
            JoinUrl::for_address(parse_address("fd7a::5").unwrap(), 6443).as_str(),
            "https://[fd7a::5]:6443"
        );
    }

    #[test]
    fn an_invalid_value_is_shown_escaped_and_short() {
        let err = SwapId::parse(&format!("x\ny{}", "z".repeat(100))).unwrap_err();
        let msg = err.to_string();
        assert!(!msg.contains('\n'), "{msg}");
        assert!(msg.contains("x\\ny"), "{msg}");
        assert!(msg.len() < 200, "{msg}");
    }

    #[test]
    fn a_shown_value_is_cut_only_past_48_characters() {
        assert_eq!(shown(&"a".repeat(48)), format!("\"{}\"", "a".repeat(48)));
        assert_eq!(shown(&"a".repeat(49)), format!("\"{}…\"", "a".repeat(48)));
    }

    #[test]
    fn roles_and_steps_print_their_names() {
        assert_eq!(StepKind::StepDown.to_string(), "step-down");
        assert_eq!(Role::Agent.to_string(), "agent");
        assert_eq!(SwapId::parse("s1").unwrap().to_string(), "s1");
    }

    #[test]
    fn roles_and_steps_parse_only_their_names() {
        assert_eq!(Role::parse("server").unwrap(), Role::Server);
        assert_eq!(Role::parse("agent").unwrap(), Role::Agent);
        assert!(Role::parse("Server").is_err());
        assert_eq!(Role::Server.unit(), "k3s");
        assert_eq!(Role::Agent.unit(), "k3s-agent");
        assert_eq!(Role::Server.other(), Role::Agent);
        for s in [StepKind::Promote, StepKind::StepDown, StepKind::Rollback] {
            assert_eq!(StepKind::parse(s.as_str()).unwrap(), s);
        }
        assert!(StepKind::parse("finish").is_err());
        assert_eq!(StepKind::Promote.desired_role(), Role::Server);
        assert_eq!(StepKind::StepDown.desired_role(), Role::Agent);
        assert_eq!(StepKind::Rollback.desired_role(), Role::Agent);
    }
}
