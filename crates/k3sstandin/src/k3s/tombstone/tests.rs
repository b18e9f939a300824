use std::time::{Duration, SystemTime};

use super::*;

/// A removed member's datastore under `db`: a WAL, its name and the tombstone.
fn removed_member(db: &Path) -> PathBuf {
    let etcd = db.join("etcd");
    std::fs::create_dir_all(etcd.join("member/wal")).unwrap();
    std::fs::write(etcd.join("name"), "server-1-0a1b2c3d").unwrap();
    write(&etcd.join("tombstone")).unwrap();
    etcd
}

/// An earlier backup, named for and last modified at the unix second `unix`.
fn old_backup(db: &Path, unix: u64) -> PathBuf {
    let dir = db.join(format!("etcd-backup-{unix}"));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::File::open(&dir)
        .unwrap()
        .set_modified(SystemTime::UNIX_EPOCH + Duration::from_secs(unix))
        .unwrap();
    dir
}

fn names(db: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(db)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn a_start_over_a_tombstone_with_a_server_backs_the_datastore_up_as_etcd_backup_unix() {
    let tmp = tempfile::tempdir().unwrap();
    let etcd = removed_member(tmp.path());
    let backup = on_start(&etcd, Some("https://198.18.3.2:6443"), 1_770_000_000)
        .unwrap()
        .unwrap();
    assert_eq!(backup, tmp.path().join("etcd-backup-1770000000"));
    assert!(
        !etcd.exists(),
        "the datastore moved: a new member starts afresh"
    );
    // The name goes with it, so the next member gets a new one.
    assert!(backup.join("name").exists() && backup.join("tombstone").exists());
    assert_eq!(tombstone_mode(&backup.join("tombstone")), 0o600);
}

fn tombstone_mode(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap().permissions().mode() & 0o777
}

#[test]
fn a_start_over_a_tombstone_without_a_server_is_refused_and_moves_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let etcd = removed_member(tmp.path());
    for server in [None, Some("")] {
        let e = on_start(&etcd, server, 1_770_000_000).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("tombstone file has been detected but --server is empty"),
            "{e}"
        );
    }
    assert_eq!(names(tmp.path()), ["etcd"]);
    assert!(etcd.join("tombstone").exists());
}

#[test]
fn a_start_without_a_tombstone_leaves_the_datastore_alone() {
    let tmp = tempfile::tempdir().unwrap();
    let etcd = removed_member(tmp.path());
    std::fs::remove_file(etcd.join("tombstone")).unwrap();
    assert_eq!(on_start(&etcd, None, 1).unwrap(), None);
    assert_eq!(on_start(&tmp.path().join("none"), None, 1).unwrap(), None);
    assert_eq!(names(tmp.path()), ["etcd"]);
}

#[test]
fn a_backup_keeps_the_five_newest_earlier_backups_by_modification_time_then_adds_its_own() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path();
    let etcd = removed_member(db);
    // Seven earlier backups; the names' order is not the times' order for
    // two of them, to show the modification time decides, as in k3s.
    for unix in [1_000, 2_000, 3_000, 4_000, 5_000, 6_000] {
        old_backup(db, unix);
    }
    let renamed = old_backup(db, 7_000);
    std::fs::rename(&renamed, db.join("etcd-backup-500")).unwrap();
    // A file of that prefix, and a directory of another, are not backups.
    std::fs::write(db.join("etcd-backup-1"), "").unwrap();
    std::fs::create_dir(db.join("etcd-old-10")).unwrap();
    backup_with_retention(&etcd, MAX_BACKUP_RETENTION, 9_000).unwrap();
    assert_eq!(
        names(db),
        [
            "etcd-backup-1",
            "etcd-backup-3000",
            "etcd-backup-4000",
            "etcd-backup-500",
            "etcd-backup-5000",
            "etcd-backup-6000",
            "etcd-backup-9000",
            "etcd-old-10",
        ]
    );
}
