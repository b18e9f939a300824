//! The static token file (`--token-auth-file`) with the plane's admin token.

use std::{
    io::Write,
    os::unix::fs::OpenOptionsExt,
    path::{Path, PathBuf},
};

use secrecy::{ExposeSecret, SecretString};

/// The user name of the admin token.
pub const ADMIN_USER: &str = "testcp-admin";

/// The group of the admin token; `system:masters` bypasses RBAC authorization.
pub const ADMIN_GROUP: &str = "system:masters";

/// A `--token-auth-file` holding one random admin token. The token never
/// appears in argv, logs or `Debug` output.
#[derive(Debug, Clone)]
pub struct TokenAuthFile {
    path: PathBuf,
    admin: SecretString,
}

impl TokenAuthFile {
    /// Writes `tokens.csv` (mode 0600) into `dir` with a fresh random admin
    /// token for user [`ADMIN_USER`] in group [`ADMIN_GROUP`].
    ///
    /// # Errors
    /// If the file cannot be created (it must not exist yet).
    pub fn generate(dir: &Path) -> std::io::Result<Self> {
        let path = dir.join("tokens.csv");
        let admin = crate::pki::random_token();
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)?;
        // token,user,uid,"group1,group2"
        writeln!(
            file,
            "{},{ADMIN_USER},{ADMIN_USER}-uid,\"{ADMIN_GROUP}\"",
            admin.expose_secret()
        )?;
        Ok(Self { path, admin })
    }

    /// The token file another process wrote at `path` (its first line's token
    /// is the admin's).
    ///
    /// # Errors
    /// If the file cannot be read or holds no token.
    pub fn load(path: &Path) -> std::io::Result<Self> {
        let text = std::fs::read_to_string(path)?;
        let token = text
            .lines()
            .next()
            .and_then(|l| l.split(',').next())
            .filter(|t| !t.is_empty())
            .ok_or_else(|| {
                std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    "no token in the token file",
                )
            })?;
        Ok(Self {
            path: path.to_owned(),
            admin: token.to_owned().into(),
        })
    }

    /// The file, for `--token-auth-file`.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The admin token.
    pub fn admin_token(&self) -> &SecretString {
        &self.admin
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_file_names_the_admin_in_system_masters_and_debug_hides_the_token() {
        let dir = tempfile::tempdir().unwrap();
        let tokens = TokenAuthFile::generate(dir.path()).unwrap();
        let token = tokens.admin_token().expose_secret();
        let line = std::fs::read_to_string(tokens.path()).unwrap();
        assert_eq!(
            line,
            format!("{token},testcp-admin,testcp-admin-uid,\"system:masters\"\n")
        );
        assert!(!format!("{tokens:?}").contains(token));
    }
}
