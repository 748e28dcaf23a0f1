//! Replays the checked-in fuzz corpus (`fuzz/corpus/TARGET/`) through every target on
//! stable Rust, as part of the ordinary test run: every seed and every crash input ever
//! found must go through without a panic.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};

fn corpus_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus")
}

fn corpus_files(target: &str) -> Vec<PathBuf> {
    let dir = corpus_root().join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|err| panic!("corpus folder {} is missing: {err}", dir.display()))
        .filter_map(|entry| entry.ok().map(|entry| entry.path()))
        .filter(|path| path.is_file())
        .collect();
    files.sort();
    files
}

#[test]
fn every_corpus_input_of_every_target_runs_without_a_panic() {
    let mut failures = Vec::new();
    for (target, run) in interpreter_fuzz_targets::TARGETS {
        let files = corpus_files(target);
        assert!(!files.is_empty(), "the {target} corpus is empty");
        for file in files {
            let data = std::fs::read(&file)
                .unwrap_or_else(|err| panic!("reading {}: {err}", file.display()));
            if catch_unwind(AssertUnwindSafe(|| run(&data))).is_err() {
                failures.push(format!("{target}: {}", file.display()));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "inputs that panicked:\n{}",
        failures.join("\n")
    );
}

#[test]
fn every_target_has_a_fuzz_target_file_and_a_corpus_folder() {
    let fuzz = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz");
    for (target, _) in interpreter_fuzz_targets::TARGETS {
        let file = fuzz.join("fuzz_targets").join(format!("{target}.rs"));
        assert!(file.is_file(), "{} is missing", file.display());
        assert!(
            corpus_root().join(target).is_dir(),
            "no corpus folder for {target}"
        );
    }
}
