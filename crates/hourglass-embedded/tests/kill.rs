//! `kill -9` in the middle of a compaction, on a real file: this test binary
//! runs itself as a child that fills a store, deletes most of it and says
//! when it begins compacting; the parent kills it there (SIGKILL), opens the
//! file again and checks that it holds what the child had written, payloads
//! byte for byte. The child waits, once compacted, for a kill that may come
//! late: so whenever the kill lands, the file's data is the one state.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

use hourglass_embedded::{Mutation, RedbStore, Store};

use crate::stored_task;
use hourglass_queue::limits::PAYLOAD_INLINE_MAX;
use hourglass_queue::Payload;

/// The child's data directory; set only in the child.
const CHILD_DIR: &str = "HOURGLASS_KILL_CHILD_DIR";
/// Tasks the child writes, and one in this many it keeps.
const TASKS: u64 = 24_000;
const KEPT_ONE_IN: u64 = 40;
/// Children killed, each in a fresh directory.
const KILLS: usize = 3;

/// Task `id`'s payload: every other one kept apart from its body.
fn payload(id: u64) -> Payload {
    let bytes =
        if id.is_multiple_of(2) { PAYLOAD_INLINE_MAX + 1 + (id % 3_000) as usize } else { 1 + (id % 100) as usize };
    format!("{id}:{}", "x".repeat(bytes)).into()
}

fn kept(id: u64) -> bool {
    id.is_multiple_of(KEPT_ONE_IN)
}

/// The child: fills, deletes, says "compacting", compacts, says
/// "compacted", then waits to be killed.
#[test]
#[ignore = "run by kill_9_in_the_middle_of_a_compaction_leaves_the_data_whole as its child"]
fn child_compacts_until_killed() {
    let Some(dir) = std::env::var_os(CHILD_DIR) else { return };
    let store = RedbStore::open(Path::new(&dir)).expect("open");
    store.load(&mut |_, _| {}).expect("load");
    let ids: Vec<u64> = (1..=TASKS).collect();
    for chunk in ids.chunks(1_000) {
        let batch: Vec<_> =
            chunk.iter().map(|&id| Mutation::Insert { task: stored_task(id, 10), payload: payload(id) }).collect();
        store.apply(&batch, true).expect("insert");
    }
    let deletes: Vec<_> = ids.iter().copied().filter(|&id| !kept(id)).map(Mutation::Delete).collect();
    store.apply(&deletes, true).expect("delete");
    println!("compacting {} bytes", store.file_bytes().expect("file bytes"));
    let done = store.compact().expect("compact");
    println!("compacted {done:?}");
    // Blocks until killed: the parent never writes.
    let mut line = String::new();
    let _ = std::io::stdin().read_line(&mut line);
}

#[test]
fn kill_9_in_the_middle_of_a_compaction_leaves_the_data_whole() {
    let mut mid_compaction = 0;
    for _ in 0..KILLS {
        let dir = tempfile::tempdir().unwrap();
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "kill::child_compacts_until_killed", "--ignored", "--nocapture", "--test-threads=1"])
            .env(CHILD_DIR, dir.path())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn the child");
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        loop {
            let line = lines.next().expect("the child ended before compacting").unwrap();
            if line.contains("compacting") {
                break;
            }
        }
        child.kill().expect("SIGKILL");
        child.wait().unwrap();
        // Whether the compaction had finished when the kill landed.
        let finished = lines.map_while(Result::ok).any(|line| line.contains("compacted"));
        mid_compaction += usize::from(!finished);

        let store = RedbStore::open(dir.path()).expect("open after the kill");
        let mut ids = Vec::new();
        store.load(&mut |task, _| ids.push(task.id)).expect("load after the kill");
        assert_eq!(ids, (1..=TASKS).filter(|&id| kept(id)).collect::<Vec<_>>(), "the tasks after the kill");
        let mut snapshot = store.snapshot().unwrap();
        for id in ids {
            assert_eq!(snapshot.payload(id).unwrap(), payload(id), "task {id}'s payload after the kill");
        }
        drop(snapshot);
        assert!(store.compact().expect("a compaction after the kill").is_some());
    }
    println!("kill -9: {mid_compaction} of {KILLS} kills landed before the compaction finished");
}
