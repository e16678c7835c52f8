//! Certificates for a local TLS cluster (`tandem cluster up --tls`): one CA
//! and, per node, a certificate it signed, in `dir/tls/`. Enough for a
//! cluster on one machine; a real deployment brings its own (see
//! docs/security.md).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose,
};

/// Where a cluster's TLS files are.
pub fn tls_dir(cluster_dir: &Path) -> PathBuf {
    cluster_dir.join("tls")
}

pub fn ca_file(cluster_dir: &Path) -> PathBuf {
    tls_dir(cluster_dir).join("ca.pem")
}

pub fn cert_file(cluster_dir: &Path, node: &str) -> PathBuf {
    tls_dir(cluster_dir).join(format!("{node}-cert.pem"))
}

pub fn key_file(cluster_dir: &Path, node: &str) -> PathBuf {
    tls_dir(cluster_dir).join(format!("{node}-key.pem"))
}

/// Makes a new CA and a certificate per node name. The CA's key stays in
/// `dir/tls` (readable by its owner only) for [`reissue`].
pub fn generate(cluster_dir: &Path, nodes: &[String]) -> Result<()> {
    let dir = tls_dir(cluster_dir);
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let key = KeyPair::generate()?;
    let ca = CertifiedIssuer::self_signed(ca_params()?, key)?;
    write(&ca_file(cluster_dir), &ca.pem())?;
    write_private(&ca_key_file(cluster_dir), &ca.key().serialize_pem())?;
    for node in nodes {
        issue(&ca, cluster_dir, node)?;
    }
    Ok(())
}

/// A new key and certificate for `node` from the cluster's CA, written over
/// its files: what a rotation with `socket.ssl_reload` then picks up.
pub fn reissue(cluster_dir: &Path, node: &str) -> Result<()> {
    let path = ca_key_file(cluster_dir);
    let key_pem = std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let key = KeyPair::from_pem(&key_pem).with_context(|| format!("{} is not a key", path.display()))?;
    let ca = CertifiedIssuer::self_signed(ca_params()?, key)?;
    issue(&ca, cluster_dir, node)
}

fn ca_key_file(cluster_dir: &Path) -> PathBuf {
    tls_dir(cluster_dir).join("ca-key.pem")
}

/// The CA's identity: the same each time, so that a certificate issued by a
/// CA rebuilt from its key chains to the `ca.pem` written first.
fn ca_params() -> Result<CertificateParams> {
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, "Tandem local cluster CA");
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    Ok(params)
}

/// A certificate for 127.0.0.1 and localhost, usable as server and as
/// client: members are both.
fn issue(ca: &CertifiedIssuer<'_, KeyPair>, cluster_dir: &Path, node: &str) -> Result<()> {
    let mut params = CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()])?;
    params.distinguished_name.push(DnType::CommonName, node);
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth, ExtendedKeyUsagePurpose::ClientAuth];
    let key = KeyPair::generate()?;
    let cert = params.signed_by(&key, ca)?;
    write(&cert_file(cluster_dir, node), &cert.pem())?;
    write_private(&key_file(cluster_dir, node), &key.serialize_pem())
}

fn write(path: &Path, text: &str) -> Result<()> {
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

/// Private keys: readable by their owner only, from the moment they exist.
fn write_private(path: &Path, text: &str) -> Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let _ = std::fs::remove_file(path);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("creating {}", path.display()))?;
    file.write_all(text.as_bytes()).with_context(|| format!("writing {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ca_and_a_pair_per_node_in_pem() {
        let tmp = tempfile::tempdir().unwrap();
        let nodes = vec!["node1".to_string(), "node2".to_string()];
        generate(tmp.path(), &nodes).unwrap();
        let ca = std::fs::read_to_string(ca_file(tmp.path())).unwrap();
        assert!(ca.starts_with("-----BEGIN CERTIFICATE-----"), "{ca}");
        for node in &nodes {
            let cert = std::fs::read_to_string(cert_file(tmp.path(), node)).unwrap();
            let key = std::fs::read_to_string(key_file(tmp.path(), node)).unwrap();
            assert!(cert.starts_with("-----BEGIN CERTIFICATE-----"));
            assert!(key.contains("PRIVATE KEY-----"));
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(key_file(tmp.path(), node)).unwrap().permissions().mode();
            assert_eq!(mode & 0o077, 0, "{node}'s key is private");
        }
        // The pairs load as a TLS identity that trusts the CA.
        let files = tandem_group::TlsFiles {
            cert: cert_file(tmp.path(), "node1"),
            key: key_file(tmp.path(), "node1"),
            ca: ca_file(tmp.path()),
        };
        let tls = tandem_group::Tls::load(&files).expect("a usable identity");
        let before = std::fs::read(cert_file(tmp.path(), "node1")).unwrap();
        reissue(tmp.path(), "node1").unwrap();
        assert_ne!(std::fs::read(cert_file(tmp.path(), "node1")).unwrap(), before, "a new certificate");
        tls.reload().expect("the reissued pair chains to the same CA file");
    }
}
