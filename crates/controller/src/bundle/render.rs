//! What a host's bundle holds besides its token and CA, rendered (pure):
//! its `actuator.toml` and the `install.sh` that puts the bundle in place.

use protocol::{Names, NodeName};

/// Where the package's actuator reads its settings.
pub const CONFIG_PATH: &str = "/etc/fleet-role/actuator.toml";
/// Where the bundle puts the CA on the host (the packaged file's example).
pub const CA_PATH: &str = "/etc/fleet-role/ca.crt";
/// Where the bundle puts the token on the host (the packaged file's example).
pub const TOKEN_PATH: &str = "/etc/fleet-role/token";

/// The host's `actuator.toml`: its Node name, its API servers, the CA and
/// token where [`install_script`] puts them, and the names the
/// controller's settings give (the actuator must agree with them, whatever
/// this controller's config file set).
///
/// One `key = value` line per key, each value written as JSON: a JSON
/// string or array of strings is a TOML one too (JSON's escapes are a
/// subset of TOML's basic strings'), and the Ansible role reads a bundle's
/// settings line by line with `from_json`, having no TOML parser.
pub fn actuator_toml(names: &Names, node: &NodeName, api: &[String]) -> String {
    let json = |v: serde_json::Value| v.to_string();
    let keys = [
        ("node", json(node.as_str().into())),
        ("api", json(api.into())),
        ("ca_file", json(CA_PATH.into())),
        ("token_file", json(TOKEN_PATH.into())),
        ("prefix", json(names.prefix.as_str().into())),
        ("lease_name", json(names.lease_name.as_str().into())),
        (
            "hosts_namespace",
            json(names.hosts_namespace.as_str().into()),
        ),
        (
            "controller_identity",
            json(names.controller_identity.as_str().into()),
        ),
    ];
    let mut out = format!(
        "# {CONFIG_PATH} for {node}, from `fleet-role enroll {node} --bundle`.\n\
         # Every key is described in the file the package installs. `api` was\n\
         # read from the Nodes once (servers, then eligible hosts, this host last);\n\
         # make the bundle again when the servers' addresses change.\n",
        node = node.as_str(),
    );
    for (k, v) in keys {
        out.push_str(&format!("{k} = {v}\n"));
    }
    out
}

/// The script that puts the bundle in place on `node`, run there as root
/// from the bundle's directory. Every check comes before any change; the
/// bundle's credential is tried against the API (the actuator's own
/// `status`, with the bundle's files) before anything is installed. Run
/// again it changes nothing and restarts nothing. The Node name is checked
/// (a DNS name), so it needs no quoting beyond the script's own.
pub fn install_script(node: &NodeName) -> String {
    INSTALL
        .replace("{{node}}", node.as_str())
        .replace("{{config}}", CONFIG_PATH)
        .replace("{{ca}}", CA_PATH)
        .replace("{{token}}", TOKEN_PATH)
}

const INSTALL: &str = include_str!("install.sh");

#[cfg(test)]
mod tests {
    use super::*;

    fn node(n: &str) -> NodeName {
        NodeName::parse(n).unwrap()
    }

    #[test]
    fn the_rendered_actuator_toml_is_what_the_actuator_reads_for_its_host() {
        let names = Names {
            prefix: "example.org".into(),
            controller_identity: "ops-controller".into(),
            ..Names::default()
        };
        let api = [
            "https://10.0.0.1:6443".to_string(),
            "https://[fd00::2]:6443".to_string(),
        ];
        let text = actuator_toml(&names, &node("runner-4"), &api);
        let file: actuator::config::FileConfig = toml::from_str(&text).expect(&text);
        let s = actuator::config::Settings::resolve(file, Default::default()).unwrap();
        assert_eq!(s.node.as_str(), "runner-4");
        assert_eq!(s.api, api);
        assert_eq!(s.ca_file.as_deref(), Some(std::path::Path::new(CA_PATH)));
        assert_eq!(
            s.token_file.as_deref(),
            Some(std::path::Path::new(TOKEN_PATH))
        );
        assert_eq!(s.names.prefix, "example.org");
        assert_eq!(s.names.controller_identity, "ops-controller");
        assert_eq!(s.names.hosts_namespace, names.hosts_namespace);
    }

    #[test]
    fn each_setting_is_one_line_whose_value_is_json_as_the_ansible_role_reads_it() {
        let names = Names {
            controller_identity: "ops\"ctl\\é".into(),
            ..Names::default()
        };
        let text = actuator_toml(&names, &node("runner-4"), &["https://10.0.0.1:6443".into()]);
        let table: toml::Table = text.parse().expect(&text);
        let mut read = toml::Table::new();
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let (k, v) = line.split_once(" = ").expect(line);
            let v: serde_json::Value = serde_json::from_str(v).expect(line);
            read.insert(k.into(), toml::Value::try_from(v).unwrap());
        }
        assert_eq!(read, table);
        assert_eq!(table["controller_identity"].as_str(), Some("ops\"ctl\\é"));
    }

    #[test]
    fn the_install_script_names_its_host_and_every_placeholder_is_filled() {
        let script = install_script(&node("runner-4"));
        assert!(script.starts_with("#!/bin/sh\n"));
        assert!(!script.contains("{{"), "{script}");
        assert!(script.contains("node='runner-4'"));
        assert!(
            script.contains(TOKEN_PATH) && script.contains(CA_PATH) && script.contains(CONFIG_PATH)
        );
    }
}
