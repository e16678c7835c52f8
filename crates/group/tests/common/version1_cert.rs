//! X.509 version 1 certificates for tests, as `openssl x509 -req` without an
//! extensions file issues them (rcgen writes version 3 only). ECDSA P-256
//! keys, signed with ecdsa-with-SHA256. Shared by the group's unit tests
//! (`transport/version1_tests.rs`) and its TLS tests.
#![allow(dead_code)]

use rcgen::{KeyPair, PublicKeyData, SigningKey};

/// ecdsa-with-SHA256 (1.2.840.10045.4.3.2) as an AlgorithmIdentifier.
pub const ECDSA_WITH_SHA256: &[u8] = &[0x30, 0x0a, 0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03, 0x02];
/// ecdsa-with-SHA384 (1.2.840.10045.4.3.3) as an AlgorithmIdentifier.
pub const ECDSA_WITH_SHA384: &[u8] = &[0x30, 0x0a, 0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03, 0x03];

/// Valid from 2020 to 2049 (UTCTime, as OpenSSL writes dates before 2050).
pub const VALID_NOW: (&str, &str) = ("200101000000Z", "491231235959Z");
/// Valid only in 2020.
pub const EXPIRED: (&str, &str) = ("200101000000Z", "201231235959Z");
/// Valid from 2048 on.
pub const NOT_YET: (&str, &str) = ("480101000000Z", "491231235959Z");

/// One DER element.
pub fn der(tag: u8, content: &[u8]) -> Vec<u8> {
    let mut out = vec![tag];
    let len = content.len();
    if len < 0x80 {
        out.push(len as u8);
    } else {
        let bytes = len.to_be_bytes();
        let skip = bytes.iter().take_while(|b| **b == 0).count();
        out.push(0x80 | (bytes.len() - skip) as u8);
        out.extend_from_slice(&bytes[skip..]);
    }
    out.extend_from_slice(content);
    out
}

fn sequence(parts: &[&[u8]]) -> Vec<u8> {
    der(0x30, &parts.concat())
}

/// A Name with one common name.
pub fn common_name(cn: &str) -> Vec<u8> {
    let attribute = sequence(&[&der(0x06, &[0x55, 0x04, 0x03]), &der(0x0c, cn.as_bytes())]);
    sequence(&[&der(0x31, &attribute)])
}

/// What a version 1 certificate is made of; `build` signs it.
pub struct Version1 {
    pub subject: Vec<u8>,
    pub issuer: Vec<u8>,
    pub dates: (&'static str, &'static str),
    /// The algorithm inside the signed part.
    pub inner_algorithm: &'static [u8],
    /// The algorithm beside the signature (the same, in a sound certificate).
    pub outer_algorithm: &'static [u8],
}

impl Version1 {
    /// A certificate for `subject`, issued by the holder of the Name `issuer`.
    pub fn new(subject: &str, issuer: Vec<u8>) -> Version1 {
        Version1 {
            subject: common_name(subject),
            issuer,
            dates: VALID_NOW,
            inner_algorithm: ECDSA_WITH_SHA256,
            outer_algorithm: ECDSA_WITH_SHA256,
        }
    }

    /// The certificate of `key`, signed with `signer` (the issuer's key), DER.
    pub fn build(&self, key: &KeyPair, signer: &KeyPair) -> Vec<u8> {
        let validity = sequence(&[&der(0x17, self.dates.0.as_bytes()), &der(0x17, self.dates.1.as_bytes())]);
        // No [0] version field: version 1.
        let tbs = sequence(&[
            &der(0x02, &[0x01]),
            self.inner_algorithm,
            &self.issuer,
            &validity,
            &self.subject,
            &key.subject_public_key_info(),
        ]);
        let signature = signer.sign(&tbs).expect("signing");
        let mut bits = vec![0u8];
        bits.extend_from_slice(&signature);
        sequence(&[&tbs, self.outer_algorithm, &der(0x03, &bits)])
    }
}

/// DER as PEM.
pub fn pem(der: &[u8]) -> String {
    pem::encode(&pem::Pem::new("CERTIFICATE", der))
}
