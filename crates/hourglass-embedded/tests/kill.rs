//! `kill -9` of a process writing a real store. In the middle of a
//! compaction: this test binary
//! runs itself as a child that fills a store, deletes most of it, begins
//! compacting, and writes on while the compaction's thread copies, saying
//! each write once it is durable. The parent kills it (SIGKILL) after a
//! number of those writes that differs from kill to kill, opens the
//! directory again and checks that it holds what the child had written and
//! been told was durable (every "wrote" line it printed before the kill),
//! payloads byte for byte, and at most the one write under way besides. The child waits, once compacted, for a kill that may
//! come late.
//!
//! And in the relaxed mode (`--fsync-every-ms`): a child writes batches
//! that need not be durable, each answered once in the store's log, with a
//! durable commit now and then, and the parent checks that a `kill -9` lost
//! none it answered.

use std::io::{BufRead, BufReader, Lines};
use std::path::Path;
use std::process::{Child, ChildStdout, Command, Stdio};

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

/// The writes the child makes while it compacts, at most; each is one task.
const WRITES_DURING: u64 = 400;
/// After how many of them each kill lands: at once, early, late.
const KILL_AFTER: [usize; KILLS] = [0, 20, 200];

/// The child: fills, deletes, says "compacting", begins a compaction and
/// writes one task at a time, durably, saying "wrote ID" after each, while
/// asking the compaction to finish between writes; says "compacted" once it
/// has, then waits to be killed.
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
    store.begin_compaction().expect("begin compacting");
    let mut compacted = None;
    for id in TASKS + 1..=TASKS + WRITES_DURING {
        store.apply(&[Mutation::Insert { task: stored_task(id, 10), payload: payload(id) }], true).expect("write");
        println!("wrote {id}");
        if compacted.is_none() {
            compacted = store.compact_if_due().expect("compact");
            if let Some(done) = compacted {
                println!("compacted {done:?}");
            }
        }
    }
    if compacted.is_none() {
        println!("compacted {:?}", store.compact().expect("compact"));
    }
    // Blocks until killed: the parent never writes.
    let mut line = String::new();
    let _ = std::io::stdin().read_line(&mut line);
}

#[test]
fn kill_9_in_the_middle_of_a_compaction_leaves_the_data_whole() {
    let mut mid_compaction = 0;
    for kill_after in KILL_AFTER {
        let dir = tempfile::tempdir().unwrap();
        let (mut child, mut lines) = spawn_child("kill::child_compacts_until_killed", CHILD_DIR, dir.path());
        let mut written = Vec::new();
        let mut finished = false;
        loop {
            let line = lines.next().expect("the child ended before compacting").unwrap();
            written.extend(wrote(&line));
            finished |= line.contains("compacted");
            if line.contains("compacting") && kill_after == 0 || written.len() >= kill_after && kill_after > 0 {
                break;
            }
        }
        child.kill().expect("SIGKILL");
        child.wait().unwrap();
        // What the child said before the kill landed, after the parent
        // stopped reading: writes it was told were durable, and whether the
        // compaction had finished.
        for line in lines.map_while(Result::ok) {
            written.extend(wrote(&line));
            finished |= line.contains("compacted");
        }
        mid_compaction += usize::from(!finished);

        let store = RedbStore::open(dir.path()).expect("open after the kill");
        let mut ids = Vec::new();
        store.load(&mut |task, _| ids.push(task.id)).expect("load after the kill");
        let acknowledged: Vec<u64> = (1..=TASKS).filter(|&id| kept(id)).chain(written.iter().copied()).collect();
        let under_way = acknowledged.last().map_or(TASKS + 1, |&last| last.max(TASKS) + 1);
        assert!(
            ids == acknowledged || ids == [acknowledged.clone(), vec![under_way]].concat(),
            "the tasks after the kill: {} held, {} acknowledged",
            ids.len(),
            acknowledged.len()
        );
        let mut snapshot = store.snapshot().unwrap();
        for id in ids {
            assert_eq!(snapshot.payload(id).unwrap(), payload(id), "task {id}'s payload after the kill");
        }
        drop(snapshot);
        let done = store.compact().expect("a compaction after the kill");
        assert!(done.after_bytes <= done.before_bytes, "{done:?}");
    }
    println!("kill -9: {mid_compaction} of {KILLS} kills landed before the compaction finished");
}

