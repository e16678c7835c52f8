//! Which modules of a crate need each other. A module needs another when
//! its source names it (`crate::other`, `use crate::{other, ..}`) or calls
//! a method of the shared type that the other module defines (an
//! `impl Node` block there): `node.submit(..)` needs `send.rs` without
//! naming it, and that is how a type spread over files hides a circle.
//!
//! Methods are matched by name, on calls through `self.` or `node.`; a
//! module that defines a function of the same name itself is taken to
//! call its own. Comments, literals and `#[cfg(test)]` modules do not
//! count.

use std::collections::BTreeMap;

use crate::{blank_out, is_ident, matching_brace};

/// A module of the crate: its name (`client` for `src/client.rs` and for
/// everything under `src/client/`) and its source, tests cut off.
pub struct Module {
    pub name: String,
    pub source: String,
}

/// What each module needs, by name, for a crate whose shared type is
/// `shared` (the methods of `impl <shared> {` blocks count as their
/// module's). Modules not in `modules` (external crates) are left out.
pub fn needs(modules: &[Module], shared: &str) -> BTreeMap<String, Vec<String>> {
    let texts: Vec<(String, String)> = modules.iter().map(|m| (m.name.clone(), blank_out(&m.source))).collect();
    let mut methods: BTreeMap<String, String> = BTreeMap::new();
    for (name, text) in &texts {
        for method in methods_of(text, shared) {
            methods.entry(method).or_insert_with(|| name.clone());
        }
    }
    let mut out = BTreeMap::new();
    for (name, text) in &texts {
        let own: Vec<String> = crate::functions(text).into_iter().map(|f| f.name).collect();
        let mut needed: Vec<String> =
            named_modules(text).into_iter().filter(|m| texts.iter().any(|(n, _)| n == m)).collect();
        for (method, home) in &methods {
            let called = ["self.", "node."].iter().any(|recv| calls(text, &format!("{recv}{method}(")));
            if home != name && called && !own.contains(method) {
                needed.push(home.clone());
            }
        }
        needed.retain(|m| m != name);
        needed.sort();
        needed.dedup();
        out.insert(name.clone(), needed);
    }
    out
}

/// Names of the functions in `impl <shared> {` blocks of `text` (blanked).
fn methods_of(text: &str, shared: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let opening = format!("impl {shared} {{");
    let mut found = Vec::new();
    for (at, _) in text.match_indices(&opening) {
        let open = text[..at + opening.len() - 1].chars().count();
        let Some(close) = matching_brace(&chars, open) else { continue };
        let block: String = chars[open..close].iter().collect();
        found.extend(crate::functions(&block).into_iter().map(|f| f.name));
    }
    found
}

/// The first path segment after every `crate::`, and each item of a
/// `crate::{a, b::C}` group.
fn named_modules(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    for (at, _) in text.match_indices("crate::") {
        if text[..at].chars().next_back().is_some_and(is_ident) {
            continue; // `tandem_crate::`, not ours
        }
        let rest = &text[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let inner = &group[..group.find('}').unwrap_or(group.len())];
            found.extend(inner.split(',').map(|item| first_segment(item.trim())));
        } else {
            found.push(first_segment(rest));
        }
    }
    found.retain(|m| !m.is_empty());
    found
}

fn first_segment(path: &str) -> String {
    path.chars().take_while(|c| is_ident(*c)).collect()
}

/// Whether `call` (`self.name(`) stands in `text` not as the tail of a
/// longer receiver (`inner_self.name(`).
fn calls(text: &str, call: &str) -> bool {
    text.match_indices(call).any(|(at, _)| !text[..at].chars().next_back().is_some_and(is_ident))
}

/// The circles among `needs`: each a list of modules that need each other
/// (strongly connected, more than one), sorted. Empty when the modules
/// form layers.
pub fn circles(needs: &BTreeMap<String, Vec<String>>) -> Vec<Vec<String>> {
    let names: Vec<&String> = needs.keys().collect();
    let reach = |from: &String| -> Vec<String> {
        let mut seen = vec![from.clone()];
        let mut todo = vec![from.clone()];
        while let Some(m) = todo.pop() {
            for next in needs.get(&m).into_iter().flatten() {
                if !seen.contains(next) {
                    seen.push(next.clone());
                    todo.push(next.clone());
                }
            }
        }
        seen
    };
    let reached: BTreeMap<&String, Vec<String>> = names.iter().map(|n| (*n, reach(n))).collect();
    let mut out: Vec<Vec<String>> = Vec::new();
    for name in &names {
        let mut circle: Vec<String> = names
            .iter()
            .filter(|o| reached[*name].contains(o) && reached[*o].contains(name))
            .map(|o| (*o).clone())
            .collect();
        circle.sort();
        if circle.len() > 1 && !out.contains(&circle) {
            out.push(circle);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn module(name: &str, source: &str) -> Module {
        Module { name: name.into(), source: source.into() }
    }

    #[test]
    fn layers_have_no_circle() {
        let modules = [
            module("node", "pub struct Node;\nimpl Node {\n    pub fn group(&self) {}\n}\n"),
            module("send", "use crate::node::Node;\nimpl Node {\n    pub fn send(&self) { self.group(); }\n}\n"),
            module(
                "client",
                "use crate::{node::Node, send};\nimpl Node {\n    fn certify(&self) { self.send(); }\n}\n",
            ),
        ];
        let needs = needs(&modules, "Node");
        assert_eq!(needs["client"], ["node", "send"]);
        assert_eq!(needs["send"], ["node"]);
        assert!(needs["node"].is_empty());
        assert!(circles(&needs).is_empty());
    }

    /// The circle a type spread over files hides: no import names `send`
    /// from `node`, but `node` calls a method `send.rs` defines.
    #[test]
    fn a_circle_through_methods_alone_is_found() {
        let modules = [
            module("node", "pub struct Node;\nimpl Node {\n    pub fn group(&self) {}\n    fn execute(&self) { self.submit(); }\n}\n"),
            module("send", "use crate::node::Node;\nimpl Node {\n    pub fn submit(&self) { self.group(); }\n}\n"),
            module("types", "pub struct Seqno;\n"),
        ];
        assert_eq!(circles(&needs(&modules, "Node")), [["node", "send"]]);
    }

    #[test]
    fn a_circle_through_imports_is_found_and_comments_do_not_count() {
        let modules = [
            module("a", "use crate::b::B;\npub struct A;\n"),
            module("b", "use crate::c::C;\npub struct B;\n"),
            module("c", "use crate::{a::A, d};\npub struct C;\n"),
            module("d", "// crate::a says so\nfn own(&self) { self.own(); }\n"),
        ];
        let needs = needs(&modules, "Node");
        assert!(needs["d"].is_empty(), "{needs:?}");
        assert_eq!(circles(&needs), [["a", "b", "c"]]);
    }

    /// A module that defines a function of the name calls its own.
    #[test]
    fn a_method_of_another_type_by_the_same_name_is_not_a_need() {
        let modules = [
            module("applier", "impl Node {\n    fn apply_write_set(&self) {}\n}\n"),
            module("group_state", "impl GroupState {\n    fn apply_write_set(&mut self) {}\n    fn apply(&mut self) { self.apply_write_set(); }\n}\n"),
        ];
        assert!(needs(&modules, "Node")["group_state"].is_empty());
    }
}
