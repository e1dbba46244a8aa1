//! Replays every input the fuzzers have found (`tests/fuzz_cases/<target>/`)
//! and every seed through the same harnesses the fuzz targets run, on
//! stable, so a fixed crash stays fixed. The harnesses live in `fuzz/src/`
//! and are compiled into this test by path: one copy of each invariant.

#[path = "../../fuzz/src/lib.rs"]
#[allow(dead_code)]
mod harness;

use std::fs;
use std::path::Path;

/// A target's harness by its directory name (the cargo-fuzz target name).
fn harness_for(target: &str) -> Option<fn(&[u8])> {
    Some(match target {
        "admin_inject" => harness::admin_inject::run,
        "binary" => harness::binary::run,
        "compress" => harness::compress::run,
        "fingerprint" => harness::fingerprint::run,
        "framing" => harness::framing::run,
        "handshake" => harness::handshake::run,
        "packets" => harness::packets::run,
        "session" => harness::session::run,
        _ => return None,
    })
}

#[test]
fn found_cases_do_not_panic() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz_cases");
    // Missing, the kept cases would silently stop being replayed.
    let dirs = fs::read_dir(&root).unwrap_or_else(|e| panic!("{}: {e}", root.display()));
    for dir in dirs {
        let dir = dir.expect("readable directory entry").path();
        if !dir.is_dir() {
            continue;
        }
        let target = dir.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_owned();
        // A misspelt directory would otherwise be skipped in silence.
        let run = harness_for(&target).unwrap_or_else(|| panic!("{} names no fuzz target", dir.display()));
        let mut cases: Vec<_> =
            fs::read_dir(&dir).expect("readable case directory").map(|e| e.expect("entry").path()).collect();
        cases.sort();
        for case in cases.iter().filter(|c| c.is_file()) {
            let bytes = fs::read(case).expect("readable case");
            // A panic names the case that caused it.
            eprintln!("replaying {}", case.display());
            run(&bytes);
        }
    }
}

#[test]
fn seeds_do_not_panic() {
    let seeds = harness::seeds::all();
    for (target, name, bytes) in &seeds {
        eprintln!("seed {target}/{name}");
        harness_for(target).expect("seed for a known target")(bytes);
    }
    for target in ["admin_inject", "binary", "compress", "fingerprint", "framing", "handshake", "packets", "session"] {
        assert!(seeds.iter().any(|(t, _, _)| *t == target), "no seed for {target}");
    }
}

/// Writes the seeds as files: `FUZZ_SEED_DIR=fuzz/corpus cargo test -p
/// rttscope --test fuzz_regressions -- --ignored write_seeds` (what
/// `scripts/fuzz.sh` does before a run).
#[test]
#[ignore = "writes files; run by scripts/fuzz.sh"]
fn write_seeds() {
    let dir = std::env::var("FUZZ_SEED_DIR").expect("FUZZ_SEED_DIR names the corpus root");
    for (target, name, bytes) in harness::seeds::all() {
        let dir = Path::new(&dir).join(target);
        fs::create_dir_all(&dir).expect("corpus directory");
        fs::write(dir.join(format!("seed-{name}")), bytes).expect("seed written");
    }
}
