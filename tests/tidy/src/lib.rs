//! The tidy checks' scanner: Rust source read as text, comments and
//! literals blanked out, functions found by their braces. Not a parser:
//! good enough for code that rustc accepts, which is all it ever reads.

pub mod modules;

/// `source` with comments, string and char literals replaced by spaces
/// (newlines kept, so line numbers still hold).
pub fn blank_out(source: &str) -> String {
    let chars: Vec<char> = source.chars().collect();
    let mut out = String::with_capacity(source.len());
    let mut i = 0;
    let keep_newlines = |c: char| if c == '\n' { '\n' } else { ' ' };
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                out.push(' ');
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    out.push(keep_newlines(chars[i]));
                    i += 1;
                }
            }
        } else if let Some(end) = raw_string_end(&chars, i) {
            for &c in &chars[i..end] {
                out.push(keep_newlines(c));
            }
            i = end;
        } else if c == '"' {
            out.push(' ');
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                let skip = if chars[i] == '\\' { 2 } else { 1 };
                for &c in chars.iter().skip(i).take(skip) {
                    out.push(keep_newlines(c));
                }
                i += skip;
            }
            out.push(' ');
            i += 1;
        } else if c == '\'' && char_literal_len(&chars, i).is_some() {
            let len = char_literal_len(&chars, i).unwrap_or(1);
            out.extend(std::iter::repeat_n(' ', len));
            i += len;
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

/// Where a raw string (`r"…"`, `r#"…"#`, `br#"…"#`) starting at `i` ends.
fn raw_string_end(chars: &[char], i: usize) -> Option<usize> {
    let mut j = i;
    if chars.get(j) == Some(&'b') {
        j += 1;
    }
    if chars.get(j) != Some(&'r') || (i > 0 && is_ident(chars[i - 1])) {
        return None;
    }
    j += 1;
    let hashes = chars[j..].iter().take_while(|c| **c == '#').count();
    j += hashes;
    if chars.get(j) != Some(&'"') {
        return None;
    }
    j += 1;
    while j < chars.len() {
        if chars[j] == '"' && chars[j + 1..].iter().take(hashes).filter(|c| **c == '#').count() == hashes {
            return Some(j + 1 + hashes);
        }
        j += 1;
    }
    Some(chars.len())
}

/// The length of a char literal at `i` (`'a'`, `'\n'`, `'\u{1F600}'`);
/// `None` for a lifetime or label (`'a`, `'static`).
fn char_literal_len(chars: &[char], i: usize) -> Option<usize> {
    match chars.get(i + 1)? {
        '\\' => {
            let close = chars[i + 2..].iter().position(|c| *c == '\'')?;
            Some(close + 3)
        }
        _ if chars.get(i + 2) == Some(&'\'') => Some(3),
        _ => None,
    }
}

pub(crate) fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// A function with a body: its name, first line and line count (1-based,
/// from the `fn` line to the closing brace's, both included).
#[derive(Debug, PartialEq, Eq)]
pub struct Function {
    pub name: String,
    pub line: usize,
    pub lines: usize,
}

/// Every function with a body in `source`, nested ones too.
pub fn functions(source: &str) -> Vec<Function> {
    let text = blank_out(source);
    let chars: Vec<char> = text.chars().collect();
    let line_of = line_starts(&chars);
    let mut found = Vec::new();
    let mut i = 0;
    while i + 2 < chars.len() {
        let is_fn = chars[i] == 'f'
            && chars[i + 1] == 'n'
            && chars[i + 2].is_whitespace()
            && (i == 0 || !is_ident(chars[i - 1]));
        if !is_fn {
            i += 1;
            continue;
        }
        let name: String =
            chars[i + 2..].iter().skip_while(|c| c.is_whitespace()).take_while(|c| is_ident(**c)).collect();
        if let Some(open) = body_start(&chars, i + 2) {
            if let Some(close) = matching_brace(&chars, open) {
                let (first, last) = (line_of(i), line_of(close));
                found.push(Function { name, line: first, lines: last - first + 1 });
            }
        }
        i += 2;
    }
    found
}

/// The `{` that opens the body of the `fn` whose signature starts at
/// `from`, or `None` for a declaration without one (`;` first). Braces in
/// the signature (const generic blocks) are rare enough to ignore.
fn body_start(chars: &[char], from: usize) -> Option<usize> {
    let mut paren = 0i32;
    for (j, c) in chars.iter().enumerate().skip(from) {
        match c {
            '(' | '[' => paren += 1,
            ')' | ']' => paren -= 1,
            '{' if paren == 0 => return Some(j),
            ';' if paren == 0 => return None,
            _ => {}
        }
    }
    None
}

pub(crate) fn matching_brace(chars: &[char], open: usize) -> Option<usize> {
    let mut depth = 0;
    for (j, c) in chars.iter().enumerate().skip(open) {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return Some(j);
                }
            }
            _ => {}
        }
    }
    None
}

