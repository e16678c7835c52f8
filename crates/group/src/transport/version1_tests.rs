use super::*;

use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair, SigningKey};

#[path = "../../tests/common/version1_cert.rs"]
mod version1_cert;
use version1_cert::*;

/// A version 3 CA, as `openssl req -x509` makes one.
struct Ca {
    issuer: CertifiedIssuer<'static, KeyPair>,
}

impl Ca {
    fn new(name: &str) -> Ca {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        Ca { issuer: CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap() }
    }

    fn der(&self) -> CertificateDer<'static> {
        self.issuer.der().clone()
    }

    fn name(&self) -> Vec<u8> {
        let (_, ca) = X509Certificate::from_der(self.issuer.der().as_ref()).unwrap();
        ca.subject().as_raw().to_vec()
    }

    fn key(&self) -> &KeyPair {
        self.issuer.key()
    }

    /// A version 1 member certificate and its key.
    fn member(&self, spec: &Version1) -> (CertificateDer<'static>, KeyPair) {
        let key = KeyPair::generate().unwrap();
        (CertificateDer::from(spec.build(&key, self.key())), key)
    }
}

fn algs() -> WebPkiSupportedAlgorithms {
    rustls::crypto::ring::default_provider().signature_verification_algorithms
}

fn check(cert: &CertificateDer<'_>, anchors: &[CertificateDer<'static>]) -> Result<(), rustls::Error> {
    let v1 = parse(cert).expect("a version 1 certificate");
    verify(&v1, anchors, &algs(), UnixTime::now())
}

fn refused_with(result: Result<(), rustls::Error>, expected: CertificateError) {
    assert_eq!(result, Err(rustls::Error::InvalidCertificate(expected)));
}

#[test]
fn only_version_1_certificates_are_taken_from_webpki() {
    let ca = Ca::new("ca");
    let (v1, _) = ca.member(&Version1::new("node1", ca.name()));
    assert!(is_version1(&v1));
    assert!(!is_version1(&ca.der()), "rcgen writes version 3");
    assert!(!is_version1(&CertificateDer::from(vec![0x30, 0x03, 0x02, 0x01, 0x01])), "garbage is not");
    // What webpki says of it, which is why this module exists.
    assert_eq!(webpki::EndEntityCert::try_from(&v1).err(), Some(webpki::Error::UnsupportedCertVersion));
}

#[test]
fn a_certificate_signed_by_a_ca_of_the_ca_file_is_accepted() {
    let ca = Ca::new("ca");
    let (v1, _) = ca.member(&Version1::new("node1", ca.name()));
    assert_eq!(check(&v1, &[ca.der()]), Ok(()));
    // Among other anchors, too.
    let other = Ca::new("other");
    assert_eq!(check(&v1, &[other.der(), ca.der()]), Ok(()));
}

#[test]
fn a_certificate_of_another_ca_is_refused() {
    let ca = Ca::new("ca");
    let other = Ca::new("other");
    let (v1, _) = other.member(&Version1::new("intruder", other.name()));
    refused_with(check(&v1, &[ca.der()]), CertificateError::UnknownIssuer);
}

#[test]
fn a_certificate_that_names_the_ca_but_was_signed_by_another_key_is_refused() {
    let ca = Ca::new("ca");
    let forger = KeyPair::generate().unwrap();
    let key = KeyPair::generate().unwrap();
    let forged = CertificateDer::from(Version1::new("intruder", ca.name()).build(&key, &forger));
    refused_with(check(&forged, &[ca.der()]), CertificateError::BadSignature);
}

#[test]
fn every_flipped_bit_of_the_signature_is_refused() {
    let ca = Ca::new("ca");
    let (v1, _) = ca.member(&Version1::new("node1", ca.name()));
    let parsed = parse(&v1).unwrap();
    let signature = parsed.signature_value.data.to_vec();
    let at = v1.as_ref().windows(signature.len()).position(|w| w == signature).unwrap();
    let mut checked = 0;
    for byte in at..at + signature.len() {
        for bit in 0..8 {
            let mut bad = v1.as_ref().to_vec();
            bad[byte] ^= 1 << bit;
            let bad = CertificateDer::from(bad);
            // A flip may break the DER itself; then webpki gets it and refuses it.
            if let Some(v1) = parse(&bad) {
                checked += 1;
                let result = verify(&v1, &[ca.der()], &algs(), UnixTime::now());
                assert!(result.is_err(), "flipped bit {bit} of byte {byte} accepted");
            }
        }
    }
    assert!(checked > 0, "no flip left a certificate to verify");
}

