//! X.509 version 1 member certificates.
//!
//! The recipe of Galera's and MariaDB's TLS guides, `openssl x509 -req`
//! without an extensions file, issues version 1 certificates (OpenSSL 3.0,
//! Debian 12's, still does), and Galera, through OpenSSL, accepts them.
//! webpki, which checks every other certificate here, takes version 3 only.
//! A version 1 certificate has no extensions (no names, no key usage, no CA
//! flag), so what there is to check is small, and it is checked here:
//!
//! - it was signed by the key of a certificate in `socket.ssl_ca`, whose
//!   subject is the certificate's issuer, with the algorithm the certificate
//!   declares, verified by the same algorithms rustls verifies with;
//! - it is valid now (an anchor's own dates are not checked, as webpki does
//!   not check them);
//! - the peer proves it holds the key: its handshake signature is verified
//!   against the certificate's public key.
//!
//! Not supported: a version 1 certificate issued by an intermediate CA that
//! is not itself in `socket.ssl_ca` (put the intermediate there), and peer
//! names (`socket.ssl_verify_peer_name=YES`): such a certificate names no
//! address, so a member that checks names refuses it.

use rustls::client::danger::HandshakeSignatureValid;
use rustls::crypto::{verify_tls13_signature_with_raw_key, WebPkiSupportedAlgorithms};
use rustls::pki_types::{CertificateDer, SubjectPublicKeyInfoDer, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, PeerMisbehaved, SignatureScheme};
use x509_parser::certificate::X509Certificate;
use x509_parser::prelude::FromDer;
use x509_parser::x509::X509Version;

/// The certificate, parsed, if it is a well-formed version 1 certificate;
/// anything else is left to webpki.
pub(super) fn parse<'a>(der: &'a CertificateDer<'_>) -> Option<X509Certificate<'a>> {
    match X509Certificate::from_der(der.as_ref()) {
        Ok((rest, cert)) if rest.is_empty() && cert.tbs_certificate.version == X509Version::V1 => Some(cert),
        _ => None,
    }
}

/// Whether `der` is a version 1 certificate (see the module comment).
pub(super) fn is_version1(der: &CertificateDer<'_>) -> bool {
    parse(der).is_some()
}

/// Checks a version 1 member certificate: issued by a certificate of
/// `anchors`, and valid at `now`.
pub(super) fn verify(
    cert: &X509Certificate<'_>,
    anchors: &[CertificateDer<'static>],
    algs: &WebPkiSupportedAlgorithms,
    now: UnixTime,
) -> Result<(), rustls::Error> {
    check_dates(cert, now)?;
    let mut issuers = anchors
        .iter()
        .filter_map(|a| X509Certificate::from_der(a.as_ref()).ok().map(|(_, c)| c))
        .filter(|a| a.subject().as_raw() == cert.issuer().as_raw())
        .peekable();
    if issuers.peek().is_none() {
        return Err(CertificateError::UnknownIssuer.into());
    }
    if issuers.any(|issuer| signed_by(cert, &issuer, algs)) {
        Ok(())
    } else {
        Err(CertificateError::BadSignature.into())
    }
}

fn check_dates(cert: &X509Certificate<'_>, now: UnixTime) -> Result<(), rustls::Error> {
    let now = i64::try_from(now.as_secs()).unwrap_or(i64::MAX);
    let validity = cert.validity();
    if now < validity.not_before.timestamp() {
        return Err(CertificateError::NotValidYet.into());
    }
    if now > validity.not_after.timestamp() {
        return Err(CertificateError::Expired.into());
    }
    Ok(())
}

/// Whether `issuer`'s key signed `cert`, with the algorithm `cert` declares
/// (inside and outside its signed part, which must agree).
fn signed_by(cert: &X509Certificate<'_>, issuer: &X509Certificate<'_>, algs: &WebPkiSupportedAlgorithms) -> bool {
    let declared = &cert.signature_algorithm;
    if declared != &cert.tbs_certificate.signature {
        return false;
    }
    let spki = SubjectPublicKeyInfoDer::from(issuer.public_key().raw);
    let Ok(key) = webpki::RawPublicKeyEntity::try_from(&spki) else {
        return false;
    };
    let oid = declared.algorithm.as_bytes();
    algs.all
        .iter()
        .filter(|alg| names_oid(alg.signature_alg_id().as_ref(), oid))
        .any(|alg| key.verify_signature(*alg, cert.tbs_certificate.as_ref(), &cert.signature_value.data).is_ok())
}

/// Whether an AlgorithmIdentifier's contents (webpki's form: the OID's
/// tag, length and value, then any parameters) start with the OID `oid`.
fn names_oid(algorithm_id: &[u8], oid: &[u8]) -> bool {
    match algorithm_id {
        [0x06, len, rest @ ..] => usize::from(*len) == oid.len() && rest.starts_with(oid),
        _ => false,
    }
}

/// A handshake signature made with a version 1 certificate's key, checked
/// as rustls checks one made with any other certificate's.
pub(super) fn verify_handshake(
    message: &[u8],
    cert: &X509Certificate<'_>,
    dss: &DigitallySignedStruct,
    algs: &WebPkiSupportedAlgorithms,
    tls13: bool,
) -> Result<HandshakeSignatureValid, rustls::Error> {
    let spki = SubjectPublicKeyInfoDer::from(cert.public_key().raw);
    if tls13 {
        return verify_tls13_signature_with_raw_key(message, &spki, dss, algs);
    }
    verify_tls12(message, &spki, dss.scheme, dss.signature(), algs)
}

/// TLS 1.2's rule: the scheme maps to several algorithms, any may match.
fn verify_tls12(
    message: &[u8],
    spki: &SubjectPublicKeyInfoDer<'_>,
    scheme: SignatureScheme,
    signature: &[u8],
    algs: &WebPkiSupportedAlgorithms,
) -> Result<HandshakeSignatureValid, rustls::Error> {
    let Some((_, candidates)) = algs.mapping.iter().find(|(s, _)| *s == scheme) else {
        return Err(PeerMisbehaved::SignedHandshakeWithUnadvertisedSigScheme.into());
    };
    let key =
        webpki::RawPublicKeyEntity::try_from(spki).map_err(|_| rustls::Error::from(CertificateError::BadEncoding))?;
    let verified = candidates.iter().any(|alg| key.verify_signature(*alg, message, signature).is_ok());
    if verified {
        Ok(HandshakeSignatureValid::assertion())
    } else {
        Err(CertificateError::BadSignature.into())
    }
}

#[cfg(test)]
#[path = "version1_tests.rs"]
mod tests;
