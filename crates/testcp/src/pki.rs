//! Certificates and keys for one plane, and the CA and leaf certificates
//! they are made of.
//!
//! One CA signs one serving certificate that every kube-apiserver of the plane
//! presents, so a client holding the one CA file can fail over between their
//! URLs. The service-account key is shared too, so a token minted through one
//! API server is accepted by the others.
//!
//! Which addresses a certificate may name is an [`AddressPolicy`]: a test
//! plane serves on loopback only; a lab on real systemd also on its hosts'
//! namespaced addresses (`198.18.K.N`), which stay on this machine too. The
//! lab makes its PKI here ([`Pki::generate_for`]) and k3s's etcd
//! certificates of its hosts from [`Ca`].

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

/// Which addresses a certificate may name: certificates for addresses
/// outside this machine are never made, so no test traffic leaves it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddressPolicy {
    /// Loopback only (`127.0.0.0/8`, `::1`): a test plane's.
    Loopback,
    /// Loopback and `198.18.0.0/15` (RFC 2544's benchmarking range, which
    /// is never routed): a lab's hosts each have a network namespace there.
    LoopbackAndLab,
}

impl AddressPolicy {
    /// Whether a certificate may name `ip`.
    pub fn admits(self, ip: IpAddr) -> bool {
        let lab = |v: Ipv4Addr| v.octets()[0] == 198 && v.octets()[1] & 0xfe == 18;
        match (self, ip) {
            (_, ip) if ip.is_loopback() => true,
            (AddressPolicy::LoopbackAndLab, IpAddr::V4(v)) => lab(v),
            _ => false,
        }
    }
}

impl std::fmt::Display for AddressPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            AddressPolicy::Loopback => "a test plane serves on 127.0.0.0/8 (or ::1) only",
            AddressPolicy::LoopbackAndLab => {
                "a lab serves on loopback and its hosts' 198.18.0.0/15 only"
            }
        })
    }
}

