//! What a host's bundle is used by, without a cluster: its `install.sh`,
//! run by `sh` with systemd, the hostname and the actuator stood in for by
//! scripts that record what they were asked (the files go under a
//! temporary root, `FLEET_ROLE_ROOT`); and the Ansible role, reading a
//! bundle and rendering `actuator.toml` (every table included) with the
//! pinned ansible-core of scripts/ansible.sh, run here against localhost.
//!
//! install.sh gives the files root's ownership: these tests run as root,
//! as the whole suite does (scripts/test.sh).

use std::{
    fs,
    os::unix::fs::PermissionsExt,
    path::{Path, PathBuf},
    process::{Command, Output, Stdio},
    time::Duration,
};

use controller::bundle::render;
use protocol::{Names, NodeName};

const NODE: &str = "runner-4";
const CA: &str = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";

fn top() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A bundle for `node` in `dir`, as `enroll --bundle` writes one.
fn bundle(dir: &Path, node: &str, names: &Names) {
    let node = NodeName::parse(node).unwrap();
    fs::create_dir_all(dir).unwrap();
    let api = [
        "https://10.0.0.1:6443".to_string(),
        "https://10.0.0.2:6443".to_string(),
    ];
    fs::write(
        dir.join("actuator.toml"),
        render::actuator_toml(names, &node, &api),
    )
    .unwrap();
    fs::write(dir.join("ca.crt"), CA).unwrap();
    fs::write(dir.join("token"), "the-token").unwrap();
    fs::write(dir.join("install.sh"), render::install_script(&node)).unwrap();
    for f in ["actuator.toml", "ca.crt", "token"] {
        fs::set_permissions(dir.join(f), fs::Permissions::from_mode(0o600)).unwrap();
    }
}

fn stub(bin: &Path, name: &str, body: &str) {
    let p = bin.join(name);
    fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
    fs::set_permissions(&p, fs::Permissions::from_mode(0o755)).unwrap();
}

/// A host for install.sh: its root (with the package's /etc/fleet-role),
/// the stand-ins, and what they were asked.
struct Host {
    dir: tempfile::TempDir,
}

