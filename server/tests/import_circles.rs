//! No two source files of the workspace's crates import each other, directly or around a
//! circle. A circle means neither file can be read, tested or moved without the other; the
//! layout in `docs/ARCHITECTURE.md` promises there are none, and this test keeps it true.
//!
//! The graph is read from the source text, file by file: an edge from file A to file B when A
//! names an item defined in B (a `use`, or a path in code from `crate::`, `super::`, `self::`
//! or a child module). A `pub use` is not an edge of its own: names are followed through re-exports
//! to the file that defines them, so an index `mod.rs` that re-exports its children sits in no
//! circle. A folder is read as one unit: a module and the files under it may use each other
//! (a `mod.rs` holds what its files share), but files side by side, or in different folders,
//! may not go round. Comments, strings and `#[cfg(test)]` modules are left out: a test may reach anywhere.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

#[test]
fn no_source_file_imports_a_file_that_imports_it_back() {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut report = String::new();
    for (krate, root) in [
        ("engine", "engine/src/lib.rs"),
        ("app", "app/src/lib.rs"),
        ("server", "server/src/main.rs"),
    ] {
        let graph = Crate::read(&workspace.join(root));
        for circle in graph.circles() {
            report.push_str(&format!("\n{krate}: a circle of {} files\n", circle.len()));
            for (from, to, names) in graph.edges_within(&circle) {
                report.push_str(&format!("  {from} -> {to} ({})\n", names.join(", ")));
            }
        }
    }
    assert!(
        report.is_empty(),
        "files that import each other (give what both need a file of its own):{report}"
    );
}

/// A module's path from the crate root: `["driver", "turn", "flow"]`.
type ModPath = Vec<String>;

/// One crate's files and the names each uses from another.
struct Crate {
    /// Each module's code, with comments, strings and test modules removed.
    code: BTreeMap<ModPath, String>,
    /// Where each module's file is, for the report.
    files: BTreeMap<ModPath, String>,
}

impl Crate {
    fn read(root_file: &Path) -> Crate {
        let src = root_file.parent().expect("a crate root lies in src/");
        let mut crate_ = Crate {
            code: BTreeMap::new(),
            files: BTreeMap::new(),
        };
        for file in rust_files(src) {
            let relative = file.strip_prefix(src).expect("under src/");
            let mut path: ModPath = relative
                .with_extension("")
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            match path.last().map(String::as_str) {
                Some("mod") => {
                    path.pop();
                }
                Some("lib" | "main") if path.len() == 1 => {
                    if file != root_file {
                        continue;
                    }
                    path.pop();
                }
                _ => {}
            }
            let text = fs::read_to_string(&file).expect("a source file reads");
            crate_.code.insert(path.clone(), strip(&text));
            crate_
                .files
                .insert(path, relative.to_string_lossy().into_owned());
        }
        crate_
    }

    /// Every edge: from file, to file, the names it takes.
    fn edges(&self) -> BTreeMap<(ModPath, ModPath), BTreeSet<String>> {
        let mut edges: BTreeMap<(ModPath, ModPath), BTreeSet<String>> = BTreeMap::new();
        for (module, code) in &self.code {
            let children: Vec<&str> = self
                .code
                .keys()
                .filter(|m| m.len() == module.len() + 1 && m.starts_with(module))
                .filter_map(|m| m.last().map(String::as_str))
                .collect();
            for (path, public) in paths_in(code, &children) {
                if public {
                    continue;
                }
                let Some(segments) = self.absolute(module, &path) else {
                    continue;
                };
                let Some((target, name)) = self.resolve(segments, 0) else {
                    continue;
                };
                // A folder is one unit: its index and its files may use each other.
                if !target.starts_with(module) && !module.starts_with(&target) {
                    edges
                        .entry((module.clone(), target))
                        .or_default()
                        .insert(name.unwrap_or_else(|| path.join("::")));
                }
            }
        }
        edges
    }

    /// A path as written in `module`, from the crate root; `None` for another crate's.
    fn absolute(&self, module: &ModPath, path: &[String]) -> Option<Vec<String>> {
        let (first, rest) = path.split_first()?;
        let mut base = match first.as_str() {
            "crate" => Vec::new(),
            "self" => module.clone(),
            "super" => {
                let mut base = module.clone();
                base.pop();
                let mut rest = rest;
                while rest.first().map(String::as_str) == Some("super") {
                    base.pop();
                    rest = &rest[1..];
                }
                base.extend(rest.iter().cloned());
                return Some(base);
            }
            _ => {
                let mut child = module.clone();
                child.push(first.clone());
                if !self.code.contains_key(&child) {
                    return None;
                }
                module.clone()
            }
        };
        if !matches!(first.as_str(), "crate" | "self") {
            base.push(first.clone());
        }
        base.extend(rest.iter().cloned());
        Some(base)
    }

