//! The tree's own rules (DEVELOPERS.md, "Layout and style"), checked on
//! every `make test`:
//!
//! - Rust files of at most 800 lines, functions of at most 70;
//! - no locks, clocks or hash maps in the engine's pure core, whose
//!   decisions must not depend on threads, time or iteration order;
//! - every input of the node's core checks its invariants after it ran;
//! - the group's API (crates/group-api) depends on serde alone;
//! - in the group crate, no clock but tokio's, no hash map and no random
//!   draw but `entropy`'s: a simulation's seed must decide all of it;
//! - no two modules of the engine need each other (`tandem_tidy::modules`);
//! - every repository path the README names exists;
//! - the shipped CLI (crates/tandem) stays within 8,000 lines of source,
//!   the lab's tools (bench, MTR) living in crates/lab;
//! - commit subjects of at most 72 characters, from the rule's start on.
//!
//! What breaks a rule today is listed in `allowlist.txt`, with its size
//! now; the list may only shrink (see `tandem_tidy::judge`).

use std::path::{Path, PathBuf};

use tandem_tidy::modules::Module;
use tandem_tidy::{functions, judge, unchecked_inputs, uses};

const MAX_FILE_LINES: usize = 800;
const MAX_FN_LINES: usize = 70;
const MAX_SUBJECT_CHARS: usize = 72;
/// What operators install (`tandem`: cluster, node, sst, arbitrator,
/// remote) is kept small; what only the project runs goes to crates/lab.
const MAX_SHIPPED_CLI_LINES: usize = 8_000;
/// The rule on subjects holds for commits made after this one's time
/// (ffaeca8, 2026-11-28 11:16:46 UTC, the last commit before it). A time,
/// not a hash, so that a shallow clone checks what it has.
const SUBJECT_RULE_AFTER: u64 = 1_795_864_606;

/// The engine's pure core (crates/engine/src/lib.rs says which), besides
/// the files of crates/engine/src/core/.
const PURE_CORE: [&str; 6] = [
    "crates/engine/src/core.rs",
    "crates/engine/src/group_state.rs",
    "crates/engine/src/certification.rs",
    "crates/engine/src/admission.rs",
    "crates/engine/src/retention.rs",
    "crates/engine/src/flow_control.rs",
];
/// `tandem_group`: the pure core speaks to the group through the leaf crate
/// `tandem_group_api` only, which has no runtime behind it.
const NOT_IN_PURE_CORE: [&str; 8] =
    ["Mutex", "RwLock", "Condvar", "Instant", "SystemTime", "HashMap", "HashSet", "tandem_group"];

/// What the group crate may not use outside its tests, so that a seed
/// decides everything a simulation of it does (docs/simulation.md):
/// clocks other than tokio's (a paused runtime would not stop them), hash
/// maps (their order is random per map), and random draws other than
/// `crate::entropy`'s. `std::time::Instant` stands for std's `Instant`
/// however it is named on a line that says `std::time::`, braces included.
const NOT_IN_THE_GROUP: [&str; 6] = ["std::time::Instant", "thread::sleep", "SystemTime", "HashMap", "HashSet", "rand"];

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
    for file in pure_core() {
        let file = file.as_str();
        let source = read(file);
        for word in NOT_IN_PURE_CORE {
            let key = format!("{file}:{word}");
            let lines = uses(&source, word);
            let listed = allowed.iter().any(|(k, _)| *k == key);
            if !lines.is_empty() && !listed {
                errors.push(format!(
                    "{file} uses {word} (lines {lines:?}): the pure core takes time as an input, keeps its \
                     order, and knows the group by its API alone"
                ));
            }
            if lines.is_empty() && listed {
                errors.push(format!("{key} no longer used: remove its line from the allowlist"));
            }
        }
    }
    fail_on(errors);
}

fn pure_core() -> Vec<String> {
    let core = rust_files().into_iter().filter(|f| f.starts_with("crates/engine/src/core/"));
    PURE_CORE.iter().map(|f| f.to_string()).chain(core).collect()
}

/// The methods of `NodeCore` that check its invariants (core/invariants.rs),
/// and `with_announcements`, which ends in one of them.
const INVARIANT_CHECKS: [&str; 5] =
    ["checked", "checked_into", "checked_ordered", "checked_restored", "with_announcements"];

#[test]
fn every_input_of_the_core_checks_its_invariants() {
    let files: Vec<String> = std::iter::once("crates/engine/src/core.rs".to_string())
        .chain(rust_files().into_iter().filter(|f| f.starts_with("crates/engine/src/core/")))
        .filter(|f| !f.ends_with("/invariants.rs"))
        .collect();
    assert!(files.len() > 1, "the core's files: {files:?}");
    let errors: Vec<String> = files
        .iter()
        .flat_map(|file| {
            unchecked_inputs(&read(file), &INVARIANT_CHECKS).into_iter().map(move |name| {
                format!("{file}: `{name}` changes the core without checking its invariants (core/invariants.rs)")
            })
        })
        .collect();
    fail_on(errors);
}

/// What the engine and the group say to each other needs no runtime, no
/// consensus library and no I/O: a leaf the engine's pure core builds on.
#[test]
fn the_group_api_depends_on_serde_alone() {
    let manifest = read("crates/group-api/Cargo.toml");
    let section = manifest.split("[dependencies]").nth(1).expect("a [dependencies] section");
    let deps: Vec<&str> = section
        .lines()
        .take_while(|l| !l.trim_start().starts_with('['))
        .filter_map(|l| l.split(['=', '.']).next().map(str::trim).filter(|n| !n.is_empty() && !n.starts_with('#')))
        .collect();
    assert_eq!(deps, ["serde"], "crates/group-api/Cargo.toml");
}

