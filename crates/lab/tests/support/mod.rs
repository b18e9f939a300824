//! What the lab's test files share: a lab per test that goes down with it,
//! and a lock so that only one lab runs at a time (a dozen processes each,
//! on two cores).

use std::path::Path;

use lab::{
    spec::{LabSpec, Timings},
    world::{self, Bins, UpOptions},
};

/// An async lock: it is held across a whole test, awaits included.
pub static ONE_LAB_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A lab that goes down when the test ends, even by a panic.
pub struct Lab {
    /// Its spec.
    pub spec: LabSpec,
    _dir: tempfile::TempDir,
}

impl Drop for Lab {
    fn drop(&mut self) {
        world::down(&self.spec);
    }
}

/// Where cargo put the workspace's binaries.
pub fn bin_dir() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_fleet-role-lab"))
        .parent()
        .expect("a target dir")
}

/// Prints a line of the lab's story into the test's output.
pub fn say(line: &str) {
    println!("{line}");
}

/// Brings a lab of `servers` and `agents` up in a temporary directory.
pub async fn lab(servers: usize, agents: usize) -> Lab {
    let bins = Bins::beside(bin_dir()).expect("the workspace's binaries are built");
    let dir = tempfile::tempdir().expect("a temp dir");
    let spec = world::up(
        UpOptions {
            dir: dir.path().join("lab"),
            servers,
            agents,
            timings: Timings::default(),
            bins,
        },
        &say,
    )
    .await
    .expect("the lab comes up");
    Lab { spec, _dir: dir }
}

/// The seed's promises of a finished swap of `out` for `incoming`
/// (`SwapReport::broken_promises`), each kept.
pub fn assert_every_promise_kept(r: &lab::scenario::SwapReport, out: &str, incoming: &str) {
    for line in r.lines() {
        println!("{line}");
    }
    let broken = r.broken_promises(out, incoming);
    assert!(broken.is_empty(), "promises broken: {broken:#?}");
}
