//! Test lists: `--list FILE` and test names on the command line.

use anyhow::{bail, Context, Result};
use std::path::Path;

/// The tests named in a list file: the first word of each line. Blank lines
/// and lines whose first word starts with `#` are skipped; `#` inside a word
/// is part of the name (`galera.galera#505`, `galera.mysql-wsrep#201`).
pub fn parse_list(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|line| line.split_whitespace().next())
        .filter(|word| !word.starts_with('#'))
        .map(str::to_string)
        .collect()
}

pub fn read_list(path: &Path) -> Result<Vec<String>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read the test list {}", path.display()))?;
    let tests = parse_list(&text);
    if tests.is_empty() {
        bail!("the test list {} names no test", path.display());
    }
    Ok(tests)
}

/// `basic` -> `galera.basic` (for `default_suite` "galera"); `suite.name`
/// stays. Duplicates are dropped, the first occurrence keeps its place.
pub fn qualify(tests: &[String], default_suite: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::with_capacity(tests.len());
    for t in tests {
        let name = if t.contains('.') { t.clone() } else { format!("{default_suite}.{t}") };
        if !out.contains(&name) {
            out.push(name);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_file_keeps_hash_inside_names() {
        let text = "# header comment\n\
                    galera.basic\n\
                    \n\
                    \tgalera.galera#505   # trailing comment\n\
                    #galera.commented_out\n\
                    galera.mysql-wsrep#201 extra words\n\
                    fk\n\
                    # another comment\n\
                    galera_3nodes.galera_ipv6_mariabackup";
        assert_eq!(
            parse_list(text),
            [
                "galera.basic",
                "galera.galera#505",
                "galera.mysql-wsrep#201",
                "fk",
                "galera_3nodes.galera_ipv6_mariabackup"
            ]
        );
    }

    #[test]
    fn bare_names_get_the_default_suite() {
        let tests = ["basic", "galera_3nodes.x", "galera.basic", "fk"].map(String::from);
        assert_eq!(qualify(&tests, "galera"), ["galera.basic", "galera_3nodes.x", "galera.fk"]);
    }

    #[test]
    fn ci_list_reads() {
        let ci = include_str!("../../../../tests/mtr/ci.txt");
        let tests = parse_list(ci);
        assert!(tests.contains(&"galera.basic".to_string()), "{tests:?}");
        assert!(
            tests.iter().all(|t| ["galera.", "galera_3nodes.", "galera_sr."].iter().any(|s| t.starts_with(s))),
            "every entry names its suite: {tests:?}"
        );
    }

    #[test]
    fn missing_list_is_a_clear_error() {
        let err = read_list(Path::new("/nonexistent/list.txt")).unwrap_err();
        assert!(format!("{err:#}").contains("cannot read the test list /nonexistent/list.txt"), "{err:#}");
    }
}