#[test]
fn the_group_takes_time_order_and_chance_only_from_what_a_simulation_drives() {
    let allowed = allowlist("group");
    let mut errors = Vec::new();
    let group = rust_files().into_iter().filter(|f| f.starts_with("crates/group/src/") && !f.ends_with("tests.rs"));
    let mut used = Vec::new();
    for file in group {
        let source = read(&file);
        for word in NOT_IN_THE_GROUP {
            let lines = match word {
                "std::time::Instant" => std_instants(without_tests(&source)),
                _ => uses(without_tests(&source), word),
            };
            let key = format!("{file}:{word}");
            if lines.is_empty() {
                continue;
            }
            used.push(key.clone());
            if !allowed.iter().any(|(k, _)| *k == key) {
                errors.push(format!(
                    "{file} uses {word} (lines {lines:?}): a seed must decide what the group does (docs/simulation.md)"
                ));
            }
        }
    }
    for (key, _) in &allowed {
        if !used.contains(key) {
            errors.push(format!("{key} no longer used: remove its line from the allowlist"));
        }
    }
    fail_on(errors);
}

/// Lines that name std's `Instant`: `Instant` as a word on a line that
/// says `std::time::` (`use std::time::{Duration, Instant};` too).
fn std_instants(source: &str) -> Vec<usize> {
    let instants = uses(source, "Instant");
    let std_time = tandem_tidy::blank_out(source);
    let std_lines: Vec<usize> =
        std_time.lines().enumerate().filter(|(_, l)| l.contains("std::time::")).map(|(n, _)| n + 1).collect();
    instants.into_iter().filter(|n| std_lines.contains(n)).collect()
}

/// A file's source up to its unit tests (`#[cfg(test)] mod ...`, last in
/// the file by this tree's habit).
fn without_tests(source: &str) -> &str {
    let mut at = 0;
    let mut lines = source.split_inclusive('\n').peekable();
    while let Some(line) = lines.next() {
        if line.trim() == "#[cfg(test)]" && lines.peek().is_some_and(|l| l.trim_start().starts_with("mod ")) {
            return &source[..at];
        }
        at += line.len();
    }
    source
}

/// The engine's modules form layers: none needs a module that needs it,
/// through imports or through the methods of `Node` it calls, which are
/// spread over the shell's files (crates/engine/src/node.rs lists the
/// layers).
#[test]
fn no_two_engine_modules_need_each_other() {
    let src = repo().join("crates/engine/src");
    let mut modules: Vec<Module> = Vec::new();
    for file in rust_files().into_iter().filter(|f| f.starts_with("crates/engine/src/")) {
        let inside = file.strip_prefix("crates/engine/src/").expect("under src");
        let name = inside.split('/').next().expect("a name").trim_end_matches(".rs").to_string();
        if name == "lib" || name.ends_with("_tests") {
            continue;
        }
        let source = without_tests(&read(&file)).to_string();
        match modules.iter_mut().find(|m| m.name == name) {
            Some(m) => m.source.push_str(&source),
            None => modules.push(Module { name, source }),
        }
    }
    assert!(src.join("node.rs").exists() && modules.len() > 20, "the engine's modules: {}", modules.len());
    let needs = tandem_tidy::modules::needs(&modules, "Node");
    assert!(needs["client"].contains(&"node".to_string()), "the scan sees client.rs need node.rs: {needs:?}");
    let circles = tandem_tidy::modules::circles(&needs);
    assert!(
        circles.is_empty(),
        "modules of crates/engine that need each other (each through an import or a Node method it calls): \
         {circles:?}\n{}",
        circles.iter().flatten().map(|m| format!("  {m} needs {:?}", needs[m])).collect::<Vec<_>>().join("\n")
    );
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

#[test]
fn the_shipped_cli_stays_within_8000_lines() {
    let cli: Vec<String> = rust_files().into_iter().filter(|f| f.starts_with("crates/tandem/src/")).collect();
    assert!(!cli.is_empty(), "no source found under crates/tandem/src");
    let lines: usize = cli.iter().map(|f| read(f).lines().count()).sum();
    assert!(
        lines <= MAX_SHIPPED_CLI_LINES,
        "crates/tandem/src holds {lines} lines, over {MAX_SHIPPED_CLI_LINES}: what operators do not run belongs in crates/lab"
    );
}

/// `git log` and `git blame` read one line per commit: the subject says
/// what changed in at most 72 characters, the body says the rest. Outside a
/// git checkout (a source tarball) there is no history to check.
#[test]
fn commit_subjects_stay_within_72_characters() {
    let log = std::process::Command::new("git")
        .current_dir(repo())
        .args(["log", "--format=%h%x09%ct%x09%s", "HEAD"])
        .output();
    let out = match log {
        Ok(out) if out.status.success() => out.stdout,
        Ok(out) => {
            let why = String::from_utf8_lossy(&out.stderr);
            assert!(why.contains("not a git repository"), "git log failed: {why}");
            return eprintln!("not a git checkout: no commit subjects to check");
        }
        Err(e) => return eprintln!("no git here ({e}): no commit subjects to check"),
    };
    let text = String::from_utf8(out).expect("git log speaks UTF-8");
    let long: Vec<String> = text
        .lines()
        .filter_map(|line| {
            let mut fields = line.splitn(3, '\t');
            let (hash, time, subject) = (fields.next()?, fields.next()?, fields.next()?);
            let after = time.parse::<u64>().expect("a commit time") > SUBJECT_RULE_AFTER;
            let chars = subject.chars().count();
            (after && chars > MAX_SUBJECT_CHARS).then(|| format!("{hash}: {chars} characters: {subject}"))
        })
        .collect();
    assert!(long.is_empty(), "commit subjects over {MAX_SUBJECT_CHARS} characters:\n{}", long.join("\n"));
}
