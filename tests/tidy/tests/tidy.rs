//! The tree's own rules (DEVELOPERS.md, "Layout and style"), checked on
//! every `make test`:
//!
//! - Rust files of at most 800 lines, functions of at most 70;
//! - no locks, clocks or hash maps in the engine's pure core, whose
//!   decisions must not depend on threads, time or iteration order;
//! - every repository path the README names exists.
//!
//! What breaks a rule today is listed in `allowlist.txt`, with its size
//! now; the list may only shrink (see `tandem_tidy::judge`).

use std::path::{Path, PathBuf};

use tandem_tidy::{functions, judge, uses};

const MAX_FILE_LINES: usize = 800;
const MAX_FN_LINES: usize = 70;

/// The engine's pure core (crates/engine/src/lib.rs says which).
const PURE_CORE: [&str; 6] = [
    "crates/engine/src/core.rs",
    "crates/engine/src/group_state.rs",
    "crates/engine/src/certification.rs",
    "crates/engine/src/admission.rs",
    "crates/engine/src/retention.rs",
    "crates/engine/src/flow_control.rs",
];
const NOT_IN_PURE_CORE: [&str; 7] = ["Mutex", "RwLock", "Condvar", "Instant", "SystemTime", "HashMap", "HashSet"];

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().expect("the repository")
}

/// Every Rust file under crates/ and tests/, as a repository path.
fn rust_files() -> Vec<String> {
    let root = repo();
    let mut out = Vec::new();
    let mut dirs = vec![root.join("crates"), root.join("tests")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("a directory of the tree") {
            let path = entry.expect("an entry").path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path.strip_prefix(&root).expect("inside").to_string_lossy().into_owned());
            }
        }
    }
    out.sort();
    out
}

fn read(path: &str) -> String {
    std::fs::read_to_string(repo().join(path)).unwrap_or_else(|e| panic!("reading {path}: {e}"))
}

/// The allowlist's entries of `kind` (`file`, `fn`, `pure`): the key and
/// the number (for `pure`, 0).
fn allowlist(kind: &str) -> Vec<(String, usize)> {
    let text = read("tests/tidy/allowlist.txt");
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .filter_map(|l| {
            let mut words = l.split_whitespace();
            (words.next() == Some(kind)).then(|| {
                let key = words.next().expect("a key").to_string();
                let number = words.next().map_or(0, |n| n.parse().expect("a line count"));
                (key, number)
            })
        })
        .collect()
}

fn fail_on(errors: Vec<String>) {
    assert!(errors.is_empty(), "{} problem(s):\n{}", errors.len(), errors.join("\n"));
}

#[test]
fn files_stay_within_800_lines() {
    let found: Vec<(String, usize)> = rust_files()
        .into_iter()
        .map(|f| {
            let lines = read(&f).lines().count();
            (f, lines)
        })
        .collect();
    fail_on(judge(&found, &allowlist("file"), MAX_FILE_LINES, "file"));
}

#[test]
fn functions_stay_within_70_lines() {
    let mut found: Vec<(String, usize)> = Vec::new();
    for file in rust_files() {
        for f in functions(&read(&file)) {
            let key = format!("{file}::{}", f.name);
            // Several functions of one name in a file (methods of several
            // types): the longest speaks for them.
            match found.iter_mut().find(|(k, _)| *k == key) {
                Some((_, lines)) => *lines = (*lines).max(f.lines),
                None => found.push((key, f.lines)),
            }
        }
    }
    fail_on(judge(&found, &allowlist("fn"), MAX_FN_LINES, "fn"));
}

#[test]
fn the_pure_core_uses_no_locks_clocks_or_hash_maps() {
    let allowed = allowlist("pure");
    let mut errors = Vec::new();
    for file in PURE_CORE {
        let source = read(file);
        for word in NOT_IN_PURE_CORE {
            let key = format!("{file}:{word}");
            let lines = uses(&source, word);
            let listed = allowed.iter().any(|(k, _)| *k == key);
            if !lines.is_empty() && !listed {
                errors.push(format!(
                    "{file} uses {word} (lines {lines:?}): the pure core takes time as an input and keeps its order"
                ));
            }
            if lines.is_empty() && listed {
                errors.push(format!("{key} no longer used: remove its line from the allowlist"));
            }
        }
    }
    fail_on(errors);
}

/// Backquoted paths in the README that start with a directory of the
/// repository exist (globs and placeholders aside).
#[test]
fn the_readme_names_only_paths_that_exist() {
    let readme = read("README.md");
    let roots = ["crates/", "tests/", "docs/", "scripts/", "packaging/", ".ci/"];
    let mut missing = Vec::new();
    for quoted in readme.split('`').skip(1).step_by(2) {
        let path = quoted.split_whitespace().next().unwrap_or("");
        let plain = path.chars().all(|c| c.is_alphanumeric() || "_-./".contains(c));
        if plain && roots.iter().any(|r| path.starts_with(r)) && !repo().join(path).exists() {
            missing.push(path.to_string());
        }
    }
    missing.dedup();
    assert!(missing.is_empty(), "README.md names paths that do not exist: {missing:?}");
}
