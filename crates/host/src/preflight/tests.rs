//! Unit tests of `preflight.rs`: whether an agent host could join.
use super::*;

fn host_with(files: &[(&str, &str)]) -> (tempfile::TempDir, HostPaths) {
    let dir = tempfile::tempdir().unwrap();
    let paths = HostPaths::new(dir.path());
    for (rel, text) in files {
        let p = paths.at(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    (dir, paths)
}

fn plenty(mut c: JoinConfig) -> JoinConfig {
    c.free = Ok(MIN_FREE_BYTES);
    c
}

#[test]
fn a_host_with_a_token_room_a_server_that_answers_and_agent_keys_could_join() {
    let (_d, paths) = host_with(&[("etc/rancher/k3s/config.yaml", "node-name: a\ntoken: x\n")]);
    let c = plenty(read(&paths));
    assert_eq!(
        c.token,
        Some(format!("token: in {}", paths.k3s_config().display()))
    );
    assert!(assess(&c, Some(&Ok(()))).is_empty());
    assert!(assess(&c, None).is_empty());
}

#[test]
fn a_token_only_in_the_agents_environment_is_no_token_for_the_server() {
    let (_d, paths) = host_with(&[
        ("etc/rancher/k3s/config.yaml", "node-name: a\n"),
        ("etc/systemd/system/k3s-agent.service.env", "K3S_TOKEN=x\n"),
    ]);
    let r = assess(&plenty(read(&paths)), None);
    assert_eq!(r.len(), 1, "{r:?}");
    assert!(r[0].contains("no join token"), "{r:?}");
    std::fs::write(
        paths.at("etc/systemd/system/k3s.service.env"),
        "K3S_TOKEN=x\n",
    )
    .unwrap();
    assert!(assess(&plenty(read(&paths)), None).is_empty());
}

#[test]
fn too_little_room_a_server_that_does_not_answer_and_a_server_only_key_are_each_a_reason() {
    let (_d, paths) = host_with(&[(
        "etc/rancher/k3s/config.yaml",
        "token: x\ncluster-init: true\n",
    )]);
    let mut c = read(&paths);
    c.free = Ok(MIN_FREE_BYTES - 1);
    let r = assess(&c, Some(&Err("connection refused".into())));
    assert_eq!(r.len(), 3, "{r:?}");
    assert!(r[0].contains("MiB free"), "{r:?}");
    assert!(
        r[1].contains("no k3s server could be reached: connection refused"),
        "{r:?}"
    );
    assert!(
        r[2].contains("could never be demoted") && r[2].contains("cluster-init"),
        "{r:?}"
    );
}

#[test]
fn the_free_space_is_read_from_the_nearest_existing_parent() {
    let (_d, paths) = host_with(&[]);
    // Any machine that builds this has more than a MiB free.
    assert!(read(&paths).free.unwrap() > 1024 * 1024);
}

#[test]
fn the_least_free_space_is_etcds_default_quota_of_2_gib() {
    assert_eq!(MIN_FREE_BYTES, 2_147_483_648);
}

#[test]
fn a_token_file_its_alias_and_k3s_token_file_count_and_an_empty_k3s_token_does_not() {
    for (rel, text) in [
        (
            "etc/rancher/k3s/config.yaml",
            "token-file: /etc/k3s-token\n",
        ),
        ("etc/rancher/k3s/config.yaml", "t: x\n"),
        (
            "etc/systemd/system/k3s.service.env",
            "K3S_TOKEN_FILE=/etc/k3s-token\n",
        ),
        ("etc/default/k3s", "export K3S_TOKEN=\"x\"\n"),
    ] {
        let (_d, paths) = host_with(&[(rel, text)]);
        assert!(read(&paths).token.is_some(), "{rel}: {text}");
    }
    for (rel, text) in [
        ("etc/systemd/system/k3s.service.env", "K3S_TOKEN=\n"),
        (
            "etc/systemd/system/k3s.service.env",
            "K3S_URL=https://10.0.0.1:6443\n",
        ),
        ("etc/rancher/k3s/config.yaml", "node-name: a\n"),
    ] {
        let (_d, paths) = host_with(&[(rel, text)]);
        assert!(read(&paths).token.is_none(), "{rel}: {text}");
    }
}

#[test]
fn a_datastore_short_of_room_is_named_with_its_free_space_and_one_with_room_is_not() {
    assert_eq!(room_reason(&Ok(MIN_FREE_BYTES)), None);
    let short = room_reason(&Ok(64 * 1024 * 1024)).unwrap();
    assert!(
        short.starts_with("64 MiB free where k3s keeps its datastore"),
        "{short}"
    );
    assert!(
        room_reason(&Err("statvfs: EIO".into()))
            .unwrap()
            .contains("statvfs: EIO")
    );
    let (_d, paths) = host_with(&[]);
    // Any machine that builds this has a little room; the check reads it
    // where the datastore goes.
    let now = datastore_short(&paths);
    assert_eq!(now, room_reason(&read(&paths).free));
}
