//! The PKI of a lab on real systemd: testcp's ([`testcp::Pki`]) under the
//! lab's address policy, and k3s's etcd certificates of its hosts.
//!
//! testcp's plane serves on loopback only; lab hosts on real systemd have
//! their own network namespaces, at `198.18.K.N` (see `labrig::net`), so the
//! lab's certificates are made under [`AddressPolicy::LoopbackAndLab`]: those
//! and loopback, nothing else, so traffic still stays on this machine.

use std::{
    fs,
    net::{IpAddr, Ipv4Addr},
    path::{Path, PathBuf},
};

use testcp::{
    AddressPolicy, Ca, Pki, Usage,
    pki::{Error, write},
};

/// The result type of this module.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The addresses a lab certificate may name.
pub const POLICY: AddressPolicy = AddressPolicy::LoopbackAndLab;

/// Generates into `dir` testcp's PKI (a CA, one serving certificate every
/// kube-apiserver of the lab presents, the service-account key) for
/// `localhost`, `127.0.0.1` and `ips`, under the lab's [`POLICY`].
pub fn generate(dir: &Path, ips: &[IpAddr]) -> Result<Pki> {
    Pki::generate_for(dir, ips, POLICY, "fleet-role lab CA")
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
/// under [`HOST_ETCD_TLS`]: the CAs with their keys, as k3s keeps them on
/// every server, and its member's own certificates ([`write_member`]).
/// The lab's own client goes in [`etcd_client_dir`].
pub fn generate_etcd(pki_dir: &Path, hosts: &[(PathBuf, IpAddr)]) -> Result<()> {
    if let Some(&(_, ip)) = hosts.iter().find(|(_, ip)| !POLICY.admits(*ip)) {
        return Err(Error::NotAdmitted { ip, policy: POLICY });
    }
    let cas = EtcdCas {
        server: Ca::new(SERVER_CA)?,
        peer: Ca::new(PEER_CA)?,
    };
    let tools = etcd_client_dir(pki_dir);
    mkdir(&tools)?;
    write(
        &tools.join("server-ca.crt"),
        cas.server.pem().as_bytes(),
        0o644,
    )?;
    write_pair(
        &tools,
        "client",
        &cas.server.sign("etcd-client", &[], Usage::Client, POLICY)?,
    )?;
    for (root, ip) in hosts {
        write_member(&root.join(HOST_ETCD_TLS), &cas, *ip)?;
    }
    Ok(())
}

/// The name of etcd's server CA (it signs the clients too).
const SERVER_CA: &str = "etcd-server-ca";
/// The name of etcd's peer CA.
const PEER_CA: &str = "etcd-peer-ca";

/// etcd's two CAs, as k3s's bootstrap data carries them between servers.
pub struct EtcdCas {
    /// etcd's server CA, which also signs its clients.
    pub server: Ca,
    /// The peer CA.
    pub peer: Ca,
}

impl EtcdCas {
    /// The CAs from their certificates and keys (PEM): server cert, server
    /// key, peer cert, peer key.
    ///
    /// # Errors
    /// A certificate or key that does not parse.
    pub fn from_pem(server: (&str, &str), peer: (&str, &str)) -> Result<Self> {
        Ok(Self {
            server: Ca::from_pem(SERVER_CA, server.0, server.1)?,
            peer: Ca::from_pem(PEER_CA, peer.0, peer.1)?,
        })
    }
}

/// The CAs' files in a host's [`HOST_ETCD_TLS`], as k3s names them:
/// (certificate, key) of the server CA, then of the peer CA.
pub const CA_FILES: [(&str, &str); 2] = [
    ("server-ca.crt", "server-ca.key"),
    ("peer-ca.crt", "peer-ca.key"),
];

/// One member's etcd certificates in `dir` (a host's [`HOST_ETCD_TLS`]),
/// as k3s makes them from the CAs (`deps.go`, `genETCDCerts`): the CAs
/// (`server-ca.*`, `peer-ca.*`), the local client `client.{crt,key}`
/// (kube-apiserver's), the member's serving `server-client.{crt,key}` and
/// `peer-server-client.{crt,key}`, for `localhost`, `127.0.0.1` and `ip`.
///
/// # Errors
/// An address outside the lab's policy, or a file that could not be
/// written (one that exists included: a host's certificates are made once).
pub fn write_member(dir: &Path, cas: &EtcdCas, ip: IpAddr) -> Result<()> {
    mkdir(dir)?;
    let ips = [IpAddr::V4(Ipv4Addr::LOCALHOST), ip];
    for ((cert, key), ca) in CA_FILES.iter().zip([&cas.server, &cas.peer]) {
        write(&dir.join(cert), ca.pem().as_bytes(), 0o644)?;
        write(&dir.join(key), ca.key_pem().as_bytes(), 0o600)?;
    }
    write_pair(
        dir,
        "client",
        &cas.server.sign("etcd-client", &[], Usage::Client, POLICY)?,
    )?;
    write_pair(
        dir,
        "server-client",
        &cas.server
            .sign("etcd-server", &ips, Usage::ServingAndClient, POLICY)?,
    )?;
    write_pair(
        dir,
        "peer-server-client",
        &cas.peer
            .sign("etcd-peer", &ips, Usage::ServingAndClient, POLICY)?,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lab_pki_names_its_hosts_addresses_and_refuses_any_outside_the_lab() {
        let dir = tempfile::tempdir().unwrap();
        let e = generate(dir.path(), &["10.0.0.1".parse().unwrap()]).unwrap_err();
        assert!(matches!(e, Error::NotAdmitted { .. }), "{e}");
        let far = [(dir.path().join("h"), "10.0.0.1".parse().unwrap())];
        assert!(generate_etcd(&dir.path().join("etcd-pki"), &far).is_err());
    }

    #[test]
    fn the_files_are_where_testcp_and_k3s_read_them_and_private_keys_are_private() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let pki = generate(&dir.path().join("pki"), &["198.18.7.1".parse().unwrap()]).unwrap();
        let loaded = Pki::load(pki.dir(), pki.ips());
        let host = dir.path().join("host");
        generate_etcd(pki.dir(), &[(host.clone(), "198.18.7.1".parse().unwrap())]).unwrap();
        let etcd = host.join(HOST_ETCD_TLS);
        for (f, mode) in [
            (loaded.ca_file(), 0o644),
            (loaded.serving_cert_file(), 0o644),
            (loaded.serving_key_file(), 0o600),
            (loaded.service_account_key_file(), 0o600),
            (etcd.join("server-ca.crt"), 0o644),
            (etcd.join("peer-server-client.key"), 0o600),
            (etcd.join("server-ca.key"), 0o600),
            (etcd_client_dir(pki.dir()).join("client.key"), 0o600),
        ] {
            let m = fs::metadata(&f).unwrap().permissions().mode() & 0o777;
            assert_eq!(m, mode, "{}", f.display());
        }
        assert!(pki.ips().contains(&"198.18.7.1".parse().unwrap()));
    }
}
