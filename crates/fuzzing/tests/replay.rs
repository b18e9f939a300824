//! The short run CI does of every fuzz target, on stable and without
//! libFuzzer: each target's seeds (`fuzz/seeds/<target>/`), then a fixed
//! number of mutations of them (bit flips, interesting bytes and tokens,
//! cuts, splices with other seeds, random bytes; for a JSON seed, mostly
//! values replaced, keys dropped and elements repeated inside the
//! document, JSON in its strings included) drawn from a seeded RNG,
//! so a failure here is the same failure on every machine and every run.
//! The coverage-guided runs are `scripts/fuzz.sh`'s.

use std::{
    collections::BTreeSet,
    fs,
    panic::{AssertUnwindSafe, catch_unwind},
    path::{Path, PathBuf},
};

use serde_json::Value;

/// Mutations per target: a few thousand each, fewer for the whole-fleet
/// target (each of its inputs is a fleet), keeps the replay within about
/// ten seconds in a debug build on two busy cores.
fn mutations(target: &str) -> usize {
    match target {
        "fleet_view" => 1_500,
        "host_decision" => 3_000,
        _ => 6_000,
    }
}

/// The RNG's seed: change it to explore, never to make a failure go away.
/// Each target draws from its own stream (this and its name), so the
/// inputs do not depend on the order the targets run in.
const SEED: u64 = 0x5eed_f1ee_7201_e000;

fn repo() -> PathBuf {
    let top = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    top.canonicalize().unwrap_or(top)
}

/// A target's seed files, in name order.
fn seeds(target: &str) -> Vec<(String, Vec<u8>)> {
    let dir = repo().join("fuzz/seeds").join(target);
    let mut files: Vec<PathBuf> = fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("a seed directory entry").path())
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let name = p
                .file_name()
                .expect("a file")
                .to_string_lossy()
                .into_owned();
            (name, fs::read(&p).expect("a seed file reads"))
        })
        .collect()
}

/// xorshift64*: small, seeded, the same everywhere.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number below `n` (`n` > 0).
    fn below(&mut self, n: usize) -> usize {
        usize::try_from(self.next() % u64::try_from(n).expect("fits")).expect("fits")
    }
}

/// Bytes and tokens that tend to sit on a parser's edges.
const TOKENS: &[&[u8]] = &[
    b"\0",
    b"\n",
    b"\r\n",
    b"\x1b[31m",
    b"\"",
    b"'",
    b"\\",
    b"{}",
    b"[]",
    b"null",
    b"true",
    b"-1",
    b"0",
    b"18446744073709551616",
    b"-9223372036854775808",
    b"9223372036854775807",
    b"1e309",
    b"\"\"",
    b"\xff\xfe",
    "é…\u{202e}".as_bytes(),
    b"=",
    b":",
    b"/",
    b"[::1]",
    b"::ffff:127.0.0.1",
    b"*a",
    b"&a",
    b"<<: *a",
    b"- ",
    b"#",
];

/// One mutation of `input`, `others` being seeds to splice from.
fn mutate(rng: &mut Rng, input: &mut Vec<u8>, others: &[&[u8]]) {
    let at = |rng: &mut Rng, v: &Vec<u8>| rng.below(v.len() + 1);
    match rng.below(9) {
        0 if !input.is_empty() => {
            let i = rng.below(input.len());
            input[i] ^= 1 << rng.below(8);
        }
        1 if !input.is_empty() => {
            let i = rng.below(input.len());
            input[i] = [0, 0xff, 0x7f, 0x80, b'"', b'{', b'}', b'9', b' '][rng.below(9)];
        }
        2 => {
            let cut = at(rng, input);
            input.truncate(cut);
        }
        3 => {
            let token = TOKENS[rng.below(TOKENS.len())];
            let i = at(rng, input);
            input.splice(i..i, token.iter().copied());
        }
        4 if !others.is_empty() => {
            // Splice: this input's head with another seed's tail.
            let other = others[rng.below(others.len())];
            let cut = at(rng, input);
            let from = rng.below(other.len() + 1);
            input.truncate(cut);
            input.extend_from_slice(&other[from..]);
        }
        5 if !input.is_empty() => {
            // Delete a run.
            let i = rng.below(input.len());
            let n = 1 + rng.below(16.min(input.len() - i));
            input.drain(i..i + n);
        }
        6 if !input.is_empty() => {
            // Repeat a run (nesting, long values).
            let i = rng.below(input.len());
            let n = 1 + rng.below(32.min(input.len() - i));
            let run: Vec<u8> = input[i..i + n].to_vec();
            let times = 1 + rng.below(64);
            for _ in 0..times {
                input.splice(i..i, run.iter().copied());
            }
        }
        7 => {
            let n = rng.below(16);
            let i = at(rng, input);
            let bytes: Vec<u8> = (0..n).map(|_| rng.next().to_le_bytes()[0]).collect();
            input.splice(i..i, bytes);
        }
        _ => {
            // Swap two bytes, or a digit for another.
            if input.len() > 1 {
                let (i, j) = (rng.below(input.len()), rng.below(input.len()));
                input.swap(i, j);
            }
        }
    }
}

