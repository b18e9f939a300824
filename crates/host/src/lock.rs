//! The host lock: one switch at a time, whether the installer or the actuator
//! makes it. It is an advisory `flock` on a file, released when the process
//! exits (even by a crash), so a dead holder never blocks the next switch.

use std::{
    fs::{File, OpenOptions, TryLockError},
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
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(io("creating", dir))?;
        }
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)
            .map_err(io("opening the lock", path))?;
        let clock = budget.clock();
        let start = clock.now();
        loop {
            match file.try_lock() {
                Ok(()) => return Ok(HostLock { _file: file }),
                Err(TryLockError::WouldBlock) if clock.since(start) < timeout => {
                    budget.check("waiting for the host lock")?;
                    thread::sleep(Duration::from_millis(100));
                }
                Err(TryLockError::WouldBlock) => {
                    return Err(Error::LockTimeout {
                        path: path.to_path_buf(),
                        waited: clock.since(start),
                    });
                }
                Err(TryLockError::Error(e)) => return Err(io("locking", path)(e)),
            }
        }
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
}