/// The relaxed child's data directory; set only in that child.
const RELAXED_CHILD_DIR: &str = "HOURGLASS_KILL_RELAXED_CHILD_DIR";
/// Writes the relaxed child makes, at most, how often it commits durably
/// (the writer's periodic sync), and its pause between writes: enough
/// writes for the log to commit to redb without fsync between syncs
/// (`APPLY_MUTATIONS`), slow enough for every kill to land among them.
const RELAXED_WRITES: u64 = 3_000;
const RELAXED_SYNC_EVERY: u64 = 1_000;
const RELAXED_PAUSE: std::time::Duration = std::time::Duration::from_micros(100);
/// After how many answered writes each kill lands: before any commit to
/// redb, after one without fsync, after a durable one.
const RELAXED_KILL_AFTER: [usize; 3] = [1, 900, 1_600];

/// What the store holds after the relaxed child's first `n` writes: write
/// `id` inserts task `id`, and every third also deletes the task two before.
fn relaxed_expected(written: &[u64]) -> Vec<u64> {
    let mut held = std::collections::BTreeSet::new();
    for &id in written {
        held.insert(id);
        if id.is_multiple_of(3) {
            held.remove(&(id - 2));
        }
    }
    held.into_iter().collect()
}

/// The relaxed child: one batch at a time, not durable, saying "wrote ID"
/// once the store has answered it; a durable commit every
/// [`RELAXED_SYNC_EVERY`]; then waits to be killed.
#[test]
#[ignore = "run by kill_9_loses_no_answered_relaxed_write as its child"]
fn child_writes_relaxed_until_killed() {
    let Some(dir) = std::env::var_os(RELAXED_CHILD_DIR) else { return };
    let store = RedbStore::open(Path::new(&dir)).expect("open");
    store.load(&mut |_, _| {}).expect("load");
    for id in 1..=RELAXED_WRITES {
        let mut batch = vec![Mutation::Insert { task: stored_task(id, 10), payload: payload(id) }];
        if id.is_multiple_of(3) {
            batch.push(Mutation::Delete(id - 2));
        }
        store.apply(&batch, false).expect("write");
        println!("wrote {id}");
        if id.is_multiple_of(RELAXED_SYNC_EVERY) {
            store.sync().expect("sync");
        }
        std::thread::sleep(RELAXED_PAUSE);
    }
    let mut line = String::new();
    let _ = std::io::stdin().read_line(&mut line);
}

/// The id a child's "wrote ID" line names; the first follows the test
/// harness's "test NAME ... " on the same line.
fn wrote(line: &str) -> Option<u64> {
    line.split_once("wrote ").map(|(_, id)| id.parse().expect("an id"))
}

/// This binary's ignored test `name`, run as a child with `env` naming its
/// data directory `dir`, and its output line by line.
fn spawn_child(name: &str, env: &str, dir: &Path) -> (Child, Lines<BufReader<ChildStdout>>) {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", name, "--ignored", "--nocapture", "--test-threads=1"])
        .env(env, dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn the child");
    let lines = BufReader::new(child.stdout.take().unwrap()).lines();
    (child, lines)
}

#[test]
fn kill_9_loses_no_answered_relaxed_write() {
    for kill_after in RELAXED_KILL_AFTER {
        let dir = tempfile::tempdir().unwrap();
        let (mut child, mut lines) =
            spawn_child("kill::child_writes_relaxed_until_killed", RELAXED_CHILD_DIR, dir.path());
        let mut written = Vec::new();
        while written.len() < kill_after {
            let line = lines.next().expect("the child ended before the kill").unwrap();
            written.extend(wrote(&line));
        }
        child.kill().expect("SIGKILL");
        child.wait().unwrap();
        for line in lines.map_while(Result::ok) {
            written.extend(wrote(&line));
        }
        assert!((written.len() as u64) < RELAXED_WRITES, "the kill landed after the last write");
        let store = RedbStore::open(dir.path()).expect("open after the kill");
        let mut ids = Vec::new();
        store.load(&mut |task, _| ids.push(task.id)).expect("load after the kill");
        let answered = relaxed_expected(&written);
        let under_way = written.last().map_or(1, |last| last + 1);
        let with_under_way = relaxed_expected(&[written.clone(), vec![under_way]].concat());
        assert!(
            ids == answered || ids == with_under_way,
            "after {} answered relaxed writes: {} tasks held, {} expected",
            written.len(),
            ids.len(),
            answered.len()
        );
        let mut snapshot = store.snapshot().unwrap();
        for id in &ids {
            assert_eq!(snapshot.payload(*id).unwrap(), payload(*id), "task {id}'s payload after the kill");
        }
        println!("kill -9 after {} answered relaxed writes: all {} tasks held", written.len(), ids.len());
    }
}
