//! TLS on the group channel: both sides present a certificate and verify
//! the other's against the CA (mutual authentication), with Galera's
//! options (`socket.ssl_cert`, `socket.ssl_key`, `socket.ssl_ca`).
//!
//! Peers are verified against the CA only, not against the address they
//! were dialled at, as Galera does: members are usually named by IP, and a
//! certificate per address would make every re-addressing a re-issue.
//! `socket.ssl_verify_peer_name=YES` (Tandem's) adds the address check for
//! those who issue per-address certificates.
//!
//! A self-signed certificate that is itself in the CA file is accepted as
//! a member's certificate (Galera's setups, and MariaDB's tests, use one
//! certificate as both CA and identity). The peer still proves it holds
//! the key, and its validity dates are still checked.
//!
//! X.509 version 1 certificates, which webpki refuses and OpenSSL's recipe
//! in Galera's guides issues, are checked by `version1`.
//!
//! The configuration is swapped whole by [`Tls::reload`] (`socket.ssl_reload`):
//! new connections use the new certificate, established ones go on with the
//! one they were opened with until they close.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, RwLock};
use std::task::{Context, Poll, Waker};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;

use super::ciphers;
use super::version1;
use log::info;
use rustls::client::ResolvesClientCert;
use rustls::crypto::{CryptoProvider, WebPkiSupportedAlgorithms};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::server::{ResolvesServerCert, WebPkiClientVerifier};
use rustls::sign::CertifiedKey;
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, DistinguishedName, RootCertStore, ServerConfig,
    SignatureScheme,
};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

use super::wires::Link;

/// The files of a member's TLS identity, as configured.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsFiles {
    /// This member's certificate chain, leaf first (`socket.ssl_cert`).
    pub cert: PathBuf,
    /// Its private key (`socket.ssl_key`).
    pub key: PathBuf,
    /// The CA that signs every member's certificate (`socket.ssl_ca`; the
    /// certificate file itself when not given, as Galera does).
    pub ca: PathBuf,
}

/// Why a TLS identity could not be loaded: always names the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsError(pub String);

impl fmt::Display for TlsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for TlsError {}

/// Whether a dialled member's certificate must name the address it was
/// dialled at (`socket.ssl_verify_peer_name`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PeerNames {
    /// The CA's signature is enough (Galera's behaviour).
    #[default]
    Ignored,
    /// The certificate must also be valid for the address: an IP address
    /// SAN for an IP, a DNS name for a host name.
    Verified,
}

/// How peers are checked and which suites are offered, beside the files.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TlsPolicy {
    pub peer_names: PeerNames,
    /// `socket.ssl_cipher`, as Galera reads it (see `ciphers`).
    pub ciphers: String,
}

/// The client and server sides of one loaded identity.
struct Configs {
    client: Arc<ClientConfig>,
    server: Arc<ServerConfig>,
}

/// A member's TLS identity, reloadable.
pub struct Tls {
    files: TlsFiles,
    policy: TlsPolicy,
    configs: RwLock<Arc<Configs>>,
}

impl fmt::Debug for Tls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tls").field("files", &self.files).finish_non_exhaustive()
    }
}

impl Tls {
    /// Loads and checks the identity: every file readable and well-formed,
    /// the key matching the certificate.
    pub fn load(files: &TlsFiles) -> Result<Tls, TlsError> {
        Tls::load_with(files, &TlsPolicy::default())
    }

    /// [`Tls::load`], with a policy other than Galera's defaults.
    pub fn load_with(files: &TlsFiles, policy: &TlsPolicy) -> Result<Tls, TlsError> {
        Ok(Tls { files: files.clone(), policy: policy.clone(), configs: RwLock::new(Arc::new(build(files, policy)?)) })
    }

