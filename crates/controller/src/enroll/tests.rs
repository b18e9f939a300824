use std::{os::unix::fs::PermissionsExt, path::Path, process::Command};

use super::*;

/// A `docker` of the test's own, as the seed's stand-in: it logs each
/// call's arguments, hands `kubectl apply` its standard input only with
/// `--interactive` (as Docker does), refuses an empty manifest as kubectl
/// does, and answers `kubectl create token` with a token and a newline.
const DOCKER: &str = r#"#!/bin/sh
echo "$*" >> "$LOG"
interactive=no
[ "$2" = "--interactive" ] && interactive=yes
case "$*" in
  *"kubectl apply"*)
    if [ "$interactive" = yes ]; then cat > "$APPLIED"; else : > "$APPLIED"; fi
    [ -s "$APPLIED" ] || { echo "error: no objects passed to apply" >&2; exit 1; } ;;
  *"kubectl create token"*) echo "tok.en" ;;
  *) exit 2 ;;
esac
"#;

fn run(script: &str, dir: &Path) -> std::process::Output {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::write(bin.join("docker"), DOCKER).unwrap();
    std::fs::set_permissions(bin.join("docker"), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(dir.join("enroll.sh"), script).unwrap();
    Command::new("sh")
        .arg(dir.join("enroll.sh"))
        .current_dir(dir)
        .env("PATH", format!("{}:/usr/bin:/bin", bin.display()))
        .env("LOG", dir.join("docker.log"))
        .env("APPLIED", dir.join("applied.yaml"))
        .output()
        .unwrap()
}

#[test]
fn the_docker_script_applies_the_objects_through_the_server_container_and_writes_the_token_alone_and_private()
 {
    let names = Names::default();
    let id = identity("nas-1").unwrap();
    let script = docker_script(&names, &id, "k3s-server", 30).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let out = run(&script, dir.path());
    assert!(out.status.success(), "{out:?}\n{script}");
    let applied = std::fs::read_to_string(dir.path().join("applied.yaml")).unwrap();
    assert_eq!(applied, yaml(&names, &id).unwrap());
    let token = dir.path().join("nas-1.token");
    assert_eq!(std::fs::read(&token).unwrap(), b"tok.en", "no newline");
    assert_eq!(
        std::fs::metadata(&token).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let log = std::fs::read_to_string(dir.path().join("docker.log")).unwrap();
    let calls: Vec<&str> = log.lines().collect();
    assert_eq!(calls.len(), 2, "{log}");
    assert!(calls[0].starts_with("exec --interactive k3s-server kubectl apply --server-side"));
    assert!(calls[1].contains(&format!(
        "exec k3s-server kubectl create token {} --namespace {} --duration 720h",
        id.name(),
        names.hosts_namespace
    )));
}

#[test]
fn without_interactive_the_apply_would_read_nothing_which_the_stand_in_refuses() {
    // The stand-in is the check: the same script without the flag fails.
    let names = Names::default();
    let id = identity("nas-1").unwrap();
    let script = docker_script(&names, &id, "k3s-server", 30)
        .unwrap()
        .replace("exec --interactive", "exec");
    let dir = tempfile::tempdir().unwrap();
    let out = run(&script, dir.path());
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no objects passed"));
    assert!(!dir.path().join("nas-1.token").exists());
}

#[test]
fn a_container_name_docker_would_not_take_is_refused() {
    let id = identity("nas-1").unwrap();
    for bad in ["", "k3s server", "k3s';rm -rf /'", "-x"] {
        let e = docker_script(&Names::default(), &id, bad, 30).unwrap_err();
        assert!(matches!(e, EnrollError::Container(_)), "{bad}: {e}");
    }
}

#[test]
fn the_yaml_holds_the_service_account_its_role_and_binding_its_lease_and_report_and_no_token() {
    let id = identity("runner-3").unwrap();
    let y = yaml(&Names::default(), &id).unwrap();
    let top_level = y.lines().filter(|l| l.starts_with("kind: ")).count();
    assert_eq!(top_level, 5, "{y}");
    assert!(!y.contains("ClusterRoleBinding"), "{y}");
    for kind in [
        "kind: ServiceAccount",
        "kind: Role",
        "kind: RoleBinding",
        "kind: Lease",
        "kind: ConfigMap",
    ] {
        assert!(y.contains(kind), "{y}");
    }
    assert!(y.contains("name: fleet-role-actuator-runner-3"), "{y}");
    assert!(!y.to_lowercase().contains("token"), "{y}");
}

#[test]
fn a_bad_node_name_is_refused_before_anything_is_made() {
    assert!(matches!(identity("Runner_3"), Err(EnrollError::Node(_))));
}

#[test]
fn the_credential_is_written_with_mode_0600_and_replaces_the_old_one() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("runner-3.token");
    write_credential(&path, "first").unwrap();
    write_credential(&path, "second").unwrap();
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "second");
    let mode = std::fs::metadata(&path).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert_eq!(left.len(), 1, "no temporary file is left");
}