/// Errors generating or writing the PKI.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An address the policy does not admit.
    #[error("{ip} may not be named in a certificate: {policy}")]
    NotAdmitted {
        /// The address.
        ip: IpAddr,
        /// The policy that refuses it.
        policy: AddressPolicy,
    },
    /// rcgen failed to make a key or certificate.
    #[error("generating a certificate: {0}")]
    Certificate(#[from] rcgen::Error),
    /// The RSA service-account key could not be generated.
    #[error("generating the RSA service-account key: {0}")]
    Rsa(#[from] rsa::Error),
    /// The RSA service-account key could not be encoded as PKCS#8 PEM.
    #[error("encoding the RSA service-account key: {0}")]
    RsaEncoding(#[from] rsa::pkcs8::Error),
    /// A certificate that is not PEM.
    #[error("reading a PEM certificate: {0}")]
    Pem(String),
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
    /// [`Error::NotAdmitted`] for an address outside loopback, or a generation or write error.
    pub fn generate(dir: &Path, ips: &[IpAddr]) -> Result<Self, Error> {
        Self::generate_for(dir, ips, AddressPolicy::Loopback, "testcp CA")
    }

    /// [`Pki::generate`] for the addresses `policy` admits, the CA named
    /// `ca_name`.
    ///
    /// # Errors
    /// [`Error::NotAdmitted`] for an address `policy` refuses, or a
    /// generation or write error.
    pub fn generate_for(
        dir: &Path,
        ips: &[IpAddr],
        policy: AddressPolicy,
        ca_name: &str,
    ) -> Result<Self, Error> {
        let mut all_ips = vec![IpAddr::V4(Ipv4Addr::LOCALHOST)];
        for &ip in ips {
            if !policy.admits(ip) {
                return Err(Error::NotAdmitted { ip, policy });
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

        let ca = Ca::new(ca_name)?;
        let (serving_cert, serving_key) =
            ca.sign("kube-apiserver", &pki.ips, Usage::Serving, policy)?;

        // kube-apiserver signs service-account tokens with this key (RS256); ring
        // cannot generate RSA keys, so the RustCrypto `rsa` crate does.
        let sa_key = rsa::PrivateKey::new(&mut getrandom::SysRng, 2048)?;
        let sa_pem = sa_key.to_pkcs8_pem(LineEnding::LF)?;

        write(&pki.ca_file(), ca.pem().as_bytes(), 0o644)?;
        write(&pki.serving_cert_file(), serving_cert.as_bytes(), 0o644)?;
        write(&pki.serving_key_file(), serving_key.as_bytes(), 0o600)?;
        write(&pki.service_account_key_file(), sa_pem.as_bytes(), 0o600)?;
        Ok(Self {
            ca_der: ca.der().to_vec(),
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

/// What a leaf certificate is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Usage {
    /// A server's, for `localhost` and its addresses (server auth only).
    Serving,
    /// A client's (client auth only; no address).
    Client,
    /// Both, for `localhost` and its addresses: etcd's members present one
    /// certificate as server and as client (k3s's `server-client`,
    /// `peer-server-client`).
    ServingAndClient,
}

/// A certificate authority kept in memory (its key is written only where
/// a caller writes [`Ca::key_pem`], as k3s keeps its etcd CAs' keys on
/// every server).
pub struct Ca {
    pem: String,
    der: Vec<u8>,
    issuer: Issuer<'static, KeyPair>,
}

impl std::fmt::Debug for Ca {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ca").finish_non_exhaustive()
    }
}

impl Ca {
    /// A fresh self-signed CA named `name`.
    ///
    /// # Errors
    /// A generation error.
    pub fn new(name: &str) -> Result<Self, Error> {
        // ECDSA P-256 keys: ring generates them instantly, rustls and Go both accept them.
        let key = KeyPair::generate()?;
        let params = Self::params(name);
        let cert = params.self_signed(&key)?;
        Ok(Self {
            pem: cert.pem(),
            der: cert.der().to_vec(),
            issuer: Issuer::new(params, key),
        })
    }

    /// The CA `name` made earlier by [`Ca::new`], from its certificate and
    /// key (both PEM): what it signs chains to that certificate.
    ///
    /// # Errors
    /// A certificate or key that does not parse.
    pub fn from_pem(name: &str, cert_pem: &str, key_pem: &str) -> Result<Self, Error> {
        let key = KeyPair::from_pem(key_pem)?;
        let der = {
            use rustls_pki_types::{CertificateDer, pem::PemObject};
            CertificateDer::from_pem_slice(cert_pem.as_bytes())
                .map_err(|e| Error::Pem(e.to_string()))?
                .to_vec()
        };
        Ok(Self {
            pem: cert_pem.to_owned(),
            der,
            issuer: Issuer::new(Self::params(name), key),
        })
    }

    fn params(name: &str) -> CertificateParams {
        let mut params = CertificateParams::default();
        params.distinguished_name.push(DnType::CommonName, name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        params
    }

    /// The CA's private key, PEM.
    pub fn key_pem(&self) -> String {
        self.issuer.key().serialize_pem()
    }

    /// The CA certificate, PEM.
    pub fn pem(&self) -> &str {
        &self.pem
    }

    /// The CA certificate, DER.
    pub fn der(&self) -> &[u8] {
        &self.der
    }

    /// A leaf certificate and its key (both PEM) named `cn`, signed by this
    /// CA, for `usage`; one that serves names `localhost` and `ips`, each
    /// admitted by `policy`.
    ///
    /// # Errors
    /// [`Error::NotAdmitted`] for an address `policy` refuses, or a
    /// generation error.
    pub fn sign(
        &self,
        cn: &str,
        ips: &[IpAddr],
        usage: Usage,
        policy: AddressPolicy,
    ) -> Result<(String, String), Error> {
        if let Some(&ip) = ips.iter().find(|&&ip| !policy.admits(ip)) {
            return Err(Error::NotAdmitted { ip, policy });
        }
        let serves = usage != Usage::Client;
        let key = KeyPair::generate()?;
        let mut p = if serves {
            CertificateParams::new(vec!["localhost".to_owned()])?
        } else {
            CertificateParams::default()
        };
        p.distinguished_name.push(DnType::CommonName, cn);
        if serves {
            p.subject_alt_names
                .extend(ips.iter().map(|&ip| SanType::IpAddress(ip)));
        }
        p.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        p.extended_key_usages = match usage {
            Usage::Serving => vec![ExtendedKeyUsagePurpose::ServerAuth],
            Usage::Client => vec![ExtendedKeyUsagePurpose::ClientAuth],
            Usage::ServingAndClient => vec![
                ExtendedKeyUsagePurpose::ClientAuth,
                ExtendedKeyUsagePurpose::ServerAuth,
            ],
        };
        let cert = p.signed_by(&key, &self.issuer)?;
        Ok((cert.pem(), key.serialize_pem()))
    }
}

/// Writes `contents` to a new file with `mode` (it must not exist: a PKI
/// is made once, never over another's files).
///
/// # Errors
/// [`Error::Write`] naming the file.
pub fn write(path: &Path, contents: &[u8], mode: u32) -> Result<(), Error> {
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
        assert!(matches!(err, Error::NotAdmitted { .. }), "{err}");
        let lab = "198.18.7.1".parse().unwrap();
        assert!(Pki::generate(dir.path(), &[lab]).is_err());
    }

    #[test]
    fn a_lab_admits_loopback_and_its_hosts_range_and_nothing_else() {
        let lab = AddressPolicy::LoopbackAndLab;
        for ok in [
            "127.0.0.1",
            "127.77.3.4",
            "198.18.7.1",
            "198.19.255.254",
            "::1",
        ] {
            assert!(lab.admits(ok.parse().unwrap()), "{ok}");
        }
        for no in [
            "10.0.0.1",
            "198.17.0.1",
            "198.20.0.1",
            "192.168.1.1",
            "fe80::1",
        ] {
            assert!(!lab.admits(no.parse().unwrap()), "{no}");
        }
        assert!(!AddressPolicy::Loopback.admits("198.18.7.1".parse().unwrap()));
        let dir = tempfile::tempdir().unwrap();
        let pki =
            Pki::generate_for(dir.path(), &["198.18.7.1".parse().unwrap()], lab, "lab CA").unwrap();
        assert!(pki.ips().contains(&"198.18.7.1".parse().unwrap()));
        let ca = Ca::new("x").unwrap();
        let far = ["10.0.0.1".parse().unwrap()];
        assert!(ca.sign("x", &far, Usage::Serving, lab).is_err());
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