/// Maps a char index to its 1-based line.
fn line_starts(chars: &[char]) -> impl Fn(usize) -> usize {
    let starts: Vec<usize> =
        std::iter::once(0).chain(chars.iter().enumerate().filter(|(_, c)| **c == '\n').map(|(i, _)| i + 1)).collect();
    move |at| starts.partition_point(|s| *s <= at)
}

/// Whether `word` stands in `source` as an identifier, outside comments and
/// literals: the line numbers where it does.
pub fn uses(source: &str, word: &str) -> Vec<usize> {
    let text = blank_out(source);
    text.lines()
        .enumerate()
        .filter(|(_, line)| {
            line.match_indices(word).any(|(at, _)| {
                let before = line[..at].chars().next_back();
                let after = line[at + word.len()..].chars().next();
                !before.is_some_and(is_ident) && !after.is_some_and(is_ident)
            })
        })
        .map(|(n, _)| n + 1)
        .collect()
}

/// The inputs of a state machine that do not check its invariants after
/// they ran: every `pub fn` of `source` that takes `&mut self` must call one
/// of `checks` (names of the checking methods) in its body. Returns the
/// names of those that do not.
pub fn unchecked_inputs(source: &str, checks: &[&str]) -> Vec<String> {
    let text = blank_out(source);
    let lines: Vec<&str> = text.lines().collect();
    functions(source)
        .into_iter()
        .filter(|f| {
            let whole = lines[f.line - 1..f.line - 1 + f.lines].join("\n");
            let Some(open) = whole.find('{') else { return false };
            let (signature, body) = whole.split_at(open);
            let input = signature.trim_start().starts_with("pub fn ") && signature.contains("&mut self");
            input && !checks.iter().any(|c| body.contains(&format!("self.{c}(")))
        })
        .map(|f| f.name)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_input_that_does_not_check_is_found() {
        let src = "impl Core {\n    pub fn on_a(&mut self) {\n        self.x = 1;\n        self.checked();\n    }\n\
                   \n    pub fn on_b(&mut self) -> u32 {\n        // self.checked();\n        self.x = 2;\n        2\n    }\n\
                   \n    pub fn query(&self) -> u32 {\n        self.x\n    }\n\
                   \n    fn helper(&mut self) {\n        self.x = 3;\n    }\n}\n";
        assert_eq!(unchecked_inputs(src, &["checked"]), vec!["on_b".to_string()]);
        assert!(unchecked_inputs(src, &["checked", "helper"]).contains(&"on_b".to_string()));
    }

    #[test]
    fn comments_and_literals_hide_their_braces_and_words() {
        let src = "fn a() { let s = \"}{ fn b() {\"; // fn c() {\n let c = '}'; /* { */ let r = r#\"{\"#; }\n";
        let found = functions(src);
        assert_eq!(found, vec![Function { name: "a".into(), line: 1, lines: 2 }]);
        assert!(uses("let m = \"HashMap\"; // HashMap", "HashMap").is_empty());
        assert_eq!(uses("use std::collections::HashMap;", "HashMap"), vec![1]);
        assert!(uses("type MyHashMap = ();", "HashMap").is_empty(), "a part of another name");
    }

    #[test]
    fn functions_are_measured_from_fn_to_the_closing_brace() {
        let src = "trait T {\n    fn decl(&self);\n    fn with_body(&self) -> u32 {\n        1\n    }\n}\n\nfn outer<'a>(x: &'a str) -> &'a str {\n    fn inner() {}\n    x\n}\n";
        let found = functions(src);
        assert_eq!(
            found,
            vec![
                Function { name: "with_body".into(), line: 3, lines: 3 },
                Function { name: "outer".into(), line: 8, lines: 4 },
                Function { name: "inner".into(), line: 9, lines: 1 },
            ]
        );
    }

    #[test]
    fn lifetimes_are_not_char_literals() {
        let src = "fn f<'a>(x: &'a u8) -> &'a u8 {\n    x\n}\n";
        assert_eq!(functions(src), vec![Function { name: "f".into(), line: 1, lines: 3 }]);
    }
}

