//! Unit tests of `switch.rs`: the plans' drop-ins, reloads and observer.
use std::{os::unix::fs::PermissionsExt, sync::Mutex};

use super::*;

/// A host whose `systemctl` (a script, shell built-ins only) shows every
/// unit stopped and disabled, and answers `NeedDaemonReload` with what
/// the returned file holds.
fn host_with_systemctl(dir: &std::path::Path) -> (Host, PathBuf) {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let answer = dir.join("need-reload");
    std::fs::write(&answer, "no\n").unwrap();
    let script = format!(
        "#!/bin/sh\ncase \"$*\" in\n*NeedDaemonReload*) read -r v < \"{}\"; echo \"$v\" ;;\nshow*) echo ActiveState=inactive; echo SubState=dead; echo Result=success ;;\nis-enabled*) exit 1 ;;\nesac\nexit 0\n",
        answer.display()
    );
    let systemctl = bin.join("systemctl");
    std::fs::write(&systemctl, script).unwrap();
    std::fs::set_permissions(&systemctl, std::fs::Permissions::from_mode(0o755)).unwrap();
    let root = dir.join("root");
    std::fs::create_dir_all(&root).unwrap();
    (
        Host::new(&root, "n1", clock::Clock::system()).with_search_path(&bin),
        answer,
    )
}

fn unit_dropin_changes(plan: &[Change]) -> Vec<&Change> {
    plan.iter()
        .filter(|c| match c {
            Change::Write { path, .. } | Change::Remove { path } => {
                path.ends_with(JOIN_UNIT_DROPIN)
            }
            _ => false,
        })
        .collect()
}

#[test]
fn the_server_a_promotion_joined_is_read_from_its_drop_in_until_the_drop_in_goes() {
    let dir = tempfile::tempdir().unwrap();
    let (host, _) = host_with_systemctl(dir.path());
    assert_eq!(host.join_server(), None);
    let join = JoinUrl::parse("https://10.0.0.7:6443").unwrap();
    let plan = host.plan_promote(&join).unwrap();
    let writes: Vec<Change> = plan
        .iter()
        .filter(|c| matches!(c, Change::Write { .. }))
        .cloned()
        .collect();
    host.apply(&writes).unwrap();
    assert_eq!(host.join_server(), Some(join));
    std::fs::write(
        host.paths.k3s_dropins().join(JOIN_DROPIN),
        "server: not-a-url\n",
    )
    .unwrap();
    assert_eq!(host.join_server(), None);
}

#[test]
fn a_promotion_resumed_after_a_crash_between_its_unit_dropin_and_the_reload_still_reloads_systemd()
{
    let dir = tempfile::tempdir().unwrap();
    let (host, answer) = host_with_systemctl(dir.path());
    let join = JoinUrl::parse("https://10.0.0.1:6443").unwrap();
    let plan = host.plan_promote(&join).unwrap();
    let write = unit_dropin_changes(&plan);
    assert_eq!(write.len(), 1, "{plan:?}");
    assert!(plan.contains(&Change::DaemonReload));
    // The drop-in written, then the crash: systemd has not loaded it.
    host.apply(&[write[0].clone()]).unwrap();
    std::fs::write(&answer, "yes\n").unwrap();
    let resumed = host.plan_promote(&join).unwrap();
    assert!(unit_dropin_changes(&resumed).is_empty(), "{resumed:?}");
    assert!(resumed.contains(&Change::DaemonReload), "{resumed:?}");
    // Once systemd has it, no reload is planned again.
    std::fs::write(&answer, "no\n").unwrap();
    assert!(
        !host
            .plan_promote(&join)
            .unwrap()
            .contains(&Change::DaemonReload)
    );
}

#[test]
fn a_demotion_resumed_after_a_crash_between_its_unit_dropin_removal_and_the_reload_still_reloads_systemd()
 {
    let dir = tempfile::tempdir().unwrap();
    let (host, answer) = host_with_systemctl(dir.path());
    let dropin = host.paths.unit_dropins(SERVER).join(JOIN_UNIT_DROPIN);
    write_atomic(&dropin, b"[Service]\n", 0o644).unwrap();
    let plan = host.plan_demote().unwrap();
    let remove = unit_dropin_changes(&plan);
    assert_eq!(remove.len(), 1, "{plan:?}");
    assert!(plan.contains(&Change::DaemonReload));
    host.apply(&[remove[0].clone()]).unwrap();
    std::fs::write(&answer, "yes\n").unwrap();
    let resumed = host.plan_demote().unwrap();
    assert!(unit_dropin_changes(&resumed).is_empty(), "{resumed:?}");
    assert!(resumed.contains(&Change::DaemonReload), "{resumed:?}");
    std::fs::write(&answer, "no\n").unwrap();
    assert!(!host.plan_demote().unwrap().contains(&Change::DaemonReload));
}

