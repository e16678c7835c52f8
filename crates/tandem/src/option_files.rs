//! The server's option files, read as the server and its stock scripts
//! read them: `my_print_defaults` for the groups asked (later settings win),
//! and the `wsrep_provider_options` string split into its items. Used by
//! the SST method (its `[sst]` group and the group's TLS identity) and by
//! `tandem node` (where a host's server keeps its data and socket).

use anyhow::{bail, Context, Result};
use std::collections::BTreeMap;

/// `my_print_defaults ARGS GROUPS` as `key -> value`, keys with dashes
/// (`wsrep-provider-options`). `args` picks the files (`--defaults-file=F`
/// and friends; none: the server's own lookup, which honours `MYSQL_HOME`).
/// The tool comes with the server.
pub fn print_defaults(args: &[String], groups: &[&str]) -> Result<BTreeMap<String, String>> {
    let out = std::process::Command::new("my_print_defaults")
        .args(args)
        .args(groups)
        .stdin(std::process::Stdio::null())
        .output()
        .with_context(|| format!("running my_print_defaults {}", groups.join(" ")))?;
    if !out.status.success() {
        bail!("my_print_defaults {args:?} {groups:?} failed: {}", String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(parse_print_defaults(&String::from_utf8_lossy(&out.stdout)))
}

/// `--key=value` lines; `_` and `-` alike in keys, as the server takes them.
pub fn parse_print_defaults(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter_map(|l| l.strip_prefix("--"))
        .map(|l| match l.split_once('=') {
            Some((k, v)) => (k.replace('_', "-"), v.to_string()),
            None => (l.replace('_', "-"), String::new()),
        })
        .collect()
}

/// `k = v; k2 = v2`: the later of a repeated key wins, as the provider reads it.
pub fn parse_provider_options(text: &str) -> BTreeMap<String, String> {
    text.split(';')
        .filter_map(|item| item.split_once('='))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn print_defaults_output_is_read_with_dashes_and_the_last_setting_wins() {
        let m = parse_print_defaults(
            "--streams=3\n--idle_timeout=9\n--wsrep_provider_options=a=b;c=d\n--skip-x\n--datadir=/a\n--datadir=/b\n",
        );
        assert_eq!(m.get("streams").map(String::as_str), Some("3"));
        assert_eq!(m.get("idle-timeout").map(String::as_str), Some("9"));
        assert_eq!(m.get("wsrep-provider-options").map(String::as_str), Some("a=b;c=d"));
        assert_eq!(m.get("skip-x").map(String::as_str), Some(""));
        assert_eq!(m.get("datadir").map(String::as_str), Some("/b"));
    }

    #[test]
    fn provider_options_split_into_items_and_the_last_wins() {
        let m = parse_provider_options("gcache.size=1G; gcache.dir = cache ;gcache.size=2G;;junk");
        assert_eq!(m.get("gcache.size").map(String::as_str), Some("2G"));
        assert_eq!(m.get("gcache.dir").map(String::as_str), Some("cache"));
        assert_eq!(m.len(), 2);
    }
}