    /// The module that defines what `segments` names, and the item's name: the deepest module
    /// file on the path, followed through that file's `pub use` of the name.
    fn resolve(&self, segments: Vec<String>, depth: usize) -> Option<(ModPath, Option<String>)> {
        let mut module: ModPath = Vec::new();
        let mut rest = segments.as_slice();
        while let Some((first, tail)) = rest.split_first() {
            let mut next = module.clone();
            next.push(first.clone());
            if !self.code.contains_key(&next) {
                break;
            }
            module = next;
            rest = tail;
        }
        let Some(name) = rest.first() else {
            return Some((module, None));
        };
        if depth < 8 {
            let code = self.code.get(&module)?;
            for (path, public) in paths_in(code, &[]) {
                if public
                    && path.last() == Some(name)
                    && let Some(target) = self.absolute(&module, &path)
                {
                    return self.resolve(target, depth + 1);
                }
            }
            if !defines(code, name) {
                for (path, public) in paths_in(code, &[]) {
                    if public && path.last().map(String::as_str) == Some("*") {
                        let glob = &path[..path.len() - 1];
                        if let Some(mut target) = self.absolute(&module, glob) {
                            target.push(name.clone());
                            if let Some(found) = self.resolve(target, depth + 1)
                                && self.code.get(&found.0).is_some_and(|c| defines(c, name))
                            {
                                return Some(found);
                            }
                        }
                    }
                }
            }
        }
        Some((module, Some(name.clone())))
    }

    /// Each strongly connected set of more than one file (Tarjan's algorithm).
    fn circles(&self) -> Vec<BTreeSet<ModPath>> {
        let edges = self.edges();
        let mut next: BTreeMap<&ModPath, Vec<&ModPath>> = BTreeMap::new();
        for (from, to) in edges.keys() {
            next.entry(from).or_default().push(to);
        }
        let mut tarjan = Tarjan::default();
        for module in self.code.keys() {
            if !tarjan.index.contains_key(module) {
                tarjan.visit(module, &next);
            }
        }
        tarjan.components.retain(|c| c.len() > 1);
        tarjan.components
    }

    /// The edges between files of one circle, named by file, with the names they take.
    fn edges_within(&self, circle: &BTreeSet<ModPath>) -> Vec<(String, String, Vec<String>)> {
        self.edges()
            .into_iter()
            .filter(|((from, to), _)| circle.contains(from) && circle.contains(to))
            .map(|((from, to), names)| {
                (
                    self.files[&from].clone(),
                    self.files[&to].clone(),
                    names.into_iter().collect(),
                )
            })
            .collect()
    }
}

#[derive(Default)]
struct Tarjan {
    index: BTreeMap<ModPath, usize>,
    low: BTreeMap<ModPath, usize>,
    stack: Vec<ModPath>,
    on_stack: BTreeSet<ModPath>,
    components: Vec<BTreeSet<ModPath>>,
}

impl Tarjan {
    fn visit(&mut self, module: &ModPath, next: &BTreeMap<&ModPath, Vec<&ModPath>>) {
        let index = self.index.len();
        self.index.insert(module.clone(), index);
        self.low.insert(module.clone(), index);
        self.stack.push(module.clone());
        self.on_stack.insert(module.clone());
        for &to in next.get(module).into_iter().flatten() {
            if !self.index.contains_key(to) {
                self.visit(to, next);
                let low = self.low[module].min(self.low[to]);
                self.low.insert(module.clone(), low);
            } else if self.on_stack.contains(to) {
                let low = self.low[module].min(self.index[to]);
                self.low.insert(module.clone(), low);
            }
        }
        if self.low[module] == self.index[module] {
            let mut component = BTreeSet::new();
            while let Some(top) = self.stack.pop() {
                self.on_stack.remove(&top);
                let done = &top == module;
                component.insert(top);
                if done {
                    break;
                }
            }
            self.components.push(component);
        }
    }
}

fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in fs::read_dir(&dir).expect("a source folder reads") {
            let path = entry.expect("a folder entry").path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

/// The code without comments, string and char literals, and `#[cfg(test)]` modules.
fn strip(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < bytes.len() {
        let rest = &text[i..];
        if rest.starts_with("//") {
            i += rest.find('\n').unwrap_or(rest.len());
        } else if rest.starts_with("/*") {
            i += rest.find("*/").map_or(rest.len(), |end| end + 2);
        } else if rest.starts_with("r#\"") || rest.starts_with("r\"") {
            let hashes = rest[1..].bytes().take_while(|&b| b == b'#').count();
            let close = format!("\"{}", "#".repeat(hashes));
            let body = 2 + hashes;
            i += body
                + rest[body..]
                    .find(&close)
                    .map_or(rest.len() - body, |e| e + close.len());
            out.push_str("\"\"");
        } else if rest.starts_with('"') {
            let mut j = 1;
            while j < rest.len() && rest.as_bytes()[j] != b'"' {
                j += if rest.as_bytes()[j] == b'\\' { 2 } else { 1 };
            }
            i += (j + 1).min(rest.len());
            out.push_str("\"\"");
        } else if rest.starts_with("'") && char_literal_len(rest) > 0 {
            i += char_literal_len(rest);
            out.push_str("' '");
        } else if rest.starts_with("#[cfg(test)]") {
            i += test_item_len(rest);
        } else {
            let c = rest.chars().next().expect("not at the end");
            out.push(c);
            i += c.len_utf8();
        }
    }
    out
}

/// The length of a char literal at the start of `rest` (`'a'`, `'\n'`, `'\''`), or 0 for a
/// lifetime.
fn char_literal_len(rest: &str) -> usize {
    let b = rest.as_bytes();
    if b.len() >= 4 && b[1] == b'\\' {
        return rest[2..].find('\'').map_or(0, |e| e + 3);
    }
    let mut chars = rest[1..].char_indices();
    match (chars.next(), chars.next()) {
        (Some(_), Some((at, '\''))) => at + 2,
        _ => 0,
    }
}

/// The length of the item after `#[cfg(test)]`: up to its `;` or the brace that closes it.
fn test_item_len(rest: &str) -> usize {
    let mut depth = 0usize;
    for (at, c) in rest.char_indices().skip("#[cfg(test)]".len()) {
        match c {
            '{' => depth += 1,
            '}' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return at + 1;
                }
            }
            ';' if depth == 0 => return at + 1,
            _ => {}
        }
    }
    rest.len()
}