/// Numbers on the edges of what a field holds.
const NUMBERS: &[&str] = &[
    "0",
    "-1",
    "1",
    "1796124731",
    "9223372036854775807",
    "-9223372036854775808",
    "18446744073709551615",
    "1e300",
    "0.5",
];

/// One mutation that keeps a JSON document JSON: a value somewhere in it
/// replaced, a key dropped, an element repeated. Byte mutations of a
/// Node-sized document seldom leave JSON; these reach what reads it.
fn mutate_json(rng: &mut Rng, value: &mut Value) {
    let mut count = 0usize;
    count_nodes(value, &mut count);
    let target = rng.below(count.max(1));
    let mut seen = 0usize;
    mutate_node(rng, value, target, &mut seen);
}

fn count_nodes(v: &Value, n: &mut usize) {
    *n += 1;
    match v {
        Value::Array(a) => a.iter().for_each(|x| count_nodes(x, n)),
        Value::Object(o) => o.values().for_each(|x| count_nodes(x, n)),
        _ => {}
    }
}

/// Mutates the `target`th value (depth first) of `v`.
fn mutate_node(rng: &mut Rng, v: &mut Value, target: usize, seen: &mut usize) -> bool {
    if *seen == target {
        mutate_value(rng, v);
        return true;
    }
    *seen += 1;
    match v {
        Value::Array(a) => a.iter_mut().any(|x| mutate_node(rng, x, target, seen)),
        Value::Object(o) => o.values_mut().any(|x| mutate_node(rng, x, target, seen)),
        _ => false,
    }
}

fn mutate_value(rng: &mut Rng, v: &mut Value) {
    match v {
        Value::String(s) => {
            // A string that holds JSON (a report, a note on the Lease) is
            // mutated inside, most of the time.
            if let Ok(mut inner) = serde_json::from_str::<Value>(s)
                && inner.is_object()
                && rng.below(4) != 0
            {
                mutate_json(rng, &mut inner);
                *s = inner.to_string();
                return;
            }
            *s = match rng.below(5) {
                0 => String::from_utf8_lossy(TOKENS[rng.below(TOKENS.len())]).into_owned(),
                1 => String::new(),
                2 => s.repeat(1 + rng.below(40)),
                3 => NUMBERS[rng.below(NUMBERS.len())].to_string(),
                _ => {
                    let mut bytes = s.clone().into_bytes();
                    mutate(rng, &mut bytes, &[]);
                    String::from_utf8_lossy(&bytes).into_owned()
                }
            };
        }
        Value::Number(_) | Value::Bool(_) | Value::Null => {
            *v = match rng.below(4) {
                0 => Value::Bool(rng.below(2) == 0),
                1 => Value::Null,
                2 => Value::String(NUMBERS[rng.below(NUMBERS.len())].to_string()),
                _ => serde_json::from_str(NUMBERS[rng.below(NUMBERS.len())]).expect("a number"),
            };
        }
        Value::Array(a) => match rng.below(3) {
            0 if !a.is_empty() => {
                a.remove(rng.below(a.len()));
            }
            1 if !a.is_empty() => {
                let x = a[rng.below(a.len())].clone();
                a.push(x);
            }
            _ => a.clear(),
        },
        Value::Object(o) => {
            if !o.is_empty() && rng.below(2) == 0 {
                let key = o.keys().nth(rng.below(o.len())).cloned().expect("a key");
                o.remove(&key);
            } else if rng.below(2) == 0 {
                *v = Value::Null;
            } else {
                o.insert(
                    String::from_utf8_lossy(TOKENS[rng.below(TOKENS.len())]).into_owned(),
                    Value::String("true".into()),
                );
            }
        }
    }
}