    /// Re-reads the files (`socket.ssl_reload`). On failure the identity in
    /// use stays, and the error says which file is wrong.
    pub fn reload(&self) -> Result<(), TlsError> {
        let fresh = Arc::new(build(&self.files, &self.policy)?);
        *self.configs.write().unwrap_or_else(|p| p.into_inner()) = fresh;
        Ok(())
    }

    fn current(&self) -> Arc<Configs> {
        self.configs.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The dialler's rustls configuration, for a blocking transport of our
    /// own (the `tandem` SST method) that uses the same identity and checks.
    pub fn client_config(&self) -> Arc<ClientConfig> {
        self.current().client.clone()
    }

    /// The listener's rustls configuration: the peer must present a
    /// certificate from the same CA.
    pub fn server_config(&self) -> Arc<ServerConfig> {
        self.current().server.clone()
    }

    /// Dialler side of the TLS handshake with the member at `addr`.
    pub async fn connect(&self, tcp: TcpStream, addr: &str) -> io::Result<PeerStream> {
        let host = addr.rsplit_once(':').map_or(addr, |(h, _)| h).trim_matches(['[', ']']);
        let name = ServerName::try_from(host.to_string())
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, format!("address {addr}: {e}")))?;
        let connector = tokio_rustls::TlsConnector::from(self.current().client.clone());
        Ok(PeerStream::Client(Box::new(connector.connect(name, tcp).await?)))
    }

    /// Listener side of the TLS handshake.
    pub async fn accept(&self, tcp: TcpStream) -> io::Result<PeerStream> {
        let acceptor = tokio_rustls::TlsAcceptor::from(self.current().server.clone());
        Ok(PeerStream::Server(Box::new(acceptor.accept(tcp).await?)))
    }
}

/// Whether a failed handshake's error says the *peer* ended it with a TLS
/// alert (most often: it does not trust our certificate), rather than our
/// side refusing the peer. Only the text survives to the places that log
/// it, so this reads rustls's wording for `Error::AlertReceived`; the test
/// below fails if a rustls upgrade changes it.
pub fn peer_sent_alert(error_text: &str) -> bool {
    error_text.contains("received fatal alert")
}

/// Our crypto provider, offering the suites `socket.ssl_cipher` picks.
fn provider(ciphers: &str) -> Result<Arc<CryptoProvider>, TlsError> {
    let mut provider = rustls::crypto::ring::default_provider();
    let choice = ciphers::choose(ciphers).map_err(|e| TlsError(format!("socket.ssl_cipher '{ciphers}': {e}")))?;
    if !choice.unavailable.is_empty() {
        // A note, as Galera's "SSL cipher list set to" is: with OpenSSL too,
        // two current peers agree on a TLS 1.3 suite whatever the list says.
        info!(
            "socket.ssl_cipher: {} not available here (only AEAD suites with forward secrecy are); \
             the TLS 1.3 suites stay on, as with Galera's OpenSSL",
            choice.unavailable.join(", ")
        );
    }
    if !choice.suites.is_empty() {
        provider.cipher_suites = choice.suites;
    }
    Ok(Arc::new(provider))
}

fn build(files: &TlsFiles, policy: &TlsPolicy) -> Result<Configs, TlsError> {
    let names = policy.peer_names;
    let chain = read_certs(&files.cert, "socket.ssl_cert")?;
    let key = read_key(&files.key)?;
    let anchors = read_certs(&files.ca, "socket.ssl_ca")?;
    let roots = Arc::new(read_roots(&files.ca)?);
    let provider = provider(&policy.ciphers)?;
    let tls_error = |what: &str, e: rustls::Error| TlsError(format!("{what}: {e}"));

    let client_verifier = WebPkiClientVerifier::builder_with_provider(roots.clone(), provider.clone())
        .build()
        .map_err(|e| TlsError(format!("socket.ssl_ca '{}': {e}", files.ca.display())))?;
    let algs = provider.signature_verification_algorithms;
    let client_verifier = Arc::new(MemberAsClient { inner: client_verifier, anchors: anchors.clone(), algs });
    let identity = Arc::new(Identity(Arc::new(certified_key(files, chain, key, &provider)?)));
    let mut server = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| tls_error("TLS protocol versions", e))?
        .with_client_cert_verifier(client_verifier)
        .with_cert_resolver(identity.clone());
    // An idle pooled connection must have nothing to read: that is how a
    // dialler tells it is still open. Session tickets would break that, and
    // members reconnect rarely enough not to need resumption.
    server.send_tls13_tickets = 0;

    let server_verifier = WebPkiServerVerifier::builder_with_provider(roots, provider.clone())
        .build()
        .map_err(|e| TlsError(format!("socket.ssl_ca '{}': {e}", files.ca.display())))?;
    let client = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| tls_error("TLS protocol versions", e))?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(MemberAsServer { inner: server_verifier, anchors, algs, names }))
        .with_client_cert_resolver(identity);
    Ok(Configs { client: Arc::new(client), server: Arc::new(server) })
}