#[test]
fn apply_calls_the_observer_after_each_change_it_applied_and_not_after_one_that_failed() {
    let dir = tempfile::tempdir().unwrap();
    let seen = Arc::new(Mutex::new(Vec::<String>::new()));
    let host = Host::new(dir.path(), "n1", clock::Clock::system()).with_after_change({
        let seen = seen.clone();
        move |host: &Host, c: &Change| {
            // The change is already made when the observer is told.
            if let Change::Write { path, .. } = c {
                assert!(path.exists());
            }
            seen.lock().unwrap().push(host.show(c).to_string());
        }
    });
    let file = dir.path().join("etc/a.conf");
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    // A file where a directory should be: the write under it fails.
    let blocked = file.join("b.conf");
    let plan = [
        Change::Write {
            path: file.clone(),
            contents: "a\n".into(),
        },
        Change::Role(Role::Agent),
        Change::Write {
            path: blocked,
            contents: "b\n".into(),
        },
        Change::Remove { path: file },
    ];
    assert!(host.apply(&plan).is_err());
    assert_eq!(
        *seen.lock().unwrap(),
        [
            "write /etc/a.conf".to_string(),
            "name agent in /var/lib/rancher/k3s/fleet-role".to_string()
        ]
    );
}

#[test]
fn a_step_down_that_must_name_another_voter_writes_both_join_drop_ins_before_the_etcd_only_level() {
    let dir = tempfile::tempdir().unwrap();
    let (host, _) = host_with_systemctl(dir.path());
    let join = JoinUrl::parse("https://10.0.0.2:6443").unwrap();
    let plan = host.plan_step_down(Some(&join)).unwrap();
    let at = |end: &str| {
        plan.iter()
            .position(|c| matches!(c, Change::Write { path, .. } if path.ends_with(end)))
            .unwrap_or_else(|| panic!("no write of {end} in {plan:?}"))
    };
    let (config, unit, etcd_only) = (at(JOIN_DROPIN), at(JOIN_UNIT_DROPIN), at(ETCD_ONLY_DROPIN));
    assert!(config < etcd_only && unit < etcd_only, "{plan:?}");
    let reload = plan
        .iter()
        .position(|c| *c == Change::DaemonReload)
        .unwrap();
    assert!(unit < reload && reload < etcd_only, "{plan:?}");
    // With nothing to name, the step-down writes no join drop-in.
    let plain = host.plan_step_down(None).unwrap();
    assert!(
        !plain
            .iter()
            .any(|c| matches!(c, Change::Write { path, .. } if path.ends_with(JOIN_DROPIN)))
    );
}

#[test]
fn a_step_down_is_refused_with_nothing_changed_when_a_later_drop_in_sets_server() {
    let dir = tempfile::tempdir().unwrap();
    let (host, _) = host_with_systemctl(dir.path());
    std::fs::create_dir_all(host.paths.k3s_dropins()).unwrap();
    let later = host.paths.k3s_dropins().join("99-site.yaml");
    std::fs::write(&later, "server: https://10.0.0.9:6443\n").unwrap();
    let join = JoinUrl::parse("https://10.0.0.2:6443").unwrap();
    let err = host.plan_step_down(Some(&join)).unwrap_err();
    assert!(
        matches!(&err, Error::K3sConfig { path, .. } if *path == later),
        "{err}"
    );
    assert!(err.to_string().contains("was not begun"), "{err}");
    // Only what the test wrote is there.
    let files: Vec<_> = std::fs::read_dir(host.paths.k3s_dropins())
        .unwrap()
        .collect();
    assert_eq!(files.len(), 1);
}

#[test]
fn a_step_down_is_refused_with_nothing_changed_when_a_later_drop_in_sets_an_etcd_only_key() {
    let dir = tempfile::tempdir().unwrap();
    let (host, _) = host_with_systemctl(dir.path());
    std::fs::create_dir_all(host.paths.k3s_dropins()).unwrap();
    let level = host.paths.k3s_dropins().join("99-level.yaml");
    std::fs::write(&level, "disable-agent: false\n").unwrap();
    let err = host.plan_step_down(None).unwrap_err();
    assert!(
        matches!(&err, Error::K3sConfig { path, .. } if *path == level),
        "{err}"
    );
    assert!(err.to_string().contains("sets disable-agent"), "{err}");
}
