//! The planted defects the actuator can carry, a testing aid in the same
//! build as the failpoint (never the packaged one): while the file
//! `/var/lib/rancher/k3s/fleet-role.plant` names a defect of
//! [`plants::Plant`] that is the actuator's ([`Plant::in_the_actuator`]),
//! this actuator carries it
//! (docs/testing.md, "Planted defects").
//!
//! A name that is no defect of the actuator's plants nothing and says so
//! in the log.

use std::{fs, path::PathBuf};

use host::HostPaths;
use plants::Plant;
use tracing::warn;

/// The plant file on this host.
pub fn file(paths: &HostPaths) -> PathBuf {
    paths.at("var/lib/rancher/k3s/fleet-role.plant")
}

/// The defect the host's plant file names now (read at each step, so a
/// test plants it on a running host).
pub fn planted(paths: &HostPaths) -> Option<Plant> {
    let text = fs::read_to_string(file(paths)).ok()?;
    let plant = Plant::parse(&text).filter(|p| p.in_the_actuator());
    match plant {
        Some(p) => warn!("planted defect {} active (a testing aid)", p.name()),
        None => warn!(
            text = text.trim(),
            "the plant file names no defect the actuator carries; none planted"
        ),
    }
    plant
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plant_is_read_from_its_file_by_name_and_only_the_actuators_own_plant() {
        let dir = tempfile::tempdir().unwrap();
        let paths = HostPaths::new(dir.path());
        assert_eq!(planted(&paths), None);
        fs::create_dir_all(file(&paths).parent().unwrap()).unwrap();
        fs::write(file(&paths), "finish-at-step-down\n").unwrap();
        assert_eq!(planted(&paths), Some(Plant::FinishAtStepDown));
        // A decision's defect is not the actuator's to carry.
        fs::write(file(&paths), "skip-lease-names-host").unwrap();
        assert_eq!(planted(&paths), None);
        fs::write(file(&paths), "skip-every-gate").unwrap();
        assert_eq!(planted(&paths), None);
    }
}
