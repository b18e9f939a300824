//! The PKI of a lab on real systemd: the files of `testcp::Pki` (so
//! `Pki::load` reads them, for the lab's clients and its kube-apiservers),
//! with a serving certificate valid for the hosts' namespaced addresses.
//!
//! testcp's own `Pki::generate` refuses any address outside loopback, by
//! design: a test plane serves on loopback only. Lab hosts on real systemd
//! have their own network namespaces, at `198.18.K.N` (see [`crate::net`]);
//! this module admits those and loopback, nothing else, so traffic still
//! stays on this machine.

use std::{
    fs,
    io::{self, Write},
    net::{IpAddr, Ipv4Addr},
    os::unix::fs::OpenOptionsExt,
    path::{Path, PathBuf},
};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType,
};
use rsa::pkcs8::{EncodePrivateKey, LineEnding};
use testcp::Pki;

/// Errors of making the lab's PKI.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An address that is neither loopback nor a lab host's (198.18.0.0/15).
    #[error("{0} is neither loopback nor a lab host's address (198.18.0.0/15)")]
    NotLabAddress(IpAddr),
    /// rcgen failed to make a key or certificate.
    #[error("generating a certificate: {0}")]
    Cert(#[from] rcgen::Error),
    /// The RSA key could not be made or encoded.
    #[error("generating the service-account key: {0}")]
    Rsa(String),
    /// A file could not be written.
    #[error("writing {path}: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
}

/// The result type of this module.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Whether a lab certificate may name `ip`: loopback, or 198.18.0.0/15.
pub fn is_lab_address(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v) => v.is_loopback() || (v.octets()[0] == 198 && v.octets()[1] & 0xfe == 18),
        IpAddr::V6(v) => v.is_loopback(),
    }
}

fn write(path: &Path, contents: &[u8], mode: u32) -> Result<()> {
    fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)
        .and_then(|mut f| f.write_all(contents))
        .map_err(|source| Error::Write {
            path: path.to_owned(),
            source,
        })
}

/// Generates into `dir` a CA, one serving certificate for `localhost`,
/// `127.0.0.1` and `ips` (every kube-apiserver of the lab presents it, so a
/// client with the one CA fails over between them), and the RSA
/// service-account key, as `testcp::Pki` lays them out. Private keys 0600.
pub fn generate(dir: &Path, ips: &[IpAddr]) -> Result<Pki> {
    let mut all = vec![IpAddr::V4(Ipv4Addr::LOCALHOST)];
    for &ip in ips {
        if !is_lab_address(ip) {
            return Err(Error::NotLabAddress(ip));
        }
        if !all.contains(&ip) {
            all.push(ip);
        }
    }
    fs::create_dir_all(dir).map_err(|source| Error::Write {
        path: dir.to_owned(),
        source,
    })?;
    let pki = Pki::load(dir, &all);

    let ca_key = KeyPair::generate()?;
    let mut ca = CertificateParams::default();
    ca.distinguished_name
        .push(DnType::CommonName, "fleet-role lab CA");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca_cert = ca.self_signed(&ca_key)?;
    let issuer = Issuer::new(ca, ca_key);

    let key = KeyPair::generate()?;
    let mut serving = CertificateParams::new(vec!["localhost".to_owned()])?;
    serving
        .distinguished_name
        .push(DnType::CommonName, "kube-apiserver");
    serving
        .subject_alt_names
        .extend(all.iter().map(|&ip| SanType::IpAddress(ip)));
    serving.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    serving.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let cert = serving.signed_by(&key, &issuer)?;

    // kube-apiserver signs service-account tokens with it (RS256).
    let sa = rsa::PrivateKey::new(&mut getrandom::SysRng, 2048)
        .map_err(|e| Error::Rsa(e.to_string()))?;
    let sa_pem = sa
        .to_pkcs8_pem(LineEnding::LF)
        .map_err(|e| Error::Rsa(e.to_string()))?;

    write(&pki.ca_file(), ca_cert.pem().as_bytes(), 0o644)?;
    write(&pki.serving_cert_file(), cert.pem().as_bytes(), 0o644)?;
    write(
        &pki.serving_key_file(),
        key.serialize_pem().as_bytes(),
        0o600,
    )?;
    write(&pki.service_account_key_file(), sa_pem.as_bytes(), 0o600)?;
    Ok(pki)
}

/// Where k3s keeps a server's etcd certificates, under the host's root
/// (`pkg/daemons/control/deps/deps.go`, `CreateRuntimeCertFiles`).
pub const HOST_ETCD_TLS: &str = "var/lib/rancher/k3s/server/tls/etcd";

/// The etcd client identity of the lab's own tools (tests, scenarios,
/// `status`): `server-ca.crt`, `client.crt`, `client.key` in this directory
/// of the PKI, the same names as a host's [`HOST_ETCD_TLS`].
pub fn etcd_client_dir(pki_dir: &Path) -> PathBuf {
    pki_dir.join("etcd")
}

