//! The house rules, held by a test so they stay true as the code grows
//! (docs/architecture.md says why each matters):
//!
//! - no import loop between the files of a crate, nor between crates;
//! - no inherent `impl` of a type outside the file that defines it;
//! - no `#[path]` module (a module's tests live in `foo/tests.rs` beside
//!   `foo.rs`, where `mod tests;` finds them).
//!
//! A long file is only warned of: size is a hint, the loops are the defect.
//! The rules read the code as text (imports, `crate::`/`super::` paths,
//! `impl` lines), which is what a reviewer reads too; test code (files
//! named `tests.rs` or `*_tests.rs`, `tests/` folders, `#[cfg(test)]`
//! modules) is not judged by the first two.

use std::{
    collections::{BTreeMap, BTreeSet},
    fs,
    path::{Path, PathBuf},
};

/// A file longer than this is named in the test's output (not a failure).
const LONG_FILE: usize = 800;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn crate_dirs() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = fs::read_dir(workspace().join("crates"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("Cargo.toml").is_file())
        .collect();
    dirs.sort();
    dirs
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for e in entries {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

fn is_test_file(rel: &Path) -> bool {
    let name = rel.file_name().unwrap().to_string_lossy();
    name == "tests.rs"
        || name.ends_with("_tests.rs")
        || rel.components().any(|c| c.as_os_str() == "tests")
}

/// The text with comments, string literals' contents and `#[cfg(test)]`
/// items removed: what the rules judge.
fn product_text(text: &str) -> String {
    let mut out = String::new();
    for line in text.lines() {
        let code = match line.find("//") {
            Some(i) if !line[..i].contains('"') => &line[..i],
            _ => line,
        };
        out.push_str(code);
        out.push('\n');
    }
    // Drop `#[cfg(test)]` items: the next item (a `mod x;` or a braced block).
    let mut text = out;
    while let Some(at) = text.find("#[cfg(test)]") {
        let rest = &text[at..];
        let semi = rest.find(';');
        let brace = rest.find('{');
        let end = match (semi, brace) {
            (Some(s), Some(b)) if s < b => at + s + 1,
            (_, Some(b)) => {
                let mut depth = 0;
                let mut end = text.len();
                for (i, ch) in text[at + b..].char_indices() {
                    match ch {
                        '{' => depth += 1,
                        '}' => {
                            depth -= 1;
                            if depth == 0 {
                                end = at + b + i + 1;
                                break;
                            }
                        }
                        _ => {}
                    }
                }
                end
            }
            (Some(s), None) => at + s + 1,
            (None, None) => text.len(),
        };
        text.replace_range(at..end, "");
    }
    text
}

/// A crate's product files by module path (`[]` is the crate root).
struct Modules {
    files: BTreeMap<Vec<String>, PathBuf>,
    texts: BTreeMap<PathBuf, String>,
}

fn modules(src: &Path) -> Modules {
    let mut all = Vec::new();
    rust_files(src, &mut all);
    let mut files = BTreeMap::new();
    let mut texts = BTreeMap::new();
    for f in all {
        let rel = f.strip_prefix(src).unwrap().to_path_buf();
        if is_test_file(&rel) || rel.starts_with("bin") {
            continue;
        }
        let mut path: Vec<String> = rel
            .with_extension("")
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        let last = path.last().unwrap().clone();
        if last == "mod" {
            path.pop();
        }
        if path == ["lib"] || path == ["main"] {
            // A crate with both has two roots; the library's is the one
            // the modules hang from.
            if path == ["main"] && src.join("lib.rs").is_file() {
                continue;
            }
            path.clear();
        }
        texts.insert(f.clone(), product_text(&fs::read_to_string(&f).unwrap()));
        files.insert(path, f);
    }
    Modules { files, texts }
}

/// Splits a `use` tree (`a::{b, c::{d, e}}`) into its paths.
fn expand(tree: &str, prefix: &[String], out: &mut Vec<Vec<String>>) {
    let tree = tree.trim();
    if tree.is_empty() {
        return;
    }
    if let Some(open) = tree.find('{') {
        let head: Vec<String> = tree[..open]
            .split("::")
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(String::from)
            .collect();
        let inner = &tree[open + 1..tree.rfind('}').unwrap()];
        let mut depth = 0;
        let mut start = 0;
        let mut base = prefix.to_vec();
        base.extend(head);
        for (i, ch) in inner.char_indices() {
            match ch {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    expand(&inner[start..i], &base, out);
                    start = i + 1;
                }
                _ => {}
            }
        }
        expand(&inner[start..], &base, out);
    } else {
        let mut p = prefix.to_vec();
        let name = tree.split(" as ").next().unwrap();
        p.extend(name.split("::").map(|s| s.trim().to_string()));
        out.push(p);
    }
}

/// A path of names, `crate::a::B` as `["crate", "a", "B"]`.
type Names = Vec<String>;

/// One `use`: whether it is a `pub use` (a re-export), and its paths.
type Use = (bool, Vec<Names>);

/// Each `use` of `text`, and the text without them.
fn uses(text: &str) -> (Vec<Use>, String) {
    let mut found = Vec::new();
    let mut rest = String::new();
    let mut at = 0;
    let bytes = text.as_bytes();
    while let Some(i) = text[at..].find("use ") {
        let start = at + i;
        let word_start =
            start == 0 || !(bytes[start - 1].is_ascii_alphanumeric() || bytes[start - 1] == b'_');
        let line_start = text[..start].rfind('\n').map_or(0, |n| n + 1);
        let before = text[line_start..start].trim();
        let is_stmt = word_start && (before.is_empty() || before.starts_with("pub"));
        let Some(end) = text[start..].find(';').map(|e| start + e) else {
            break;
        };
        if !is_stmt {
            rest.push_str(&text[at..start + 4]);
            at = start + 4;
            continue;
        }
        rest.push_str(&text[at..line_start]);
        let mut paths = Vec::new();
        expand(&text[start + 4..end], &[], &mut paths);
        found.push((before.starts_with("pub"), paths));
        at = end + 1;
    }
    rest.push_str(&text[at..]);
    (found, rest)
}

/// `crate::`, `super::` and `self::` paths in code.
fn inline_paths(text: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for (i, _) in text.match_indices("::") {
        // Walk back to the start of the path.
        let head = &text[..i];
        let start = head
            .rfind(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
            .map_or(0, |s| s + 1);
        let path_start = &text[start..];
        if !(path_start.starts_with("crate::")
            || path_start.starts_with("super::")
            || path_start.starts_with("self::"))
        {
            continue;
        }
        // Only once per path: at its first `::`.
        if text[start..i].contains("::") {
            continue;
        }
        let end = path_start
            .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
            .unwrap_or(path_start.len());
        out.push(
            path_start[..end]
                .split("::")
                .filter(|s| !s.is_empty())
                .map(String::from)
                .collect(),
        );
    }
    out
}

/// The module path a use path names, from the module `here`.
fn absolute(here: &[String], path: &[String], m: &Modules) -> Option<Vec<String>> {
    let mut base: Vec<String> = here.to_vec();
    let mut p = path;
    match p.first()?.as_str() {
        "crate" => {
            base.clear();
            p = &p[1..];
        }
        "self" => p = &p[1..],
        "super" => {
            while p.first().is_some_and(|s| s == "super") {
                base.pop();
                p = &p[1..];
            }
        }
        first => {
            // A relative path names a child module, or something outside.
            let mut child = base.clone();
            child.push(first.to_string());
            if !m.files.contains_key(&child) {
                return None;
            }
        }
    }
    base.extend(p.iter().cloned());
    Some(base)
}

/// The file that defines what `abs` names, following re-exports.
fn target(
    abs: &[String],
    m: &Modules,
    reexports: &BTreeMap<(Vec<String>, String), Vec<String>>,
    depth: usize,
) -> Option<PathBuf> {
    for k in (0..=abs.len()).rev() {
        let module = &abs[..k];
        if let Some(file) = m.files.get(module) {
            if depth < 8
                && let Some(item) = abs.get(k)
                && let Some(to) = reexports.get(&(module.to_vec(), item.clone()))
            {
                return target(to, m, reexports, depth + 1).or(Some(file.clone()));
            }
            return Some(file.clone());
        }
    }
    None
}

/// Each crate's file graph: file -> the files it takes names from.
fn file_graph(src: &Path) -> BTreeMap<PathBuf, BTreeSet<PathBuf>> {
    let m = modules(src);
    let mut reexports = BTreeMap::new();
    let mut plain = BTreeMap::new();
    for (here, file) in &m.files {
        let (us, rest) = uses(&m.texts[file]);
        let mut paths = Vec::new();
        for (public, ps) in us {
            for p in ps {
                let Some(abs) = absolute(here, &p, &m) else {
                    continue;
                };
                if public {
                    reexports.insert((here.clone(), p.last().unwrap().clone()), abs);
                } else {
                    paths.push(abs);
                }
            }
        }
        for p in inline_paths(&rest) {
            if let Some(abs) = absolute(here, &p, &m) {
                paths.push(abs);
            }
        }
        plain.insert(file.clone(), paths);
    }
    let roots: BTreeSet<&PathBuf> = m.files.get(&Vec::new()).into_iter().collect();
    let mut graph = BTreeMap::new();
    for (file, paths) in plain {
        let mut to = BTreeSet::new();
        for p in paths {
            if p.last().is_some_and(|s| s == "*") {
                continue;
            }
            if let Some(t) = target(&p, &m, &reexports, 0)
                && t != file
                && !roots.contains(&t)
            {
                to.insert(t);
            }
        }
        graph.insert(file, to);
    }
    graph
}

/// The loops of a graph (its strongly connected parts of more than one).
fn loops<T: Ord + Clone>(graph: &BTreeMap<T, BTreeSet<T>>) -> Vec<Vec<T>> {
    // Kosaraju: order by finish time, then walk the reversed graph.
    fn visit<T: Ord + Clone>(
        n: &T,
        g: &BTreeMap<T, BTreeSet<T>>,
        seen: &mut BTreeSet<T>,
        order: &mut Vec<T>,
    ) {
        let mut stack = vec![(n.clone(), false)];
        while let Some((x, done)) = stack.pop() {
            if done {
                order.push(x);
                continue;
            }
            if !seen.insert(x.clone()) {
                continue;
            }
            stack.push((x.clone(), true));
            for y in g.get(&x).into_iter().flatten() {
                if !seen.contains(y) {
                    stack.push((y.clone(), false));
                }
            }
        }
    }
    let mut seen = BTreeSet::new();
    let mut order = Vec::new();
    for n in graph.keys() {
        visit(n, graph, &mut seen, &mut order);
    }
    let mut reversed: BTreeMap<T, BTreeSet<T>> = BTreeMap::new();
    for (a, bs) in graph {
        for b in bs {
            reversed.entry(b.clone()).or_default().insert(a.clone());
        }
    }
    let mut seen = BTreeSet::new();
    let mut found = Vec::new();
    for n in order.iter().rev() {
        let mut part = Vec::new();
        visit(n, &reversed, &mut seen, &mut part);
        if part.len() > 1 {
            part.sort();
            found.push(part);
        }
    }
    found
}

fn shown(p: &Path) -> String {
    p.strip_prefix(workspace().join("crates"))
        .unwrap_or(p)
        .display()
        .to_string()
}

#[test]
fn no_file_of_a_crate_takes_names_from_a_file_that_takes_names_from_it() {
    let mut found = Vec::new();
    let mut files = 0;
    for dir in crate_dirs() {
        let graph = file_graph(&dir.join("src"));
        files += graph.len();
        for l in loops(&graph) {
            found.push(l.iter().map(|p| shown(p)).collect::<Vec<_>>().join(" <-> "));
        }
    }
    assert!(files > 150, "too few files read: {files}");
    assert!(
        found.is_empty(),
        "import loops between files:\n{}",
        found.join("\n")
    );
}

/// Each workspace crate's dependencies on other workspace crates, from its
/// manifest: (normal, dev).
fn crate_graph() -> BTreeMap<String, (BTreeSet<String>, BTreeSet<String>)> {
    let mut names = BTreeMap::new();
    for dir in crate_dirs() {
        let toml = fs::read_to_string(dir.join("Cargo.toml")).unwrap();
        let name = toml
            .lines()
            .find_map(|l| l.strip_prefix("name = "))
            .unwrap()
            .trim_matches('"')
            .to_string();
        names.insert(name, toml);
    }
    let mut graph = BTreeMap::new();
    for (name, toml) in &names {
        let (mut deps, mut dev) = (BTreeSet::new(), BTreeSet::new());
        let mut section = "";
        for line in toml.lines() {
            let line = line.trim();
            if line.starts_with('[') {
                section = line;
                continue;
            }
            let dep = line
                .split(['=', '.', ' '])
                .next()
                .unwrap_or_default()
                .to_string();
            if !names.contains_key(&dep) || &dep == name {
                continue;
            }
            match section {
                "[dependencies]" | "[build-dependencies]" => deps.insert(dep),
                "[dev-dependencies]" => dev.insert(dep),
                _ => false,
            };
        }
        graph.insert(name.clone(), (deps, dev));
    }
    graph
}

#[test]
fn no_crate_depends_on_a_crate_that_depends_on_it() {
    let graph: BTreeMap<String, BTreeSet<String>> = crate_graph()
        .into_iter()
        .map(|(n, (deps, dev))| (n, deps.union(&dev).cloned().collect()))
        .collect();
    assert!(graph.len() > 15, "too few crates read: {}", graph.len());
    assert!(
        graph["fleetdecide"].contains("protocol"),
        "the manifests were misread: {graph:?}"
    );
    let found = loops(&graph);
    assert!(
        found.is_empty(),
        "crates that depend on each other: {found:?}"
    );
}

#[test]
fn the_crate_graph_in_docs_architecture_is_the_manifests_graph() {
    let graph = crate_graph();
    let doc = fs::read_to_string(workspace().join("docs/architecture.md")).unwrap();
    let ticked = |cell: &str| -> BTreeSet<String> {
        cell.split('`')
            .skip(1)
            .step_by(2)
            .filter(|w| graph.contains_key(*w))
            .map(String::from)
            .collect()
    };
    let mut rows = BTreeSet::new();
    let mut wrong = Vec::new();
    for line in doc.lines().filter(|l| l.starts_with("| `")) {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let (crates, last) = (ticked(cells[1]), cells[cells.len() - 2]);
        let (normal, dev) = match last.split_once("dev:") {
            Some((n, d)) => (ticked(n), Some(ticked(d))),
            None => (ticked(last), None),
        };
        for c in crates {
            let (deps, devs) = &graph[&c];
            if &normal != deps {
                wrong.push(format!(
                    "{c}: the page says {normal:?}, Cargo.toml {deps:?}"
                ));
            }
            if let Some(d) = &dev
                && d != devs
            {
                wrong.push(format!(
                    "{c} (dev): the page says {d:?}, Cargo.toml {devs:?}"
                ));
            }
            rows.insert(c);
        }
    }
    let missing: Vec<&String> = graph.keys().filter(|c| !rows.contains(*c)).collect();
    assert!(
        missing.is_empty(),
        "crates docs/architecture.md does not list: {missing:?}"
    );
    assert!(
        wrong.is_empty(),
        "docs/architecture.md is wrong:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn a_type_s_own_methods_are_in_the_file_that_defines_it() {
    let mut found = Vec::new();
    let mut impls = 0;
    for dir in crate_dirs() {
        let m = modules(&dir.join("src"));
        for (file, text) in &m.texts {
            for line in text.lines() {
                let l = line.trim_start();
                let Some(rest) = l.strip_prefix("impl") else {
                    continue;
                };
                if !(rest.starts_with(' ') || rest.starts_with('<')) || l.contains(" for ") {
                    continue;
                }
                // `impl<T: X> Name<T> {`: the type's name.
                let rest = if rest.starts_with('<') {
                    let mut depth = 0;
                    let mut cut = rest.len();
                    for (i, ch) in rest.char_indices() {
                        match ch {
                            '<' => depth += 1,
                            '>' => {
                                depth -= 1;
                                if depth == 0 {
                                    cut = i + 1;
                                    break;
                                }
                            }
                            _ => {}
                        }
                    }
                    &rest[cut..]
                } else {
                    rest
                };
                let name: String = rest
                    .trim_start()
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if name.is_empty() {
                    continue;
                }
                impls += 1;
                let defines = ["struct", "enum", "union", "type"].iter().any(|k| {
                    text.match_indices(&format!("{k} {name}")).any(|(i, _)| {
                        let after = text[i + k.len() + 1 + name.len()..].chars().next();
                        !after.is_some_and(|c| c.is_alphanumeric() || c == '_')
                    })
                });
                if !defines {
                    found.push(format!("{}: impl {name}", shown(file)));
                }
            }
        }
    }
    assert!(impls > 100, "too few impls read: {impls}");
    assert!(
        found.is_empty(),
        "methods away from their type:\n{}",
        found.join("\n")
    );
}

#[test]
fn no_module_is_found_through_a_path_attribute() {
    let mut found = Vec::new();
    let mut files = Vec::new();
    for dir in crate_dirs() {
        for sub in ["src", "tests", "examples", "benches"] {
            rust_files(&dir.join(sub), &mut files);
        }
    }
    for f in &files {
        let text = fs::read_to_string(f).unwrap();
        if text.lines().any(|l| l.trim_start().starts_with("#[path")) {
            found.push(shown(f));
        }
    }
    assert!(files.len() > 200, "too few files read: {}", files.len());
    assert!(found.is_empty(), "#[path] modules: {found:?}");
}

#[test]
fn long_files_are_named_for_a_reader_to_judge() {
    let mut long = Vec::new();
    let mut read = 0;
    for dir in crate_dirs() {
        let m = modules(&dir.join("src"));
        for file in m.files.values() {
            read += 1;
            let lines = fs::read_to_string(file).unwrap().lines().count();
            if lines > LONG_FILE {
                long.push(format!("{} ({lines} lines)", shown(file)));
            }
        }
    }
    // A hint, never a failure: a file grows long for good reasons too.
    for l in &long {
        eprintln!("warning: over {LONG_FILE} lines: {l}");
    }
    assert!(read > 150, "too few files read: {read}");
}
