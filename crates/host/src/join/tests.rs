//! Unit tests of `join.rs`: each unit's server, as k3s would read it.
use super::*;

fn write(paths: &HostPaths, rel: &str, text: &str) {
    let p = paths.at(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

#[test]
fn each_units_server_is_the_last_config_files_then_its_own_k3s_url() {
    let dir = tempfile::tempdir().unwrap();
    let paths = HostPaths::new(dir.path());
    assert!(server_unit(&paths).is_none() && agent_unit(&paths).is_none());
    write(
        &paths,
        "etc/systemd/system/k3s.service.env",
        "K3S_TOKEN=x\nK3S_URL='https://10.0.0.1:6443'\n",
    );
    write(
        &paths,
        "etc/systemd/system/k3s-agent.service.env",
        "K3S_URL=https://10.0.0.4:6443\n",
    );
    let s = server_unit(&paths).unwrap();
    assert_eq!(s.url().unwrap().as_str(), "https://10.0.0.1:6443");
    assert_eq!(
        s.source(),
        format!(
            "K3S_URL in {}",
            paths.at("etc/systemd/system/k3s.service.env").display()
        )
    );
    assert_eq!(
        agent_unit(&paths).unwrap().url().unwrap().as_str(),
        "https://10.0.0.4:6443"
    );
    write(
        &paths,
        "etc/rancher/k3s/config.yaml",
        "server: https://10.0.0.2:6443\n",
    );
    write(
        &paths,
        "etc/rancher/k3s/config.yaml.d/90-fleet-role-join.yaml",
        "server: \"https://10.0.0.3:6443\"\n",
    );
    write(
        &paths,
        "etc/rancher/k3s/config.yaml.d/95-other.yaml",
        "node-label: [a=b]\n",
    );
    // The config files beat both units' environment.
    for c in [server_unit(&paths).unwrap(), agent_unit(&paths).unwrap()] {
        assert_eq!(c.url().unwrap().as_str(), "https://10.0.0.3:6443");
        assert_eq!(c.file, paths.k3s_dropins().join(JOIN_DROPIN));
    }
    assert_eq!(overridden_by(&paths), None);
}

#[test]
fn a_later_drop_in_that_sets_server_overrides_fleet_roles_and_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let paths = HostPaths::new(dir.path());
    write(
        &paths,
        "etc/rancher/k3s/config.yaml.d/90-fleet-role-join.yaml",
        "server: \"https://10.0.0.3:6443\"\n",
    );
    write(
        &paths,
        "etc/rancher/k3s/config.yaml.d/99-site.yaml",
        "server: [not, a, string]\n",
    );
    let c = server_unit(&paths).unwrap();
    assert!(c.url().is_err(), "{c:?}");
    assert_eq!(overridden_by(&paths), Some(c.file));
}