/// The key and chain as one identity, after our own check that they belong
/// together: the certificate must carry the key's public half, byte for
/// byte. (rustls's own check parses the certificate with webpki, which
/// refuses X.509 version 1; OpenSSL, and so Galera, loads those, and so do
/// we.)
fn certified_key(
    files: &TlsFiles,
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
    provider: &CryptoProvider,
) -> Result<CertifiedKey, TlsError> {
    let signing = provider
        .key_provider
        .load_private_key(key)
        .map_err(|e| TlsError(format!("socket.ssl_key '{}': {e}", files.key.display())))?;
    let leaf = chain[0].as_ref();
    let matches =
        signing.public_key().is_some_and(|spki| leaf.windows(spki.as_ref().len()).any(|w| w == spki.as_ref()));
    if !matches {
        return Err(TlsError(format!(
            "socket.ssl_key '{}' does not go with socket.ssl_cert '{}': the certificate is for another key",
            files.key.display(),
            files.cert.display()
        )));
    }
    if version1::is_version1(&chain[0]) {
        info!(
            "socket.ssl_cert '{}' is an X.509 version 1 certificate: it names no address, so a peer with \
             socket.ssl_verify_peer_name=YES refuses it; its issuer must be in every peer's socket.ssl_ca",
            files.cert.display()
        );
    }
    Ok(CertifiedKey::new(chain, signing))
}

/// This member's one identity, on both sides of a handshake.
#[derive(Debug)]
struct Identity(Arc<CertifiedKey>);

impl ResolvesServerCert for Identity {
    fn resolve(&self, _hello: rustls::server::ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.0.clone())
    }
}

impl ResolvesClientCert for Identity {
    fn resolve(&self, _hints: &[&[u8]], _schemes: &[SignatureScheme]) -> Option<Arc<CertifiedKey>> {
        Some(self.0.clone())
    }

    fn has_certs(&self) -> bool {
        true
    }
}

fn read_file(path: &Path, option: &str) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|e| TlsError(format!("{option} '{}': {e}", path.display())))
}

fn read_certs(path: &Path, option: &str) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let pem = read_file(path, option)?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsError(format!("{option} '{}': not a PEM certificate file: {e}", path.display())))?;
    if certs.is_empty() {
        return Err(TlsError(format!("{option} '{}': no certificate in the file", path.display())));
    }
    Ok(certs)
}

fn read_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    let pem = read_file(path, "socket.ssl_key")?;
    PrivateKeyDer::from_pem_slice(&pem)
        .map_err(|e| TlsError(format!("socket.ssl_key '{}': no usable private key in the file: {e}", path.display())))
}

fn read_roots(path: &Path) -> Result<RootCertStore, TlsError> {
    let mut roots = RootCertStore::empty();
    for cert in read_certs(path, "socket.ssl_ca")? {
        roots
            .add(cert)
            .map_err(|e| TlsError(format!("socket.ssl_ca '{}': not a usable CA certificate: {e}", path.display())))?;
    }
    Ok(roots)
}

