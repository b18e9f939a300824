//! Planted defects, a testing aid in the same build as the failpoint
//! (never the packaged one): while the file
//! `/var/lib/rancher/k3s/fleet-role.plant` names a defect, this actuator
//! carries it. The chaos campaign must turn each into a violation; a
//! campaign that stays clean over one has a blind spot (docs/testing.md,
//! "Planted defects").
//!
//! An unknown name in the file plants nothing and says so in the log.

use std::{fs, path::PathBuf};

use host::HostPaths;
use tracing::warn;

/// A defect this build can carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plant {
    /// `finish-at-step-down`: the step-down applies the finish's plan, so
    /// the server stops and its datastore moves aside while its member can
    /// still vote (the controller removes the member only after the
    /// step-down).
    FinishAtStepDown,
}

impl Plant {
    /// Every defect this build can carry.
    pub const ALL: [Plant; 1] = [Plant::FinishAtStepDown];

    /// Its name in the plant file.
    pub fn name(self) -> &'static str {
        match self {
            Plant::FinishAtStepDown => "finish-at-step-down",
        }
    }

    /// The plant a name stands for.
    pub fn parse(name: &str) -> Option<Plant> {
        Plant::ALL.into_iter().find(|p| p.name() == name.trim())
    }
}

/// The plant file on this host.
pub fn file(paths: &HostPaths) -> PathBuf {
    paths.at("var/lib/rancher/k3s/fleet-role.plant")
}

/// The defect the host's plant file names now (read at each step, so a
/// test plants it on a running host).
pub fn planted(paths: &HostPaths) -> Option<Plant> {
    let text = fs::read_to_string(file(paths)).ok()?;
    let plant = Plant::parse(&text);
    match plant {
        Some(p) => warn!("planted defect {} active (a testing aid)", p.name()),
        None => warn!(
            text = text.trim(),
            "the plant file names no known defect; none planted"
        ),
    }
    plant
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plant_is_read_from_its_file_by_name_and_nothing_else_plants() {
        let dir = tempfile::tempdir().unwrap();
        let paths = HostPaths::new(dir.path());
        assert_eq!(planted(&paths), None);
        fs::create_dir_all(file(&paths).parent().unwrap()).unwrap();
        fs::write(file(&paths), "finish-at-step-down\n").unwrap();
        assert_eq!(planted(&paths), Some(Plant::FinishAtStepDown));
        fs::write(file(&paths), "skip-every-gate").unwrap();
        assert_eq!(planted(&paths), None);
    }
}
