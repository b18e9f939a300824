//! The host lock: one switch at a time, whether the installer or the actuator
//! makes it. It is an advisory `flock` on a file, released when the process
//! exits (even by a crash), so a dead holder never blocks the next switch.
//!
//! `flock` needs no write access: any local user who can open the file
//! (one a root shell made 0644) could hold it and block every switch. The
//! file is made readable by its owner alone, and tightened so by every
//! switch that takes it.

use std::{
    fs::{File, OpenOptions, Permissions, TryLockError},
    os::unix::fs::{OpenOptionsExt, PermissionsExt},
    path::Path,
    thread,
    time::Duration,
};

use clock::Clock;

use crate::{
    budget::Budget,
    error::{Error, Result, io},
};

/// A held host lock; dropping it releases the lock.
#[derive(Debug)]
#[must_use = "the lock is released when this is dropped"]
pub struct HostLock {
    _file: File,
}

impl HostLock {
    /// Takes the lock at `path`, waiting up to `timeout` on `clock` for
    /// another holder.
    pub fn acquire(path: &Path, timeout: Duration, clock: &Clock) -> Result<HostLock> {
        HostLock::acquire_within(path, timeout, &Budget::unbounded(clock))
    }

    /// Takes the lock like [`HostLock::acquire`], giving up when `budget` is
    /// cancelled or spent: a cancelled step must not keep waiting for it.
    pub fn acquire_within(path: &Path, timeout: Duration, budget: &Budget) -> Result<HostLock> {
        let (file, start) = (open(path)?, budget.clock().now());
        while !attempt(&file, path, budget.clock().since(start), timeout, budget)? {
            thread::sleep(RETRY);
        }
        Ok(HostLock { _file: file })
    }

    /// Takes the lock like [`HostLock::acquire_within`], waiting on the
    /// runtime's timer rather than this thread: what an async caller (the
    /// actuator's step, on the watcher's task) uses.
    pub async fn acquire_within_async(
        path: &Path,
        timeout: Duration,
        budget: &Budget,
    ) -> Result<HostLock> {
        let (file, start) = (open(path)?, budget.clock().now());
        while !attempt(&file, path, budget.clock().since(start), timeout, budget)? {
            tokio::time::sleep(RETRY).await;
        }
        Ok(HostLock { _file: file })
    }
}

/// One try of the lock after `waited`: whether it was taken; an error once
/// the wait is over `timeout` or `budget` is spent or cancelled.
fn attempt(
    file: &File,
    path: &Path,
    waited: Duration,
    timeout: Duration,
    budget: &Budget,
) -> Result<bool> {
    if take(file, path, waited, timeout)? {
        return Ok(true);
    }
    budget.check("waiting for the host lock")?;
    Ok(false)
}

/// How often a wait for the lock tries it again.
const RETRY: Duration = Duration::from_millis(100);

/// The lock file, made (and its folder) if need be.
fn open(path: &Path) -> Result<File> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(io("creating", dir))?;
    }
    OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .open(path)
        .map_err(io("opening the lock", path))
}

/// One try for the lock on `file`, `waited` into a wait of `timeout`:
/// held, not yet (`false`: try again), or an error once `timeout` passed.
fn take(file: &File, path: &Path, waited: Duration, timeout: Duration) -> Result<bool> {
    match file.try_lock() {
        Ok(()) => {
            // Tightened once held, so a switch refused for the lock changes
            // nothing on the host.
            file.set_permissions(Permissions::from_mode(0o600))
                .map_err(io("making the lock its owner's alone", path))?;
            Ok(true)
        }
        Err(TryLockError::WouldBlock) if waited < timeout => Ok(false),
        Err(TryLockError::WouldBlock) => Err(Error::LockTimeout {
            path: path.to_path_buf(),
            waited,
        }),
        Err(TryLockError::Error(e)) => Err(io("locking", path)(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_holder_waits_then_fails_naming_the_lock() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x/fleet-role.lock");
        let clock = Clock::system();
        let held = HostLock::acquire(&path, Duration::ZERO, &clock).unwrap();
        let err = HostLock::acquire(&path, Duration::from_millis(250), &clock).unwrap_err();
        assert!(err.to_string().contains("fleet-role.lock"), "{err}");
        drop(held);
        let _again = HostLock::acquire(&path, Duration::ZERO, &clock).unwrap();
    }

    #[test]
    fn an_async_wait_for_a_held_lock_fails_naming_it_and_a_cancelled_one_stops() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("fleet-role.lock");
        let clock = Clock::system();
        let held = HostLock::acquire(&path, Duration::ZERO, &clock).unwrap();
        let budget = Budget::unbounded(&clock);
        let wait = |b: &Budget, t| {
            rt.block_on(HostLock::acquire_within_async(&path, t, b))
                .unwrap_err()
        };
        let err = wait(&budget, Duration::from_millis(250));
        assert!(matches!(err, Error::LockTimeout { .. }), "{err}");
        budget.cancel();
        let err = wait(&budget, Duration::from_secs(3600));
        assert!(matches!(err, Error::Cancelled { .. }), "{err}");
        drop(held);
        let _again = rt
            .block_on(HostLock::acquire_within_async(
                &path,
                Duration::ZERO,
                &Budget::unbounded(&clock),
            ))
            .unwrap();
    }

    #[test]
    fn the_lock_file_is_made_and_kept_readable_by_its_owner_alone() {
        let dir = tempfile::tempdir().unwrap();
        let clock = Clock::system();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        let made = dir.path().join("made.lock");
        drop(HostLock::acquire(&made, Duration::ZERO, &clock).unwrap());
        assert_eq!(mode(&made), 0o600);
        // One a root shell made world-readable (`flock` needs no more).
        let shell = dir.path().join("shell.lock");
        std::fs::write(&shell, "").unwrap();
        std::fs::set_permissions(&shell, Permissions::from_mode(0o644)).unwrap();
        drop(HostLock::acquire(&shell, Duration::ZERO, &clock).unwrap());
        assert_eq!(mode(&shell), 0o600);
    }
}