/// The one verification error a member's certificate may be forgiven: a
/// self-signed CA certificate presented as an identity, when that very
/// certificate is in the CA file. webpki checks validity dates before it
/// looks at the CA flag, so an expired one is still refused.
fn pinned_self_signed(
    anchors: &[CertificateDer<'static>],
    end_entity: &CertificateDer<'_>,
    error: &rustls::Error,
) -> bool {
    let rustls::Error::InvalidCertificate(CertificateError::Other(other)) = error else {
        return false;
    };
    matches!(other.0.downcast_ref::<webpki::Error>(), Some(webpki::Error::CaUsedAsEndEntity))
        && anchors.iter().any(|anchor| anchor.as_ref() == end_entity.as_ref())
}

/// Handshake signatures are checked as webpki checks them (by `version1`
/// for a version 1 certificate, which webpki cannot read): our verifiers
/// differ only in which certificates they accept.
macro_rules! handshake_signatures_by_inner {
    () => {
        fn verify_tls12_signature(
            &self,
            message: &[u8],
            cert: &CertificateDer<'_>,
            dss: &DigitallySignedStruct,
        ) -> Result<HandshakeSignatureValid, rustls::Error> {
            match version1::parse(cert) {
                Some(v1) => version1::verify_handshake(message, &v1, dss, &self.algs, false),
                None => self.inner.verify_tls12_signature(message, cert, dss),
            }
        }

        fn verify_tls13_signature(
            &self,
            message: &[u8],
            cert: &CertificateDer<'_>,
            dss: &DigitallySignedStruct,
        ) -> Result<HandshakeSignatureValid, rustls::Error> {
            match version1::parse(cert) {
                Some(v1) => version1::verify_handshake(message, &v1, dss, &self.algs, true),
                None => self.inner.verify_tls13_signature(message, cert, dss),
            }
        }

        fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
            self.inner.supported_verify_schemes()
        }
    };
}

/// Verifies a listener's certificate against the CA and, when asked for,
/// the address it was dialled at (see the module comment).
#[derive(Debug)]
struct MemberAsServer {
    inner: Arc<WebPkiServerVerifier>,
    anchors: Vec<CertificateDer<'static>>,
    algs: WebPkiSupportedAlgorithms,
    names: PeerNames,
}

impl ServerCertVerifier for MemberAsServer {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        // The chain and validity are checked before the name: a name error
        // means everything else held.
        if let Some(v1) = version1::parse(end_entity) {
            version1::verify(&v1, &self.anchors, &self.algs, now)?;
            return match self.names {
                PeerNames::Ignored => Ok(ServerCertVerified::assertion()),
                // It names nothing (see `version1`).
                PeerNames::Verified => Err(CertificateError::NotValidForNameContext {
                    expected: server_name.to_owned(),
                    presented: Vec::new(),
                }
                .into()),
            };
        }
        match self.inner.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now) {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) if self.names == PeerNames::Ignored => Ok(ServerCertVerified::assertion()),
            Err(e) if pinned_self_signed(&self.anchors, end_entity, &e) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    handshake_signatures_by_inner!();
}

/// Verifies a dialler's certificate against the CA: a member must present
/// one (mutual authentication).
#[derive(Debug)]
struct MemberAsClient {
    inner: Arc<dyn ClientCertVerifier>,
    anchors: Vec<CertificateDer<'static>>,
    algs: WebPkiSupportedAlgorithms,
}

impl ClientCertVerifier for MemberAsClient {
    fn offer_client_auth(&self) -> bool {
        true
    }

    fn client_auth_mandatory(&self) -> bool {
        true
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        self.inner.root_hint_subjects()
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        if let Some(v1) = version1::parse(end_entity) {
            version1::verify(&v1, &self.anchors, &self.algs, now)?;
            return Ok(ClientCertVerified::assertion());
        }
        match self.inner.verify_client_cert(end_entity, intermediates, now) {
            Err(e) if pinned_self_signed(&self.anchors, end_entity, &e) => Ok(ClientCertVerified::assertion()),
            other => other,
        }
    }

