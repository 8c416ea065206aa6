//! The Python client package, `clients/python`: its pytest suite against
//! this binary (`HOURGLASS_BIN`; each test starts its own servers on free
//! ports), and `mypy --strict` over the package and its tests. The test
//! packages are the ones `clients/python/requirements-test.txt` pins
//! (`.ci/run` installs them). Under `CI=true`, a missing Python or package
//! fails the test; elsewhere the test says so and passes.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use hourglass_test_support::required;

/// The repository's root.
fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Whether Python and the test packages are there (see [`required`]).
fn python_ready() -> bool {
    required("python3", &["-c", "import httpx, pytest, mypy"])
}

/// The last lines of `text`: a runner's summary.
fn tail(text: &[u8], lines: usize) -> String {
    let text = String::from_utf8_lossy(text);
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

fn failure(what: &str, output: &Output) -> String {
    format!(
        "{what} failed ({}):\n{}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

#[test]
fn python_client_tests_pass_against_this_binary() {
    if !python_ready() {
        return;
    }
    let output = Command::new("python3")
        .args(["-m", "pytest", "clients/python", "-q", "-rs"])
        .current_dir(repository())
        .env("HOURGLASS_BIN", env!("CARGO_BIN_EXE_hourglass"))
        .output()
        .expect("run python3 -m pytest");
    println!("pytest clients/python:\n{}", tail(&output.stdout, 3));
    assert!(output.status.success(), "{}", failure("pytest clients/python", &output));
}

#[test]
fn python_client_passes_mypy_strict() {
    if !python_ready() {
        return;
    }
    // The settings (strict, Python 3.10, src and tests) are in its pyproject.toml.
    let output = Command::new("python3")
        .args(["-m", "mypy", "--strict"])
        .current_dir(repository().join("clients/python"))
        .output()
        .expect("run python3 -m mypy");
    println!("mypy --strict clients/python: {}", tail(&output.stdout, 1));
    assert!(output.status.success(), "{}", failure("mypy --strict clients/python", &output));
}
