//! TLS on the group channel: both sides present a certificate and verify
//! the other's against the CA (mutual authentication), with Galera's
//! options (`socket.ssl_cert`, `socket.ssl_key`, `socket.ssl_ca`).
//!
//! Peers are verified against the CA only, not against the address they
//! were dialled at, as Galera does: members are usually named by IP, and a
//! certificate per address would make every re-addressing a re-issue.
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
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::server::WebPkiClientVerifier;
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, ServerConfig,
    SignatureScheme,
};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

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

/// The client and server sides of one loaded identity.
struct Configs {
    client: Arc<ClientConfig>,
    server: Arc<ServerConfig>,
}

/// A member's TLS identity, reloadable.
pub struct Tls {
    files: TlsFiles,
    configs: RwLock<Arc<Configs>>,
}

impl fmt::Debug for Tls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tls")
            .field("files", &self.files)
            .finish_non_exhaustive()
    }
}

impl Tls {
    /// Loads and checks the identity: every file readable and well-formed,
    /// the key matching the certificate.
    pub fn load(files: &TlsFiles) -> Result<Tls, TlsError> {
        Ok(Tls {
            files: files.clone(),
            configs: RwLock::new(Arc::new(build(files)?)),
        })
    }

    /// Re-reads the files (`socket.ssl_reload`). On failure the identity in
    /// use stays, and the error says which file is wrong.
    pub fn reload(&self) -> Result<(), TlsError> {
        let fresh = Arc::new(build(&self.files)?);
        *self.configs.write().unwrap_or_else(|p| p.into_inner()) = fresh;
        Ok(())
    }

    fn current(&self) -> Arc<Configs> {
        self.configs
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Dialler side of the TLS handshake with the member at `addr`.
    pub async fn connect(&self, tcp: TcpStream, addr: &str) -> io::Result<PeerStream> {
        let host = addr
            .rsplit_once(':')
            .map_or(addr, |(h, _)| h)
            .trim_matches(['[', ']']);
        let name = ServerName::try_from(host.to_string()).map_err(|e| {
            io::Error::new(io::ErrorKind::InvalidInput, format!("address {addr}: {e}"))
        })?;
        let connector = tokio_rustls::TlsConnector::from(self.current().client.clone());
        Ok(PeerStream::Client(Box::new(
            connector.connect(name, tcp).await?,
        )))
    }

    /// Listener side of the TLS handshake.
    pub async fn accept(&self, tcp: TcpStream) -> io::Result<PeerStream> {
        let acceptor = tokio_rustls::TlsAcceptor::from(self.current().server.clone());
        Ok(PeerStream::Server(Box::new(acceptor.accept(tcp).await?)))
    }
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn build(files: &TlsFiles) -> Result<Configs, TlsError> {
    let chain = read_certs(&files.cert, "socket.ssl_cert")?;
    let key = read_key(&files.key)?;
    let roots = Arc::new(read_roots(&files.ca)?);
    let provider = provider();
    let tls_error = |what: &str, e: rustls::Error| TlsError(format!("{what}: {e}"));

    let client_verifier =
        WebPkiClientVerifier::builder_with_provider(roots.clone(), provider.clone())
            .build()
            .map_err(|e| TlsError(format!("socket.ssl_ca '{}': {e}", files.ca.display())))?;
    let mut server = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| tls_error("TLS protocol versions", e))?
        .with_client_cert_verifier(client_verifier)
        .with_single_cert(chain.clone(), key.clone_key())
        .map_err(|e| key_mismatch(files, e))?;
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
        .with_custom_certificate_verifier(Arc::new(CaOnly(server_verifier)))
        .with_client_auth_cert(chain, key)
        .map_err(|e| key_mismatch(files, e))?;
    Ok(Configs {
        client: Arc::new(client),
        server: Arc::new(server),
    })
}

fn key_mismatch(files: &TlsFiles, e: rustls::Error) -> TlsError {
    TlsError(format!(
        "socket.ssl_key '{}' does not go with socket.ssl_cert '{}': {e}",
        files.key.display(),
        files.cert.display()
    ))
}

fn read_file(path: &Path, option: &str) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|e| TlsError(format!("{option} '{}': {e}", path.display())))
}

fn read_certs(path: &Path, option: &str) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let pem = read_file(path, option)?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| {
            TlsError(format!(
                "{option} '{}': not a PEM certificate file: {e}",
                path.display()
            ))
        })?;
    if certs.is_empty() {
        return Err(TlsError(format!(
            "{option} '{}': no certificate in the file",
            path.display()
        )));
    }
    Ok(certs)
}

fn read_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    let pem = read_file(path, "socket.ssl_key")?;
    PrivateKeyDer::from_pem_slice(&pem).map_err(|e| {
        TlsError(format!(
            "socket.ssl_key '{}': no usable private key in the file: {e}",
            path.display()
        ))
    })
}

fn read_roots(path: &Path) -> Result<RootCertStore, TlsError> {
    let mut roots = RootCertStore::empty();
    for cert in read_certs(path, "socket.ssl_ca")? {
        roots.add(cert).map_err(|e| {
            TlsError(format!(
                "socket.ssl_ca '{}': not a usable CA certificate: {e}",
                path.display()
            ))
        })?;
    }
    Ok(roots)
}

/// Verifies a listener's certificate against the CA, not against the name
/// it was dialled at (see the module comment).
#[derive(Debug)]
struct CaOnly(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for CaOnly {
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
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

/// A connection to a member, plain or encrypted.
pub enum PeerStream {
    Plain(TcpStream),
    Client(Box<tokio_rustls::client::TlsStream<TcpStream>>),
    Server(Box<tokio_rustls::server::TlsStream<TcpStream>>),
}

impl PeerStream {
    pub fn is_encrypted(&self) -> bool {
        !matches!(self, PeerStream::Plain(_))
    }

    fn tcp(&self) -> &TcpStream {
        match self {
            PeerStream::Plain(s) => s,
            PeerStream::Client(s) => s.get_ref().0,
            PeerStream::Server(s) => s.get_ref().0,
        }
    }

    /// Nothing to read and not closed: an idle connection still in step.
    /// Peeks at the socket, so that the bytes of a TLS record are not taken
    /// from under the TLS layer.
    pub fn is_idle(&self) -> bool {
        let mut probe = [0u8; 1];
        let mut buf = ReadBuf::new(&mut probe);
        let mut cx = Context::from_waker(Waker::noop());
        matches!(self.tcp().poll_peek(&mut cx, &mut buf), Poll::Pending)
    }
}

impl AsyncRead for PeerStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            PeerStream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            PeerStream::Client(s) => Pin::new(s).poll_read(cx, buf),
            PeerStream::Server(s) => Pin::new(s).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for PeerStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            PeerStream::Plain(s) => Pin::new(s).poll_write(cx, data),
            PeerStream::Client(s) => Pin::new(s).poll_write(cx, data),
            PeerStream::Server(s) => Pin::new(s).poll_write(cx, data),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            PeerStream::Plain(s) => Pin::new(s).poll_flush(cx),
            PeerStream::Client(s) => Pin::new(s).poll_flush(cx),
            PeerStream::Server(s) => Pin::new(s).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            PeerStream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            PeerStream::Client(s) => Pin::new(s).poll_shutdown(cx),
            PeerStream::Server(s) => Pin::new(s).poll_shutdown(cx),
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