fn ca(name: &str) -> Result<(String, Issuer<'static, KeyPair>)> {
    let key = KeyPair::generate()?;
    let mut p = CertificateParams::default();
    p.distinguished_name.push(DnType::CommonName, name);
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    p.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let cert = p.self_signed(&key)?;
    Ok((cert.pem(), Issuer::new(p, key)))
}

/// A leaf certificate and its key, signed by `issuer`: for `ips` (and
/// `localhost`) when it serves, for client authentication always (k3s's
/// `server-client` and `peer-server-client` are both).
fn leaf(
    cn: &str,
    ips: &[IpAddr],
    serves: bool,
    issuer: &Issuer<'_, KeyPair>,
) -> Result<(String, String)> {
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
    p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    if serves {
        p.extended_key_usages
            .push(ExtendedKeyUsagePurpose::ServerAuth);
    }
    let cert = p.signed_by(&key, issuer)?;
    Ok((cert.pem(), key.serialize_pem()))
}

fn write_pair(dir: &Path, name: &str, (cert, key): &(String, String)) -> Result<()> {
    write(&dir.join(format!("{name}.crt")), cert.as_bytes(), 0o644)?;
    write(&dir.join(format!("{name}.key")), key.as_bytes(), 0o600)
}

fn mkdir(dir: &Path) -> Result<()> {
    fs::create_dir_all(dir).map_err(|source| Error::Write {
        path: dir.to_owned(),
        source,
    })
}

/// k3s's etcd certificates: two CAs (etcd's server CA, which also signs
/// its clients, and the peer CA), and for each host (its root and address)
/// under [`HOST_ETCD_TLS`]: `server-ca.crt`, `peer-ca.crt`, the local
/// client `client.{crt,key}` (kube-apiserver's), the member's serving
/// `server-client.{crt,key}` and `peer-server-client.{crt,key}`, for
/// `localhost`, `127.0.0.1` and the host's address. The lab's own client
/// goes in [`etcd_client_dir`]. The CA keys are not kept.
pub fn generate_etcd(pki_dir: &Path, hosts: &[(PathBuf, IpAddr)]) -> Result<()> {
    for (_, ip) in hosts {
        if !is_lab_address(*ip) {
            return Err(Error::NotLabAddress(*ip));
        }
    }
    let (server_ca, server_issuer) = ca("etcd-server-ca")?;
    let (peer_ca, peer_issuer) = ca("etcd-peer-ca")?;
    let tools = etcd_client_dir(pki_dir);
    mkdir(&tools)?;
    write(&tools.join("server-ca.crt"), server_ca.as_bytes(), 0o644)?;
    write_pair(
        &tools,
        "client",
        &leaf("etcd-client", &[], false, &server_issuer)?,
    )?;
    for (root, ip) in hosts {
        let dir = root.join(HOST_ETCD_TLS);
        mkdir(&dir)?;
        let ips = [IpAddr::V4(Ipv4Addr::LOCALHOST), *ip];
        write(&dir.join("server-ca.crt"), server_ca.as_bytes(), 0o644)?;
        write(&dir.join("peer-ca.crt"), peer_ca.as_bytes(), 0o644)?;
        write_pair(
            &dir,
            "client",
            &leaf("etcd-client", &[], false, &server_issuer)?,
        )?;
        write_pair(
            &dir,
            "server-client",
            &leaf("etcd-server", &ips, true, &server_issuer)?,
        )?;
        write_pair(
            &dir,
            "peer-server-client",
            &leaf("etcd-peer", &ips, true, &peer_issuer)?,
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_and_the_lab_range_are_admitted() {
        for ok in [
            "127.0.0.1",
            "127.77.3.4",
            "198.18.7.1",
            "198.19.255.254",
            "::1",
        ] {
            assert!(is_lab_address(ok.parse().unwrap()), "{ok}");
        }
        for no in [
            "10.0.0.1",
            "198.17.0.1",
            "198.20.0.1",
            "192.168.1.1",
            "fe80::1",
        ] {
            assert!(!is_lab_address(no.parse().unwrap()), "{no}");
        }
        let dir = tempfile::tempdir().unwrap();
        let e = generate(dir.path(), &["10.0.0.1".parse().unwrap()]).unwrap_err();
        assert!(matches!(e, Error::NotLabAddress(_)), "{e}");
    }

    #[test]
    fn the_files_are_where_testcp_reads_them_and_private_keys_are_private() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let pki = generate(dir.path(), &["198.18.7.1".parse().unwrap()]).unwrap();
        let loaded = Pki::load(dir.path(), pki.ips());
        for (f, mode) in [
            (loaded.ca_file(), 0o644),
            (loaded.serving_cert_file(), 0o644),
            (loaded.serving_key_file(), 0o600),
            (loaded.service_account_key_file(), 0o600),
        ] {
            let m = fs::metadata(&f).unwrap().permissions().mode() & 0o777;
            assert_eq!(m, mode, "{}", f.display());
        }
        assert!(pki.ips().contains(&"198.18.7.1".parse().unwrap()));
    }
}
