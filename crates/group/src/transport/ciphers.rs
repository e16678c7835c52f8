//! `socket.ssl_cipher`: Galera's cipher list, read the way Galera's OpenSSL
//! reads it, onto the suites our TLS stack has.
//!
//! Galera hands the option to OpenSSL's cipher list, which governs TLS 1.2
//! and older only; TLS 1.3 keeps its suites whatever the list says. So two
//! Galera nodes with `socket.ssl_cipher=AES256-SHA` talk TLS 1.3 with
//! AES-GCM, not AES256-SHA. We keep that meaning: the list picks the TLS 1.2
//! suites, TLS 1.3 suites named in it (by their OpenSSL/IANA names) narrow
//! TLS 1.3 too, and a version none of whose suites is named keeps its
//! defaults (TLS 1.3) or is off (TLS 1.2).
//!
//! Our stack (rustls) has only AEAD suites with forward secrecy. A list
//! entry that is a cipher name we do not have (CBC, RSA key exchange, ...)
//! is reported, never silently replaced; an entry that cannot be a cipher
//! name at all is an error.

use rustls::crypto::ring::ALL_CIPHER_SUITES;
use rustls::{CipherSuite, SupportedCipherSuite};

/// The suites a cipher list selects, and what it named that we lack.
#[derive(Debug)]
pub struct CipherChoice {
    /// In the list's order of preference; empty list: our defaults.
    pub suites: Vec<SupportedCipherSuite>,
    /// Names (or OpenSSL selectors such as `HIGH`, `!aNULL`) we cannot honour.
    pub unavailable: Vec<String>,
}

/// OpenSSL's names of the TLS 1.2 suites we have (TLS 1.3 suites are named
/// alike by OpenSSL and IANA).
const OPENSSL_NAMES: &[(CipherSuite, &str)] = &[
    (CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384, "ECDHE-ECDSA-AES256-GCM-SHA384"),
    (CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, "ECDHE-ECDSA-AES128-GCM-SHA256"),
    (CipherSuite::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256, "ECDHE-ECDSA-CHACHA20-POLY1305"),
    (CipherSuite::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384, "ECDHE-RSA-AES256-GCM-SHA384"),
    (CipherSuite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, "ECDHE-RSA-AES128-GCM-SHA256"),
    (CipherSuite::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256, "ECDHE-RSA-CHACHA20-POLY1305"),
];

/// The names a suite answers to: IANA's, and OpenSSL's.
fn names(suite: &SupportedCipherSuite) -> Vec<String> {
    let id = suite.suite();
    // rustls spells TLS 1.3 suites "TLS13_…"; IANA and OpenSSL say "TLS_…".
    let iana = format!("{id:?}").replacen("TLS13_", "TLS_", 1);
    let mut all = vec![iana];
    all.extend(OPENSSL_NAMES.iter().filter(|(s, _)| *s == id).map(|(_, n)| n.to_string()));
    all
}

fn is_tls13(suite: &SupportedCipherSuite) -> bool {
    matches!(suite, SupportedCipherSuite::Tls13(_))
}

/// Reads a cipher list (entries separated by `:`, `,` or spaces).
pub fn choose(list: &str) -> Result<CipherChoice, String> {
    let mut named = Vec::new();
    let mut unavailable = Vec::new();
    for entry in list.split([':', ',', ' ']).map(str::trim).filter(|e| !e.is_empty()) {
        if !entry.chars().all(|c| c.is_ascii_alphanumeric() || "-_+!@=.".contains(c)) {
            return Err(format!("'{entry}' is not a cipher name"));
        }
        match ALL_CIPHER_SUITES.iter().find(|s| names(s).iter().any(|n| n.eq_ignore_ascii_case(entry))) {
            Some(suite) if !named.iter().any(|s: &SupportedCipherSuite| s.suite() == suite.suite()) => {
                named.push(*suite)
            }
            Some(_) => {}
            None => unavailable.push(entry.to_string()),
        }
    }
    if named.is_empty() && unavailable.is_empty() {
        return Ok(CipherChoice { suites: Vec::new(), unavailable });
    }
    // TLS 1.3 keeps its defaults unless the list names some of its suites.
    let mut suites = named.clone();
    if !named.iter().any(is_tls13) {
        let defaults = ALL_CIPHER_SUITES.iter().filter(|s| is_tls13(s)).copied();
        suites = defaults.chain(named).collect();
    }
    Ok(CipherChoice { suites, unavailable })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(choice: &CipherChoice) -> Vec<CipherSuite> {
        choice.suites.iter().map(|s| s.suite()).collect()
    }

    #[test]
    fn an_empty_list_keeps_the_defaults() {
        let choice = choose("").unwrap();
        assert!(choice.suites.is_empty() && choice.unavailable.is_empty());
    }

    #[test]
    fn openssl_and_iana_names_pick_tls12_suites_and_tls13_stays() {
        let choice = choose("ECDHE-RSA-AES256-GCM-SHA384:TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256").unwrap();
        let picked = ids(&choice);
        assert!(picked.contains(&CipherSuite::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384));
        assert!(picked.contains(&CipherSuite::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256));
        assert!(!picked.contains(&CipherSuite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256), "not named: {picked:?}");
        assert!(picked.contains(&CipherSuite::TLS13_AES_128_GCM_SHA256), "TLS 1.3 keeps its suites");
        assert!(choice.unavailable.is_empty());
    }

    #[test]
    fn a_named_tls13_suite_narrows_tls13() {
        let choice = choose("TLS_AES_256_GCM_SHA384").unwrap();
        assert_eq!(ids(&choice), vec![CipherSuite::TLS13_AES_256_GCM_SHA384]);
    }

    #[test]
    fn a_cipher_we_lack_is_reported_not_replaced_in_silence() {
        // MariaDB's galera_ssl_cipher test asks for AES256-SHA (CBC).
        let choice = choose("AES256-SHA").unwrap();
        assert_eq!(choice.unavailable, vec!["AES256-SHA".to_string()]);
        assert!(choice.suites.iter().all(is_tls13), "only TLS 1.3 is left: {:?}", ids(&choice));
        assert!(!choice.suites.is_empty());
    }

    #[test]
    fn garbage_is_an_error() {
        assert!(choose("AES256-SHA;DROP").is_err());
        assert!(choose("ECDHE/RSA").is_err());
    }

    #[test]
    fn repeats_are_taken_once() {
        let choice = choose("ECDHE-RSA-AES128-GCM-SHA256 ECDHE-RSA-AES128-GCM-SHA256").unwrap();
        let n = ids(&choice).iter().filter(|s| **s == CipherSuite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256).count();
        assert_eq!(n, 1);
    }
}