impl Host {
    /// A host named `hostname`; the actuator's `status` exits `preflight`
    /// with the bundle's files and `status` with the installed ones.
    fn new(hostname: &str, uid: u32, preflight: i32, status: i32) -> Host {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let bin = d.join("bin");
        fs::create_dir_all(&bin).unwrap();
        fs::create_dir_all(d.join("root/etc/fleet-role")).unwrap();
        bundle(&d.join("bundle"), NODE, &Names::default());
        let log = d.join("calls");
        let record = format!("echo \"$(basename \"$0\") $*\" >> {}", log.display());
        stub(&bin, "hostname", &format!("echo {hostname}"));
        stub(&bin, "id", &format!("echo {uid}"));
        // systemd: a unit active once restarted.
        let active = d.join("active");
        stub(
            &bin,
            "systemctl",
            &format!(
                "{record}\ncase \"$1\" in\nis-active) [ -e {a} ] ;;\nrestart) touch {a} ;;\nesac",
                a = active.display()
            ),
        );
        stub(
            &bin,
            "fleet-role-actuator",
            &format!(
                "echo \"fleet-role-actuator $* config=$FLEET_ROLE_CONFIG token=${{FLEET_ROLE_TOKEN_FILE:-}}\" >> {log}\n\
                 if [ -n \"${{FLEET_ROLE_TOKEN_FILE:-}}\" ]; then exit {preflight}; fi\n\
                 echo 'the host as read'\nexit {status}",
                log = log.display()
            ),
        );
        Host { dir }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    fn install(&self, args: &[&str]) -> Output {
        let path = format!("{}:/usr/bin:/bin", self.path("bin").display());
        Command::new("sh")
            .arg(self.path("bundle/install.sh"))
            .args(args)
            .env("PATH", path)
            .env("FLEET_ROLE_ROOT", self.path("root"))
            .output()
            .expect("sh runs")
    }

    /// The stand-ins' calls since the last look.
    fn calls(&self) -> Vec<String> {
        let text = fs::read_to_string(self.path("calls")).unwrap_or_default();
        let _ = fs::remove_file(self.path("calls"));
        text.lines().map(String::from).collect()
    }

    fn installed(&self) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(self.path("root/etc/fleet-role"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }
}

fn said(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn mode(p: &Path) -> u32 {
    fs::metadata(p).unwrap().permissions().mode() & 0o777
}

#[test]
fn install_sh_checks_the_bundle_with_the_actuator_first_then_installs_enables_and_checks_again_and_a_second_run_changes_nothing()
 {
    let h = Host::new(NODE, 0, 5, 0);
    let out = h.install(&[]);
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    let bundle = h.path("bundle");
    let etc = h.path("root/etc/fleet-role");
    assert_eq!(h.installed(), ["actuator.toml", "ca.crt", "token"]);
    assert_eq!(mode(&etc.join("token")), 0o600);
    assert_eq!(mode(&etc.join("ca.crt")), 0o644);
    assert_eq!(mode(&etc.join("actuator.toml")), 0o640);
    for f in ["actuator.toml", "ca.crt", "token"] {
        assert_eq!(
            fs::read(etc.join(f)).unwrap(),
            fs::read(bundle.join(f)).unwrap()
        );
    }
    assert_eq!(
        h.calls(),
        [
            format!(
                "fleet-role-actuator status config={b}/actuator.toml token={b}/token",
                b = fs::canonicalize(&bundle).unwrap().display()
            ),
            "systemctl enable --quiet fleet-role-actuator.service".into(),
            "systemctl restart fleet-role-actuator.service".into(),
            format!(
                "fleet-role-actuator status config={}/actuator.toml token=",
                etc.display()
            ),
        ]
    );
    assert!(said(&out).contains("the host as read"), "{}", said(&out));

    // Again: nothing written, nothing restarted; the check's exit is its.
    let before = fs::metadata(etc.join("token")).unwrap().modified().unwrap();
    let again = Host { dir: h.dir };
    let out = again.install(&[]);
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    assert!(said(&out).contains("nothing to change"), "{}", said(&out));
    assert!(!again.calls().iter().any(|c| c.contains("restart")));
    assert_eq!(
        fs::metadata(etc.join("token")).unwrap().modified().unwrap(),
        before
    );
}

#[test]
fn install_sh_refuses_and_changes_nothing_when_the_bundle_fails_the_actuators_check() {
    let h = Host::new(NODE, 0, 3, 0);
    let out = h.install(&[]);
    assert_eq!(out.status.code(), Some(1), "{}", said(&out));
    assert!(
        said(&out).contains("refused, nothing changed"),
        "{}",
        said(&out)
    );
    assert!(h.installed().is_empty());
    assert!(!h.calls().iter().any(|c| c.starts_with("systemctl")));
}

#[test]
fn install_sh_refuses_another_host_a_user_not_root_and_an_incomplete_bundle_and_changes_nothing() {
    // Another host: refused; asserting the Node name lets it through.
    let h = Host::new("other-host", 0, 0, 0);
    let out = h.install(&[]);
    assert_eq!(out.status.code(), Some(1), "{}", said(&out));
    assert!(said(&out).contains("this host is other-host and the bundle is for runner-4"));
    let out = h.install(&["--node", "runner-5"]);
    assert_eq!(out.status.code(), Some(1), "{}", said(&out));
    assert!(h.installed().is_empty());
    assert!(h.calls().is_empty());
    let out = h.install(&["--node", NODE]);
    assert_eq!(out.status.code(), Some(0), "{}", said(&out));
    assert_eq!(h.installed().len(), 3);

    let h = Host::new(NODE, 1000, 0, 0);
    let out = h.install(&[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(said(&out).contains("run it as root"), "{}", said(&out));
    assert!(h.installed().is_empty());

    let h = Host::new(NODE, 0, 0, 0);
    fs::remove_file(h.path("bundle/token")).unwrap();
    let out = h.install(&[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        said(&out).contains("token is missing or empty"),
        "{}",
        said(&out)
    );
    assert!(h.installed().is_empty());
    assert!(h.calls().is_empty());
}

/// Runs `cmd` to its end, killed past `bound`.
fn bounded(cmd: &mut Command, bound: Duration) -> Output {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    let started = clock::Clock::system().now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > bound {
            let _ = child.kill();
            panic!("{cmd:?} ran past {bound:?}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    child.wait_with_output().unwrap()
}

/// `ansible-playbook` of the pinned ansible-core (scripts/ansible.sh
/// installs it into the ignored .cache/ once, then prints its path).
fn ansible_playbook() -> PathBuf {
    let out = bounded(
        &mut Command::new(top().join("scripts/ansible.sh")),
        Duration::from_secs(900),
    );
    assert!(
        out.status.success(),
        "scripts/ansible.sh (ansible-core from PyPI into .cache/): {}",
        said(&out)
    );
    PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
}

/// The role's settings tasks and its template, run against localhost with
/// `vars`; the playbook's output, and the file rendered.
fn render_with_role(vars: serde_json::Value) -> (Output, Option<String>) {
    let ansible = ansible_playbook();
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path();
    let rendered = work.join("actuator.toml");
    let roles = fs::canonicalize(top().join("deploy/ansible/roles")).unwrap();
    fs::write(work.join("vars.json"), vars.to_string()).unwrap();
    let play = work.join("play.yml");
    fs::write(
        &play,
        format!(
            "- hosts: all\n  gather_facts: false\n  vars_files: [vars.json]\n  tasks:\n    \
             - ansible.builtin.include_role:\n        name: fleet_role_actuator\n        tasks_from: settings\n        public: true\n    \
             - ansible.builtin.template:\n        src: {}/fleet_role_actuator/templates/actuator.toml.j2\n        dest: {}\n",
            roles.display(),
            rendered.display()
        ),
    )
    .unwrap();
    let out = bounded(
        Command::new(&ansible)
            .current_dir(work)
            .env("HOME", work)
            .env("LC_ALL", "C.UTF-8")
            .env("ANSIBLE_NOCOLOR", "1")
            .env("ANSIBLE_RETRY_FILES_ENABLED", "0")
            .env("ANSIBLE_LOCAL_TEMP", work.join("tmp"))
            .env("ANSIBLE_ROLES_PATH", &roles)
            .args([
                "-i",
                "runner-4,",
                "-c",
                "local",
                "-e",
                "ansible_python_interpreter=/usr/bin/python3",
            ])
            .arg(&play),
        Duration::from_secs(300),
    );
    (out, fs::read_to_string(&rendered).ok())
}

#[test]
fn the_ansible_role_with_a_bundle_or_without_renders_every_table_of_its_settings_as_toml_the_actuator_reads()
 {
    let dir = tempfile::tempdir().unwrap();
    let names = Names {
        prefix: "example.org".into(),
        controller_identity: "ops-controller".into(),
        ..Names::default()
    };
    let b = dir.path().join("runner-4");
    bundle(&b, NODE, &names);
    let (out, text) = render_with_role(serde_json::json!({
        "fleet_role_actuator_bundle": b,
        "fleet_role_actuator_settings": {
            "metrics_address": "127.0.0.1:9465",
            "docker": {"socket": "/run/docker.sock", "server_container": "k3s-server", "agent_container": "k3s-agent", "stop_grace_secs": 30},
        },
    }));
    assert!(out.status.success(), "{}", said(&out));
    let text = text.expect("the rendered file");
    let file: actuator::config::FileConfig = toml::from_str(&text).expect(&text);
    let s = actuator::config::Settings::resolve(file, Default::default()).expect(&text);
    assert_eq!(s.node.as_str(), NODE);
    assert_eq!(s.api, ["https://10.0.0.1:6443", "https://10.0.0.2:6443"]);
    assert_eq!(s.names.prefix, "example.org");
    assert_eq!(s.names.controller_identity, "ops-controller");
    assert_eq!(s.metrics_address, Some("127.0.0.1:9465".parse().unwrap()));
    let docker = s.docker.expect("the [docker] table");
    assert_eq!(docker.socket, Path::new("/run/docker.sock"));
    assert_eq!(docker.stop_grace, Duration::from_secs(30));

    // Without a bundle: the variables alone, a table among the settings.
    let (out, text) = render_with_role(serde_json::json!({
        "fleet_role_actuator_node": NODE,
        "fleet_role_actuator_api": ["https://10.0.0.9:6443"],
        "fleet_role_actuator_token": "t",
        "fleet_role_actuator_settings": {"docker": {"socket": "/var/run/docker.sock"}, "resync_secs": 5},
    }));
    assert!(out.status.success(), "{}", said(&out));
    let text = text.expect("the rendered file");
    let file: actuator::config::FileConfig = toml::from_str(&text).expect(&text);
    let s = actuator::config::Settings::resolve(file, Default::default()).expect(&text);
    assert_eq!(s.api, ["https://10.0.0.9:6443"]);
    assert_eq!(s.names, Names::default());
    assert_eq!(s.resync, Duration::from_secs(5));
    assert!(s.docker.is_some(), "{text}");

    // A bundle for another host is refused before anything is changed.
    let other = dir.path().join("runner-5");
    bundle(&other, "runner-5", &names);
    let (out, text) = render_with_role(serde_json::json!({"fleet_role_actuator_bundle": other}));
    assert!(!out.status.success());
    assert!(
        said(&out).contains("the bundle is for runner-5"),
        "{}",
        said(&out)
    );
    assert!(text.is_none());
}