/// Every path a module names, split into segments, with whether it is a `pub use` (a
/// re-export). `use a::{b, c::d}` gives `a::b` and `a::c::d`; a path in code gives itself when
/// it starts with `crate`, `self`, `super` or one of the module's `children`.
fn paths_in(code: &str, children: &[&str]) -> Vec<(Vec<String>, bool)> {
    let mut paths = Vec::new();
    let mut rest = code;
    let mut in_code = String::with_capacity(code.len());
    while let Some(at) = find_use(rest) {
        let before = rest[..at].trim_end();
        let public = before.ends_with("pub") || before.ends_with(')') && before.contains("pub(");
        let after = &rest[at + 4..];
        let end = after.find(';').unwrap_or(after.len());
        expand(&after[..end], &mut Vec::new(), &mut paths, public);
        in_code.push_str(&rest[..at]);
        rest = &after[end..];
    }
    in_code.push_str(rest);
    let starts = ["crate", "self", "super"].iter().chain(children);
    for start in starts.map(|s| format!("{s}::")) {
        for (at, _) in in_code.match_indices(&start) {
            let before = in_code[..at].chars().next_back();
            // `pub(in crate::a)` is a visibility, not a use.
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':')
                || in_code[..at].ends_with("(in ")
            {
                continue;
            }
            let path: Vec<String> = in_code[at..]
                .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                .next()
                .unwrap_or("")
                .split("::")
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect();
            if path.len() > 1 {
                paths.push((path, false));
            }
        }
    }
    paths
}

/// Where the next `use ` statement starts (the word, not part of another).
fn find_use(code: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(at) = code[from..].find("use ") {
        let at = from + at;
        let before = code[..at].chars().next_back();
        if before.is_none_or(|c| c.is_whitespace() || c == ';' || c == '{' || c == '}') {
            return Some(at);
        }
        from = at + 4;
    }
    None
}

/// Expands a use tree (`a::{b, c::{d, e as f}}`) into its paths.
fn expand(tree: &str, prefix: &mut Vec<String>, out: &mut Vec<(Vec<String>, bool)>, public: bool) {
    let tree = tree.trim();
    if let Some(open) = tree.find('{') {
        let head: Vec<String> = tree[..open]
            .split("::")
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect();
        let close = tree.rfind('}').unwrap_or(tree.len());
        let inner = &tree[open + 1..close];
        let depth = prefix.len();
        prefix.extend(head);
        for part in split_top(inner) {
            expand(part, prefix, out, public);
        }
        prefix.truncate(depth);
        return;
    }
    let path = tree.split(" as ").next().unwrap_or("").trim();
    if path.is_empty() {
        return;
    }
    let mut full = prefix.clone();
    full.extend(
        path.split("::")
            .map(str::trim)
            .filter(|s| !s.is_empty() && *s != "self")
            .map(str::to_string),
    );
    out.push((full, public));
}

/// Splits `a, b::{c, d}, e` at its top-level commas.
fn split_top(inner: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0usize, 0);
    for (at, c) in inner.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                parts.push(&inner[start..at]);
                start = at + 1;
            }
            _ => {}
        }
    }
    parts.push(&inner[start..]);
    parts
}

/// Whether a module's code defines an item (or a child module) called `name`.
fn defines(code: &str, name: &str) -> bool {
    [
        "struct", "enum", "fn", "trait", "type", "const", "static", "mod", "union",
    ]
    .iter()
    .any(|kind| {
        let needle = format!("{kind} {name}");
        code.match_indices(&needle).any(|(at, _)| {
            let after = code[at + needle.len()..].chars().next();
            !after.is_some_and(|c| c.is_alphanumeric() || c == '_')
        })
    }) || code.contains(&format!("macro_rules! {name}"))
}