#[test]
fn a_changed_subject_is_refused() {
    let ca = Ca::new("ca");
    let (v1, _) = ca.member(&Version1::new("node1", ca.name()));
    let mut bad = v1.as_ref().to_vec();
    let at = bad.windows(5).position(|w| w == b"node1").unwrap();
    bad[at + 4] = b'2';
    refused_with(check(&CertificateDer::from(bad), &[ca.der()]), CertificateError::BadSignature);
}

#[test]
fn dates_are_checked() {
    let ca = Ca::new("ca");
    let mut spec = Version1::new("node1", ca.name());
    spec.dates = EXPIRED;
    let (expired, _) = ca.member(&spec);
    refused_with(check(&expired, &[ca.der()]), CertificateError::Expired);
    spec.dates = NOT_YET;
    let (early, _) = ca.member(&spec);
    refused_with(check(&early, &[ca.der()]), CertificateError::NotValidYet);
}

#[test]
fn the_algorithm_must_be_the_one_declared_inside_and_outside() {
    let ca = Ca::new("ca");
    let mut spec = Version1::new("node1", ca.name());
    // Signed with SHA-256, declared SHA-384 on both sides: no algorithm that
    // matches the declaration verifies it.
    spec.inner_algorithm = ECDSA_WITH_SHA384;
    spec.outer_algorithm = ECDSA_WITH_SHA384;
    let (mislabelled, _) = ca.member(&spec);
    refused_with(check(&mislabelled, &[ca.der()]), CertificateError::BadSignature);
    // The two declarations disagree.
    spec.inner_algorithm = ECDSA_WITH_SHA256;
    let (disagreeing, _) = ca.member(&spec);
    refused_with(check(&disagreeing, &[ca.der()]), CertificateError::BadSignature);
}

#[test]
fn a_self_signed_certificate_is_accepted_only_from_the_ca_file() {
    let key = KeyPair::generate().unwrap();
    let spec = Version1::new("node1", common_name("node1"));
    let own = CertificateDer::from(spec.build(&key, &key));
    assert_eq!(check(&own, std::slice::from_ref(&own)), Ok(()));
    let ca = Ca::new("ca");
    refused_with(check(&own, &[ca.der()]), CertificateError::UnknownIssuer);
}

/// TLS 1.2's path (TLS 1.3's is rustls's own, given the key: the TLS tests
/// of the group run it in real handshakes).
#[test]
fn tls12_handshake_signatures_are_verified_with_the_certificates_key() {
    let ca = Ca::new("ca");
    let (v1, key) = ca.member(&Version1::new("node1", ca.name()));
    let parsed = parse(&v1).unwrap();
    let spki = SubjectPublicKeyInfoDer::from(parsed.public_key().raw);
    let message = b"the transcript";
    let p256 = SignatureScheme::ECDSA_NISTP256_SHA256;
    let ours = key.sign(message).unwrap();
    assert!(verify_tls12(message, &spki, p256, &ours, &algs()).is_ok());
    let other_message = key.sign(b"another transcript").unwrap();
    assert!(verify_tls12(message, &spki, p256, &other_message, &algs()).is_err());
    let stranger = KeyPair::generate().unwrap().sign(message).unwrap();
    assert!(verify_tls12(message, &spki, p256, &stranger, &algs()).is_err());
    // A scheme that does not go with the key, and one nobody offered.
    assert!(verify_tls12(message, &spki, SignatureScheme::ED25519, &ours, &algs()).is_err());
    assert!(verify_tls12(message, &spki, SignatureScheme::Unknown(0xfefe), &ours, &algs()).is_err());
}

#[test]
fn an_algorithm_identifier_names_its_oid() {
    let sha256 = &ECDSA_WITH_SHA256[2..];
    let oid = &ECDSA_WITH_SHA256[4..];
    assert!(names_oid(sha256, oid));
    assert!(!names_oid(&ECDSA_WITH_SHA384[2..], oid));
    assert!(!names_oid(&[], oid));
    assert!(!names_oid(&[0x05, 0x00], oid));
    // A longer OID that starts with this one.
    assert!(!names_oid(&[0x06, 0x09, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03, 0x02, 0x01], oid));
}
