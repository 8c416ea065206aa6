//! The redb store's own tests: batches, payloads apart, pauses, settings.

use super::*;
use hourglass_queue::TaskState;

fn task(id: u64, run_at_ms: u64) -> Task {
    Task {
        id,
        queue: "q".into(),
        run_at_ms,
        attempt: 0,
        max_attempts: 5,
        priority: hourglass_queue::limits::PRIORITY_DEFAULT,
        lease_ms: None,
        key: None,
        every_ms: None,
        expires_at_ms: None,
        expired: false,
        last_error: None,
        http: None,
        state: TaskState::Scheduled,
        created_ms: 1,
    }
}

#[test]
fn redb_s_error_is_the_source() {
    let error = db_error(redb::Error::Io(std::io::Error::from_raw_os_error(ENOSPC)));
    assert!(matches!(error, StoreError::Full(_)), "{error:?}");
    let source = std::error::Error::source(&error).expect("redb's error is kept");
    assert!(source.downcast_ref::<redb::Error>().is_some(), "{source:?}");
    let error = db_error(redb::Error::TableDoesNotExist("t".into()));
    assert!(matches!(error, StoreError::Database(_)), "{error:?}");
    assert!(error.to_string().starts_with("database error: redb: "), "{error}");
}

/// What a commit reported failing became is read back from the file.
#[test]
fn a_batch_is_known_to_have_landed_or_not() {
    let dir = tempfile::tempdir().unwrap();
    let store = RedbStore::open(dir.path()).unwrap();
    let landed = |batch: &[Mutation]| store.with_db(|db| landed(db, batch)).unwrap();
    let big = "b".repeat(hourglass_queue::limits::PAYLOAD_INLINE_MAX + 1);
    let first = vec![
        Mutation::Insert { task: task(1, 10), payload: "{}".into() },
        Mutation::Insert { task: task(2, 10), payload: big.as_str().into() },
        Mutation::NextId(3),
    ];
    assert!(!landed(&first), "not yet written");
    store.apply(&first, true).unwrap();
    assert!(landed(&first));
    let other_body = [Mutation::Insert { task: task(1, 11), payload: "{}".into() }];
    assert!(!landed(&other_body), "a body that differs is not this batch's");

    let update = [Mutation::Update(task(1, 20))];
    assert!(!landed(&update));
    store.apply(&update, true).unwrap();
    assert!(landed(&update));
    assert!(!landed(&[Mutation::NextId(4)]));
    assert!(landed(&[Mutation::NextId(3)]), "the next id is there already: nothing tells it apart");

    let delete = [Mutation::Delete(2)];
    assert!(!landed(&delete));
    store.apply(&delete, true).unwrap();
    assert!(landed(&delete));
    // The payload went with the task.
    assert!(store.snapshot().unwrap().payload(2).is_err());

    // A pause tells once written (before, the table does not even exist);
    // so does the resume, and the paused queues are loaded by name.
    let pause = [Mutation::PauseQueue { queue: "q".into(), paused: true, until_ms: None }];
    assert!(!landed(&pause));
    assert_eq!(store.load_paused().unwrap(), Vec::<(Box<str>, Option<u64>)>::new());
    store.apply(&pause, true).unwrap();
    assert!(landed(&pause));
    assert_eq!(store.load_paused().unwrap(), [(Box::from("q"), None)]);
    // A pause that ends by itself keeps its end; a later one without, none.
    let timed = [Mutation::PauseQueue { queue: "q".into(), paused: true, until_ms: Some(1_000) }];
    assert!(!landed(&timed));
    store.apply(&timed, true).unwrap();
    assert!(landed(&timed) && !landed(&pause));
    assert_eq!(store.load_paused().unwrap(), [(Box::from("q"), Some(1_000))]);
    store.apply(&pause, true).unwrap();
    assert_eq!(store.load_paused().unwrap(), [(Box::from("q"), None)]);
    let resume = [Mutation::PauseQueue { queue: "q".into(), paused: false, until_ms: None }];
    assert!(!landed(&resume));
    store.apply(&resume, true).unwrap();
    assert!(landed(&resume));
    assert!(store.load_paused().unwrap().is_empty());
}

#[test]
fn settings_are_stored_by_queue_and_the_defaults_remove_them() {
    use hourglass_queue::{Flow, HttpTarget, PushTarget};
    let dir = tempfile::tempdir().unwrap();
    let store = RedbStore::open(dir.path()).unwrap();
    assert!(store.load_settings().unwrap().is_empty());
    let settings = QueueSettings {
        push: Some(std::sync::Arc::new(PushTarget::new(HttpTarget::post("https://example.com/")))),
        flow: Flow { rate_per_s: Some(3.5), burst: None, max_in_flight: Some(2) },
    };
    let put = |settings: &QueueSettings| [Mutation::PutSettings { queue: "q".into(), settings: settings.clone() }];
    store.apply(&put(&settings), true).unwrap();
    assert!(landed(store.db.read().as_ref().unwrap(), &put(&settings)).unwrap());
    drop(store);
    let store = RedbStore::open(dir.path()).unwrap();
    assert_eq!(store.load_settings().unwrap(), [(Box::from("q"), settings.clone())], "across a reopen");
    store.apply(&put(&QueueSettings::default()), true).unwrap();
    assert!(store.load_settings().unwrap().is_empty());
    assert!(!landed(store.db.read().as_ref().unwrap(), &put(&settings)).unwrap());
}