/// Runs `f` on `input`; a panic fails the test, naming the input and
/// keeping it under `target/fuzz-replay/` for `cargo fuzz run` to replay.
fn run(target: &str, f: fn(&[u8]), what: &str, input: &[u8]) {
    if catch_unwind(AssertUnwindSafe(|| f(input))).is_err() {
        let dir = repo().join("target/fuzz-replay");
        fs::create_dir_all(&dir).expect("target/ is writable");
        let file = dir.join(format!("{target}-{}", what.replace(['/', ' '], "-")));
        fs::write(&file, input).expect("the failing input is kept");
        panic!(
            "{target} failed on {what}, kept in {} (`cargo +nightly fuzz run {target} {}`): {:?}",
            file.display(),
            file.display(),
            String::from_utf8_lossy(&input[..input.len().min(300)])
        );
    }
}

/// Replays `target`'s seeds, then its mutations.
fn replay(target: &'static str, f: fn(&[u8]), all_seeds: &[Vec<u8>]) {
    // FNV-1a of the name, so each target has its own stream.
    let name_hash = target.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    let mut rng = Rng(SEED ^ name_hash);
    let own = seeds(target);
    assert!(own.len() >= 2, "{target} has {} seeds", own.len());
    for (name, seed) in &own {
        run(target, f, name, seed);
    }
    // Mostly the target's own seeds; now and then another target's.
    let own_bytes: Vec<&[u8]> = own.iter().map(|(_, s)| s.as_slice()).collect();
    let foreign: Vec<&[u8]> = all_seeds.iter().map(Vec::as_slice).collect();
    for i in 0..mutations(target) {
        let mut input = if rng.below(50) == 0 {
            let n = rng.below(256);
            (0..n).map(|_| rng.next().to_le_bytes()[0]).collect()
        } else {
            own_bytes[rng.below(own_bytes.len())].to_vec()
        };
        let splice_from = if rng.below(10) == 0 {
            &foreign
        } else {
            &own_bytes
        };
        // A JSON seed is mutated as JSON two times in three.
        let json = serde_json::from_slice::<Value>(&input)
            .ok()
            .filter(|_| rng.below(3) != 0);
        if let Some(mut doc) = json {
            for _ in 0..=rng.below(4) {
                mutate_json(&mut rng, &mut doc);
            }
            input = serde_json::to_vec(&doc).expect("JSON serializes");
        } else {
            for _ in 0..=rng.below(4) {
                mutate(&mut rng, &mut input, splice_from);
            }
        }
        run(target, f, &format!("mutation {i}"), &input);
    }
}

#[test]
fn every_parser_of_untrusted_input_survives_its_seeds_and_a_seeded_run_of_mutations() {
    let all_seeds: Vec<Vec<u8>> = fuzzing::TARGETS
        .iter()
        .flat_map(|(t, _)| seeds(t).into_iter().map(|(_, s)| s))
        .collect();
    // One thread per target: the machine's cores share the slow ones.
    std::thread::scope(|s| {
        for &(target, f) in fuzzing::TARGETS {
            let all_seeds = &all_seeds;
            s.spawn(move || replay(target, f, all_seeds));
        }
    });
}

#[test]
fn every_target_has_its_libfuzzer_entry_and_seeds_and_every_entry_is_a_target() {
    let targets: BTreeSet<&str> = fuzzing::TARGETS.iter().map(|(t, _)| *t).collect();
    assert_eq!(
        targets.len(),
        fuzzing::TARGETS.len(),
        "a target listed twice"
    );
    let dir = repo().join("fuzz/fuzz_targets");
    let entries: BTreeSet<String> = fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("an entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "rs"))
        .map(|p| {
            p.file_stem()
                .expect("a name")
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    assert_eq!(
        entries,
        targets.iter().map(|t| t.to_string()).collect(),
        "fuzz/fuzz_targets/*.rs and fuzzing::TARGETS differ"
    );
    let manifest = fs::read_to_string(repo().join("fuzz/Cargo.toml")).expect("fuzz/Cargo.toml");
    for target in &targets {
        let source = fs::read_to_string(dir.join(format!("{target}.rs"))).expect("the entry reads");
        assert!(
            source.contains(&format!("fuzzing::{target}(")),
            "fuzz/fuzz_targets/{target}.rs does not call fuzzing::{target}"
        );
        assert!(
            manifest.contains(&format!("name = \"{target}\"")),
            "fuzz/Cargo.toml has no [[bin]] {target}"
        );
        assert!(!seeds(target).is_empty(), "fuzz/seeds/{target}/ is empty");
    }
}
