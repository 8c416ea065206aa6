//! The harness that starts `hourglass serve`, against a stand-in
//! (`fake_serve.py`) that prints and answers as the server does.

use std::path::{Path, PathBuf};

use hourglass_test_support::hourglass::Serve;
use hourglass_test_support::required;

fn fake() -> Option<PathBuf> {
    required("python3", &["--version"]).then(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fake_serve.py"))
}

#[test]
fn a_server_is_ready_with_its_addresses_and_restarts_on_new_ones() {
    let Some(fake) = fake() else { return };
    let mut server = Serve::new(&fake).beanstalk().start();
    assert!(server.url().starts_with("http://127.0.0.1:"), "{}", server.url());
    assert_eq!(server.beanstalk_port(), 11_300);
    let first = server.addr().to_owned();
    server.restart();
    assert_ne!(server.addr(), first, "a restart is a new process, on a port of its own");
    let status = server.terminate();
    assert!(!status.success(), "the stand-in dies of SIGTERM: {status}");
}

#[test]
fn a_server_that_exits_while_starting_fails_with_its_stderr() {
    let Some(fake) = fake() else { return };
    let failed = std::panic::catch_unwind(|| Serve::new(&fake).arg("--fail").start()).expect_err("a failure");
    let message = failed.downcast_ref::<String>().expect("a message");
    assert!(message.contains("exited before printing `http ADDR`"), "{message}");
    assert!(message.contains("a fake failure"), "the end of its stderr: {message}");
}
