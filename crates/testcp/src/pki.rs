//! Certificates and keys for one plane.
//!
//! One CA signs one serving certificate that every kube-apiserver of the plane
//! presents, so a client holding the one CA file can fail over between their
//! URLs. The service-account key is shared too, so a token minted through one
//! API server is accepted by the others.

use std::{
    fs,
    io::Write,
    net::{IpAddr, Ipv4Addr},
    os::unix::fs::OpenOptionsExt,
    path::{Path, PathBuf},
};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType,
};
use rsa::pkcs8::{EncodePrivateKey, LineEnding};
use secrecy::SecretString;

/// Errors generating or writing the PKI.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A serving address outside the loopback range: the plane only serves on loopback.
    #[error("{0} is not a loopback address; a test plane serves on 127.0.0.0/8 (or ::1) only")]
    NotLoopback(IpAddr),
    /// rcgen failed to make a key or certificate.
    #[error("generating a certificate: {0}")]
    Certificate(#[from] rcgen::Error),
    /// The RSA service-account key could not be generated.
    #[error("generating the RSA service-account key: {0}")]
    Rsa(#[from] rsa::Error),
    /// The RSA service-account key could not be encoded as PKCS#8 PEM.
    #[error("encoding the RSA service-account key: {0}")]
    RsaEncoding(#[from] rsa::pkcs8::Error),
    /// Writing a file failed.
    #[error("writing {path}: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

/// The CA, the serving certificate and the service-account key of one plane,
/// written as PEM files into a folder the caller owns (usually the plane's temp dir).
#[derive(Debug, Clone)]
pub struct Pki {
    dir: PathBuf,
    ca_der: Vec<u8>,
    ips: Vec<IpAddr>,
}

impl Pki {
    /// Generates a CA; a serving certificate for `localhost`, `127.0.0.1` and
    /// every address in `ips`; and a 2048-bit RSA service-account signing key.
    /// Files go into `dir` (created if missing), private keys with mode 0600.
    ///
    /// # Errors
    /// [`Error::NotLoopback`] for an address outside loopback, or a generation or write error.
    pub fn generate(dir: &Path, ips: &[IpAddr]) -> Result<Self, Error> {
        let mut all_ips = vec![IpAddr::V4(Ipv4Addr::LOCALHOST)];
        for &ip in ips {
            if !ip.is_loopback() {
                return Err(Error::NotLoopback(ip));
            }
            if !all_ips.contains(&ip) {
                all_ips.push(ip);
            }
        }
        fs::create_dir_all(dir).map_err(|source| Error::Write {
            path: dir.to_owned(),
            source,
        })?;
        let pki = Self {
            dir: dir.to_owned(),
            ca_der: Vec::new(),
            ips: all_ips,
        };

        // ECDSA P-256 keys: ring generates them instantly, rustls and Go both accept them.
        let ca_key = KeyPair::generate()?;
        let mut ca_params = CertificateParams::default();
        ca_params
            .distinguished_name
            .push(DnType::CommonName, "testcp CA");
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca_cert = ca_params.self_signed(&ca_key)?;
        let ca = Issuer::new(ca_params, ca_key);

        let serving_key = KeyPair::generate()?;
        let mut serving_params = CertificateParams::new(vec!["localhost".to_owned()])?;
        serving_params
            .distinguished_name
            .push(DnType::CommonName, "kube-apiserver");
        serving_params
            .subject_alt_names
            .extend(pki.ips.iter().map(|&ip| SanType::IpAddress(ip)));
        serving_params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        serving_params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let serving_cert = serving_params.signed_by(&serving_key, &ca)?;

        // kube-apiserver signs service-account tokens with this key (RS256); ring
        // cannot generate RSA keys, so the RustCrypto `rsa` crate does.
        let sa_key = rsa::PrivateKey::new(&mut getrandom::SysRng, 2048)?;
        let sa_pem = sa_key.to_pkcs8_pem(LineEnding::LF)?;

        write(&pki.ca_file(), ca_cert.pem().as_bytes(), 0o644)?;
        write(
            &pki.serving_cert_file(),
            serving_cert.pem().as_bytes(),
            0o644,
        )?;
        write(
            &pki.serving_key_file(),
            serving_key.serialize_pem().as_bytes(),
            0o600,
        )?;
        write(&pki.service_account_key_file(), sa_pem.as_bytes(), 0o600)?;
        Ok(Self {
            ca_der: ca_cert.der().to_vec(),
            ..pki
        })
    }

    /// The PKI another process generated into `dir` for `ips` (a lab's k3s
    /// stand-ins share the lab's one PKI). Clients made from it read the CA
    /// from its file.
    pub fn load(dir: &Path, ips: &[IpAddr]) -> Self {
        Self {
            dir: dir.to_owned(),
            ca_der: Vec::new(),
            ips: ips.to_vec(),
        }
    }

    /// The folder holding the files.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The CA certificate (PEM) that verifies every API server of the plane.
    pub fn ca_file(&self) -> PathBuf {
        self.dir.join("ca.crt")
    }

    /// The CA certificate, DER-encoded, as `kube::Config::root_cert` wants it.
    pub fn ca_der(&self) -> &[u8] {
        &self.ca_der
    }

    /// The serving certificate (PEM) for `--tls-cert-file`.
    pub fn serving_cert_file(&self) -> PathBuf {
        self.dir.join("apiserver.crt")
    }

    /// The serving key (PEM) for `--tls-private-key-file`.
    pub fn serving_key_file(&self) -> PathBuf {
        self.dir.join("apiserver.key")
    }

    /// The RSA service-account key (PKCS#8 PEM), for both
    /// `--service-account-key-file` and `--service-account-signing-key-file`.
    pub fn service_account_key_file(&self) -> PathBuf {
        self.dir.join("sa.key")
    }

    /// The IP addresses the serving certificate is valid for (`127.0.0.1` first).
    pub fn ips(&self) -> &[IpAddr] {
        &self.ips
    }

    /// A client configuration for `url` that trusts this CA and, with a token,
    /// authenticates as its bearer (anonymous without one).
    ///
    /// # Panics
    /// If `url` is not a valid URI; URLs come from [`crate::ApiServer::url`].
    pub fn client_config(&self, url: &str, token: Option<&SecretString>) -> kube::Config {
        let mut config = kube::Config::new(url.parse().expect("an API server URL is a valid URI"));
        if self.ca_der.is_empty() {
            config.root_cert_file = Some(self.ca_file());
        } else {
            config.root_cert = Some(vec![self.ca_der.clone()]);
        }
        config.auth_info.token = token.cloned();
        config
    }
}

/// Writes `contents` to a new file with `mode`.
fn write(path: &Path, contents: &[u8], mode: u32) -> Result<(), Error> {
    fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)
        .and_then(|mut file| file.write_all(contents))
        .map_err(|source| Error::Write {
            path: path.to_owned(),
            source,
        })
}

/// A fresh random token: 32 bytes from the OS as 64 hex digits.
///
/// # Panics
/// If the OS has no randomness to give, which no test can recover from.
pub fn random_token() -> SecretString {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).expect("the OS random source works");
    bytes
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<String>()
        .into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use secrecy::ExposeSecret;

    #[test]
    fn an_address_outside_loopback_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let err = Pki::generate(dir.path(), &["10.0.0.1".parse().unwrap()]).unwrap_err();
        assert!(matches!(err, Error::NotLoopback(_)), "{err}");
    }

    #[test]
    fn the_files_are_written_and_private_keys_are_private() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let pki = Pki::generate(
            dir.path(),
            &["127.0.1.2".parse().unwrap(), "127.0.0.1".parse().unwrap()],
        )
        .unwrap();
        assert_eq!(
            pki.ips(),
            [
                "127.0.0.1".parse::<IpAddr>().unwrap(),
                "127.0.1.2".parse().unwrap()
            ]
        );
        let sa = fs::read_to_string(pki.service_account_key_file()).unwrap();
        assert!(sa.starts_with("-----BEGIN PRIVATE KEY-----"), "PKCS#8 PEM");
        for key in [pki.serving_key_file(), pki.service_account_key_file()] {
            assert_eq!(
                fs::metadata(&key).unwrap().permissions().mode() & 0o777,
                0o600,
                "{}",
                key.display()
            );
        }
        assert!(
            fs::read_to_string(pki.ca_file())
                .unwrap()
                .starts_with("-----BEGIN CERTIFICATE-----")
        );
        assert!(!pki.ca_der().is_empty());
    }

    #[test]
    fn tokens_are_random_and_long() {
        let (a, b) = (random_token(), random_token());
        assert_eq!(a.expose_secret().len(), 64);
        assert_ne!(a.expose_secret(), b.expose_secret());
    }
}
