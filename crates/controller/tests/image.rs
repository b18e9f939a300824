//! The controller's OCI image, as `scripts/image.sh` builds it (scripts/
//! test.sh does before the tests), run with podman: the controller alone,
//! as an unprivileged user, no shell, labelled with its version and
//! source, and reading a real kube-apiserver from inside the container.
//! Without podman or the image the test fails and says how to build it.

use std::{os::unix::fs::PermissionsExt, process::Command, time::Duration};

use secrecy::ExposeSecret;

/// The image's name, as scripts/image.sh tags it.
fn image() -> String {
    format!("localhost/fleet-role:{}", env!("CARGO_PKG_VERSION"))
}

/// `podman ARGS`, bounded; returns its exit code, stdout and stderr.
///
/// This machine is itself a container, which shapes how podman may run
/// one here (not how the image runs on a node): its cgroups are in hybrid
/// mode, which crun refuses and runc takes; and it may not raise a
/// resource limit, which podman's defaults (1048576 open files) ask for,
/// so a run sets limits below this machine's own.
async fn podman(args: &[&str]) -> (Option<i32>, String, String) {
    let here: &[&str] = match args.first() {
        Some(&"run") => &[
            "--runtime",
            "runc",
            "run",
            "--ulimit",
            "nofile=1024:1024",
            "--ulimit",
            "nproc=1024:1024",
        ],
        _ => &[],
    };
    let args = if here.is_empty() { args } else { &args[1..] };
    let out = tokio::time::timeout(
        Duration::from_secs(180),
        tokio::process::Command::from(Command::new("podman"))
            .args(here)
            .args(args)
            .kill_on_drop(true)
            .output(),
    )
    .await
    .unwrap_or_else(|_| panic!("podman {args:?} did not end within 180 s"))
    .unwrap_or_else(|e| panic!("podman (scripts/prereqs.sh installs it): {e}"));
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test]
async fn the_image_runs_the_controller_alone_as_an_unprivileged_user_and_reads_the_cluster() {
    let image = image();
    let (code, inspected, err) = podman(&["image", "inspect", &image]).await;
    assert_eq!(
        code,
        Some(0),
        "no image {image}: build it with scripts/image.sh ({err})"
    );
    let inspected: serde_json::Value = serde_json::from_str(&inspected).unwrap();
    let config = &inspected[0]["Config"];
    assert_eq!(config["User"], "65532:65532", "{config}");
    assert_eq!(config["Entrypoint"][0], "/usr/bin/fleet-role", "{config}");
    let labels = &inspected[0]["Labels"];
    assert_eq!(
        labels["org.opencontainers.image.version"],
        env!("CARGO_PKG_VERSION"),
        "{labels}"
    );
    assert!(
        labels["org.opencontainers.image.source"].is_string(),
        "{labels}"
    );

    let (code, out, err) = podman(&["run", "--rm", &image, "--version"]).await;
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(
        out.trim(),
        format!("fleet-role {}", env!("CARGO_PKG_VERSION"))
    );
    // No shell to run anything else with.
    let (code, _, err) = podman(&[
        "run",
        "--rm",
        "--entrypoint",
        "/bin/sh",
        &image,
        "-c",
        "true",
    ])
    .await;
    assert_eq!(code, Some(127), "the image has a shell: {err}");
    assert!(err.contains("/bin/sh: no such file"), "{err}");
    let (code, out, err) = podman(&[
        "run",
        "--rm",
        "--entrypoint",
        "/usr/bin/fleet-role",
        &image,
        "--help",
    ])
    .await;
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("status"), "{out}");

    // `status` from inside the container against a real kube-apiserver on
    // this machine's loopback (the host's network), with the CA and a
    // kubeconfig mounted where the kubeconfig names them.
    let plane = testcp::ControlPlane::start()
        .await
        .expect("a control plane");
    let top = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    for f in ["deploy/rbac/actuator.yaml", "deploy/rbac/controller.yaml"] {
        plane.apply_yaml_file(&top.join(f)).await.unwrap();
    }
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    plane
        .write_kubeconfig(&kubeconfig, plane.admin_token())
        .unwrap();
    // The container's user is not this one: it reads what it is given, the
    // CA beside the kubeconfig (the plane's own folder is private).
    let ca = dir.path().join("ca.crt");
    std::fs::copy(plane.ca_file(), &ca).unwrap();
    let text = std::fs::read_to_string(&kubeconfig).unwrap().replace(
        &plane.ca_file().display().to_string(),
        &ca.display().to_string(),
    );
    std::fs::write(&kubeconfig, text).unwrap();
    for (p, mode) in [
        (dir.path(), 0o755),
        (kubeconfig.as_path(), 0o644),
        (ca.as_path(), 0o644),
    ] {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
    }
    let mount = format!("{0}:{0}:ro", dir.path().display());
    let (code, out, err) = podman(&[
        "run",
        "--rm",
        "--network",
        "host",
        "-v",
        &mount,
        &image,
        "--kubeconfig",
        kubeconfig.to_str().unwrap(),
        "status",
    ])
    .await;
    // No Nodes and no reports: degraded (5), and it says what it saw.
    assert!(matches!(code, Some(0 | 5)), "exit {code:?}: {out}{err}");
    assert!(
        out.contains("Lease kube-system/fleet-regrade"),
        "{out}{err}"
    );
    let token = plane.admin_token().expose_secret();
    assert!(
        !out.contains(token) && !err.contains(token),
        "the token was printed"
    );
}