    handshake_signatures_by_inner!();
}

/// A connection to a member, plain or encrypted, or one of a given network
/// (`transport::wires`, plaintext).
pub enum PeerStream {
    Plain(TcpStream),
    Client(Box<tokio_rustls::client::TlsStream<TcpStream>>),
    Server(Box<tokio_rustls::server::TlsStream<TcpStream>>),
    Given(Box<dyn Link>),
}

impl PeerStream {
    pub fn is_encrypted(&self) -> bool {
        matches!(self, PeerStream::Client(_) | PeerStream::Server(_))
    }

    /// Nothing to read and not closed: an idle connection still in step.
    /// Peeks at the socket, so that the bytes of a TLS record are not taken
    /// from under the TLS layer.
    pub fn is_idle(&mut self) -> bool {
        let tcp = match self {
            PeerStream::Plain(s) => &*s,
            PeerStream::Client(s) => s.get_ref().0,
            PeerStream::Server(s) => s.get_ref().0,
            PeerStream::Given(link) => return link.is_idle(),
        };
        let mut probe = [0u8; 1];
        let mut buf = ReadBuf::new(&mut probe);
        let mut cx = Context::from_waker(Waker::noop());
        matches!(tcp.poll_peek(&mut cx, &mut buf), Poll::Pending)
    }
}

impl AsyncRead for PeerStream {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            PeerStream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            PeerStream::Client(s) => Pin::new(s).poll_read(cx, buf),
            PeerStream::Server(s) => Pin::new(s).poll_read(cx, buf),
            PeerStream::Given(s) => Pin::new(s).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for PeerStream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            PeerStream::Plain(s) => Pin::new(s).poll_write(cx, data),
            PeerStream::Client(s) => Pin::new(s).poll_write(cx, data),
            PeerStream::Server(s) => Pin::new(s).poll_write(cx, data),
            PeerStream::Given(s) => Pin::new(s).poll_write(cx, data),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            PeerStream::Plain(s) => Pin::new(s).poll_flush(cx),
            PeerStream::Client(s) => Pin::new(s).poll_flush(cx),
            PeerStream::Server(s) => Pin::new(s).poll_flush(cx),
            PeerStream::Given(s) => Pin::new(s).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            PeerStream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            PeerStream::Client(s) => Pin::new(s).poll_shutdown(cx),
            PeerStream::Server(s) => Pin::new(s).poll_shutdown(cx),
            PeerStream::Given(s) => Pin::new(s).poll_shutdown(cx),
        }
    }
}

/// What a listener saw first on a new connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Opening {
    /// A TLS record (a ClientHello starts with content type 22).
    Tls,
    /// Anything else: a plaintext Tandem preamble, or garbage.
    Plain,
}

/// Looks at the first byte without taking it.
pub async fn opening(tcp: &TcpStream) -> io::Result<Opening> {
    let mut first = [0u8; 1];
    match tcp.peek(&mut first).await? {
        0 => Err(io::ErrorKind::UnexpectedEof.into()),
        _ if first[0] == 0x16 => Ok(Opening::Tls),
        _ => Ok(Opening::Plain),
    }
}

#[cfg(test)]
mod alert_tests {
    use super::peer_sent_alert;
    use rustls::{AlertDescription, Error};

    #[test]
    fn an_alert_from_the_peer_is_told_apart_from_our_own_refusal() {
        let theirs = Error::AlertReceived(AlertDescription::BadCertificate);
        let io = std::io::Error::new(std::io::ErrorKind::InvalidData, theirs);
        assert!(peer_sent_alert(&io.to_string()), "{io}");
        let ours = Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer);
        assert!(!peer_sent_alert(&ours.to_string()), "{ours}");
    }
}