/// What the allowlist grants: a key (a file, or a file and a function) and
/// the most lines it may have. It may only shrink: a key over its number,
/// or over the limit without an entry, fails; so does an entry no longer
/// needed, which must then go.
pub fn judge(found: &[(String, usize)], allowed: &[(String, usize)], limit: usize, what: &str) -> Vec<String> {
    let mut errors = Vec::new();
    for (key, lines) in found {
        let entry = allowed.iter().find(|(k, _)| k == key);
        match entry {
            None if *lines > limit => errors
                .push(format!("{what} {key}: {lines} lines, more than {limit}; split it (the allowlist only shrinks)")),
            Some((_, most)) if lines > most => errors.push(format!(
                "{what} {key}: {lines} lines, more than the {most} the allowlist grants; it may only shrink"
            )),
            _ => {}
        }
    }
    for (key, most) in allowed {
        let now = found.iter().find(|(k, _)| k == key).map(|(_, n)| *n);
        if now.is_none_or(|n| n <= limit) {
            errors.push(format!(
                "{what} {key}: allowlisted for {most} lines but {}: remove its line from the allowlist",
                now.map_or("gone".to_string(), |n| format!("{n} now, within {limit}"))
            ));
        } else if now.is_some_and(|n| n < *most) {
            errors.push(format!(
                "{what} {key}: {} lines now, the allowlist says {most}: lower it to {}",
                now.unwrap_or(0),
                now.unwrap_or(0)
            ));
        }
    }
    errors
}

#[cfg(test)]
mod judge_tests {
    use super::judge;

    fn entries(list: &[(&str, usize)]) -> Vec<(String, usize)> {
        list.iter().map(|(k, n)| (k.to_string(), *n)).collect()
    }

    #[test]
    fn the_allowlist_only_shrinks() {
        let allowed = entries(&[("a.rs", 900), ("b.rs", 850)]);
        assert!(judge(&entries(&[("a.rs", 900), ("b.rs", 850), ("c.rs", 10)]), &allowed, 800, "file").is_empty());
        let grown = judge(&entries(&[("a.rs", 901), ("b.rs", 850)]), &allowed, 800, "file");
        assert_eq!(grown.len(), 1, "{grown:?}");
        assert!(grown[0].contains("a.rs: 901 lines, more than the 900"));
        let new = judge(&entries(&[("a.rs", 900), ("b.rs", 850), ("c.rs", 801)]), &allowed, 800, "file");
        assert!(new.len() == 1 && new[0].contains("c.rs: 801 lines, more than 800"), "{new:?}");
        let shrunk = judge(&entries(&[("a.rs", 880), ("b.rs", 700)]), &allowed, 800, "file");
        assert_eq!(shrunk.len(), 2, "{shrunk:?}");
        assert!(shrunk[0].contains("lower it to 880"));
        assert!(shrunk[1].contains("remove its line"));
        let gone = judge(&entries(&[("a.rs", 900)]), &allowed, 800, "file");
        assert!(gone.len() == 1 && gone[0].contains("b.rs") && gone[0].contains("gone"), "{gone:?}");
    }
}
