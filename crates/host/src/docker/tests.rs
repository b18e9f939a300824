use super::*;

fn container(status: Status, exit_code: i64, started_at: &str) -> Container {
    Container {
        id: "c0ffee".into(),
        name: "k3s-server".into(),
        status,
        pid: 0,
        exit_code,
        restart_count: 0,
        image: "rancher/k3s".into(),
        labels: Default::default(),
        restart: RestartPolicy::No,
        started_at: started_at.into(),
        run: Default::default(),
    }
}

#[test]
fn a_running_or_paused_container_is_an_active_unit_and_a_restarting_one_is_not_stopped() {
    let at = "2026-12-03T14:20:01.5Z";
    assert_eq!(
        state_of(&container(Status::Running, 0, at)).active,
        ActiveState::Active
    );
    assert_eq!(
        state_of(&container(Status::Paused, 0, at)).active,
        ActiveState::Active
    );
    let restarting = state_of(&container(Status::Restarting, 1, at));
    assert_eq!(restarting.active, ActiveState::Activating);
    assert!(!restarting.is_stopped());
    assert!(!state_of(&container(Status::Other("new".into()), 0, at)).is_stopped());
    assert!(!state_of(&container(Status::Removing, 0, at)).is_stopped());
}

#[test]
fn an_exited_container_is_inactive_after_a_clean_exit_and_failed_after_any_other() {
    let at = "2026-12-03T14:20:01Z";
    let clean = state_of(&container(Status::Exited, 0, at));
    assert_eq!(
        (clean.active, clean.result.as_str()),
        (ActiveState::Inactive, "success")
    );
    let failed = state_of(&container(Status::Exited, 137, at));
    assert_eq!(
        (failed.active, failed.result.as_str()),
        (ActiveState::Failed, "exit-code")
    );
    assert!(state_of(&container(Status::Created, 0, "0001-01-01T00:00:00Z")).is_stopped());
    assert!(state_of(&container(Status::Dead, 0, at)).is_stopped());
}

#[test]
fn a_containers_start_time_is_a_stamp_that_changes_with_each_start_and_docker_zero_time_is_none() {
    let first = started_stamp("2026-12-03T14:20:01.000000001Z");
    let second = started_stamp("2026-12-03T14:20:01.000000002Z");
    assert!(first > 0);
    assert_eq!(second, first + 1);
    assert_eq!(started_stamp("0001-01-01T00:00:00Z"), 0);
    assert_eq!(started_stamp("not a time"), 0);
    assert_eq!(
        state_of(&container(
            Status::Running,
            0,
            "2026-12-03T14:20:01.000000002Z"
        ))
        .inactive_exit,
        second
    );
}
