//! The role file: which k3s unit may run on this host. Both units'
//! `ExecCondition` reads it (through `fleet-role-actuator is`), so a unit whose
//! role is not named cannot be started, not even by `Restart=always`.

use std::{fs, io::ErrorKind};

use protocol::{InvalidValue, Role};

use crate::{
    HostPaths,
    error::{Error, Result, io},
    fsutil::write_atomic,
};

/// Reads the role file's text: `server` or `agent`, white space around it
/// ignored, anything else refused. The file is root's to write, but
/// `fleet-role-actuator is` reads it from both units' `ExecCondition`, so
/// a file cut short or edited by hand must read as no role, never as one.
pub fn parse(text: &str) -> std::result::Result<Role, InvalidValue> {
    Role::parse(text.trim())
}

/// Reads the role file: `None` when it is missing.
pub fn read(paths: &HostPaths) -> Result<Option<Role>> {
    let path = paths.role_file();
    match fs::read_to_string(&path) {
        Ok(s) => parse(&s).map(Some).map_err(|_| Error::BadRoleFile { path }),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io("reading", path)(e)),
    }
}

/// Names `role` in the role file (atomically) and checks it reads back.
pub fn write(paths: &HostPaths, role: Role) -> Result<()> {
    let path = paths.role_file();
    write_atomic(&path, format!("{role}\n").as_bytes(), 0o644)?;
    match read(paths)? {
        Some(r) if r == role => Ok(()),
        _ => Err(Error::BadRoleFile { path }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_role_file_reads_back_what_was_written_and_rejects_anything_else() {
        let dir = tempfile::tempdir().unwrap();
        let paths = HostPaths::new(dir.path());
        assert_eq!(read(&paths).unwrap(), None);
        write(&paths, Role::Server).unwrap();
        assert_eq!(read(&paths).unwrap(), Some(Role::Server));
        write(&paths, Role::Agent).unwrap();
        assert_eq!(read(&paths).unwrap(), Some(Role::Agent));
        fs::write(paths.role_file(), "voter\n").unwrap();
        assert!(matches!(read(&paths), Err(Error::BadRoleFile { .. })));
        fs::remove_file(paths.role_file()).unwrap();
        fs::create_dir(paths.role_file()).unwrap();
        assert!(read(&paths).is_err(), "an unreadable role file is no role");
    }
}
