//! The relaxed mode's log (`--fsync-every-ms`): each batch written without
//! fsync is appended here, with one `write`, before its answer. The batches
//! reach redb together: in a commit without fsync once [`APPLY_MUTATIONS`]
//! changes or [`APPLY_BYTES`] payload bytes have gathered, and with the
//! writer's periodic durable commit, after which the log starts again, empty.
//!
//! - **What it keeps.** An appended batch is in the operating system's page
//!   cache: a crash of the process (`kill -9` included) loses none, as with
//!   beanstalkd's binlog; a crash of the machine may lose those since the
//!   last durable commit, as before. A store opened with a log that holds
//!   batches commits them to redb, in order, durably, before it is read.
//! - **What it saves.** A redb commit, even without fsync, copies every page
//!   on the path to each key it changes and checksums them: one a batch was
//!   most of what set a relaxed consumer's cycle apart from beanstalkd's
//!   (BENCHMARKS.md). An append is one `write`, and a commit now takes many
//!   batches. Gathered no further than the bounds, the durable commit stays
//!   small: a log that took a whole interval to redb at once held every
//!   write behind it, and doubled the relaxed enqueue's p99.
//! - **Order.** Batches are appended, and later committed, in the order the
//!   writer applies them; a replay commits them in that order too. A replay
//!   after a crash that came between a durable commit and the log's reset
//!   commits batches redb already holds, in order, over the state they led
//!   to: every change sets a record whole or removes it, so the result is
//!   the same.
//! - **Reads.** A payload kept apart is read from redb by snapshots; until
//!   its batch is committed there, a snapshot finds it among the log's
//!   ([`RelaxedLog::apart`]), as it stood when the snapshot was taken.
//! - **Bounds.** Past [`LOG_BYTES_MAX`] the next batch makes everything
//!   durable first, whatever the interval, and the log starts again.
//!
//! A record in the file: the length of what follows (u32 LE), the batch
//! (`log_record`), its CRC-32 (u32 LE). The last record may be torn by a
//! crash: it was never answered, and is left out; a damaged record with
//! others after it is damage, and the store refuses to open.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::super::error::StoreError;
use super::super::interface::Mutation;
use super::super::log_record;
use super::super::record;
use super::super::sealed::unseal;
use hourglass_queue::{Failure, Payload};

/// The log's name in the data directory.
pub const LOG_FILE_NAME: &str = "relaxed.log";
/// Changes the log gathers before they go to redb, in one commit without
/// fsync: enough that a commit's cost is spread over hundreds of batches
/// (a relaxed reserve + delete is about three changes), few enough that the
/// durable commit after them stays short.
pub const APPLY_MUTATIONS: usize = 1_024;
/// Payload bytes the log gathers before they go to redb.
pub const APPLY_BYTES: usize = 4 << 20;
/// The most bytes the log holds: past it, everything is made durable and it
/// starts again, whatever the interval.
pub const LOG_BYTES_MAX: u64 = 256 << 20;

/// The payloads kept apart that the log holds and redb does not, by task
/// id: what a snapshot reads first. The writer replaces the map it points
/// to (copying it only while a snapshot holds it), never changes one a
/// snapshot took, so a snapshot keeps what it saw.
pub(super) type Apart = Arc<parking_lot::Mutex<Arc<HashMap<u64, Arc<Payload>>>>>;

/// The relaxed mode's log, and the batches it holds that redb does not.
pub(super) struct RelaxedLog {
    file: File,
    path: PathBuf,
    /// Bytes of whole records in the file: where a failed append is cut back to.
    len: u64,
    /// The changes appended and not yet in redb, in order.
    pending: Vec<Mutation>,
    /// Payload bytes among them.
    pending_bytes: usize,
    /// The payloads kept apart among them.
    apart: Apart,
    /// The record being written, kept for its capacity.
    buf: Vec<u8>,
}

/// Why a file operation on the log failed, as a store error.
fn io_error(what: String, error: std::io::Error) -> StoreError {
    if error.raw_os_error() == Some(super::ENOSPC) {
        StoreError::Full(Failure::new(what, error))
    } else {
        StoreError::Database(Failure::new(what, error))
    }
}

impl RelaxedLog {
    /// Opens the log in `dir` (made if missing), with the batches it holds,
    /// in order, for the store to commit before anything else.
    ///
    /// # Errors
    /// The file cannot be opened or read, or a record before the last is
    /// damaged.
    pub(super) fn open(dir: &Path) -> Result<(RelaxedLog, Vec<Vec<Mutation>>), StoreError> {
        let path = dir.join(LOG_FILE_NAME);
        let mut file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .open(&path)
            .map_err(|error| io_error(format!("cannot open the relaxed log {}", path.display()), error))?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)
            .map_err(|error| io_error(format!("cannot read the relaxed log {}", path.display()), error))?;
        let batches = read_records(&bytes)
            .map_err(|why| StoreError::Database(Failure::msg(format!("the relaxed log {} {why}", path.display()))))?;
        let log = RelaxedLog {
            file,
            path,
            len: bytes.len() as u64,
            pending: Vec::new(),
            pending_bytes: 0,
            apart: Arc::default(),
            buf: Vec::new(),
        };
        Ok((log, batches))
    }

    /// Appends `batch`, which then waits for the next durable commit. A
    /// failed append leaves the file as it was.
    ///
    /// # Errors
    /// The write failed ([`StoreError::Full`] if the device is).
    pub(super) fn append(&mut self, batch: &[Mutation]) -> Result<(), StoreError> {
        // The length, the batch, and the CRC of the batch (what `unseal` reads).
        self.buf.clear();
        self.buf.extend_from_slice(&[0; 4]);
        log_record::encode(batch, &mut self.buf);
        let crc = crc32fast::hash(&self.buf[4..]);
        self.buf.extend_from_slice(&crc.to_le_bytes());
        let len = (self.buf.len() - 4) as u32;
        self.buf[..4].copy_from_slice(&len.to_le_bytes());
        if let Err(error) = self.file.write_all(&self.buf) {
            // A torn record would hide every later one: cut it off.
            let _ = self.file.set_len(self.len);
            return Err(io_error(format!("cannot append to the relaxed log {}", self.path.display()), error));
        }
        self.len += self.buf.len() as u64;
        let mut apart = None;
        for mutation in batch {
            if let Mutation::Insert { task, payload } = mutation {
                self.pending_bytes += payload.len();
                if record::apart(payload.len()) {
                    let shared = apart.get_or_insert_with(|| self.apart.lock());
                    Arc::make_mut(shared).insert(task.id, Arc::new(payload.clone()));
                }
            }
        }
        drop(apart);
        self.pending.extend_from_slice(batch);
        Ok(())
    }

    /// Whether the log holds a batch not yet durable in redb.
    pub(super) fn undurable(&self) -> bool {
        self.len > 0
    }

    /// Whether the changes gathered are enough for a commit to redb: the
    /// next batch commits them first.
    pub(super) fn apply_due(&self) -> bool {
        self.pending.len() >= APPLY_MUTATIONS || self.pending_bytes >= APPLY_BYTES
    }

    /// Whether the log is at its bound: the next batch makes everything
    /// durable first.
    pub(super) fn full(&self) -> bool {
        self.len >= LOG_BYTES_MAX
    }

    /// The changes not yet in redb, in order, for a commit to take; handed
    /// back by [`put_back`](RelaxedLog::put_back) if it fails, or followed
    /// by [`applied`](RelaxedLog::applied) or
    /// [`committed`](RelaxedLog::committed).
    pub(super) fn take(&mut self) -> Vec<Mutation> {
        std::mem::take(&mut self.pending)
    }

    /// The changes [`take`](RelaxedLog::take) took, their commit failed: they
    /// wait again, first.
    pub(super) fn put_back(&mut self, mut pending: Vec<Mutation>) {
        pending.append(&mut self.pending);
        self.pending = pending;
    }

    /// A commit without fsync holds every change taken: redb has them (and
    /// snapshots read them there), the log keeps them until a durable one.
    pub(super) fn applied(&mut self) {
        self.pending_bytes = 0;
        let mut apart = self.apart.lock();
        if !apart.is_empty() {
            *apart = Arc::default();
        }
    }

    /// A durable commit holds every change taken: the log starts again. A
    /// log that cannot be emptied is left to be replayed over what redb
    /// holds, which changes nothing.
    pub(super) fn committed(&mut self) {
        self.applied();
        if self.len == 0 {
            return;
        }
        match self.file.set_len(0) {
            Ok(()) => self.len = 0,
            Err(error) => {
                tracing::warn!(%error, path = %self.path.display(), "cannot empty the relaxed log: a restart replays it, which changes nothing");
            }
        }
    }

    /// The payloads kept apart that redb does not hold yet, for snapshots.
    pub(super) fn apart(&self) -> Apart {
        self.apart.clone()
    }
}

/// The batches of a log's records, in order.
fn read_records(mut bytes: &[u8]) -> Result<Vec<Vec<Mutation>>, String> {
    let total = bytes.len();
    let mut batches = Vec::new();
    while !bytes.is_empty() {
        let at = total - bytes.len();
        let Some((len, rest)) = bytes.split_first_chunk::<4>() else {
            tracing::warn!(at, "the relaxed log ends in a torn record's length: left out (never answered)");
            break;
        };
        let len = u32::from_le_bytes(*len) as usize;
        let Some(record) = rest.get(..len) else {
            tracing::warn!(at, "the relaxed log ends in a torn record: left out (never answered)");
            break;
        };
        let batch = unseal(record).and_then(log_record::decode);
        match batch {
            Ok(batch) => batches.push(batch),
            Err(why) if rest.len() == len => {
                tracing::warn!(at, %why, "the relaxed log's last record is damaged: left out (never answered)");
            }
            Err(why) => return Err(format!("is damaged at byte {at}, with records after it: {why}")),
        }
        bytes = &rest[len..];
    }
    Ok(batches)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(id: u64) -> Vec<Mutation> {
        vec![Mutation::NextId(id), Mutation::Delete(id)]
    }

    #[test]
    fn appended_batches_come_back_in_order_until_committed() {
        let dir = tempfile::tempdir().unwrap();
        let (mut log, replay) = RelaxedLog::open(dir.path()).unwrap();
        assert!(replay.is_empty());
        log.append(&batch(1)).unwrap();
        log.append(&batch(2)).unwrap();
        assert_eq!(RelaxedLog::open(dir.path()).unwrap().1, [batch(1), batch(2)]);
        assert_eq!(log.take(), [batch(1), batch(2)].concat());
        log.committed();
        log.append(&batch(3)).unwrap();
        assert_eq!(RelaxedLog::open(dir.path()).unwrap().1, [batch(3)]);
    }

    #[test]
    fn a_torn_last_record_is_left_out_and_damage_before_the_last_refused() {
        let dir = tempfile::tempdir().unwrap();
        let (mut log, _) = RelaxedLog::open(dir.path()).unwrap();
        log.append(&batch(1)).unwrap();
        let one = log.len as usize;
        log.append(&batch(2)).unwrap();
        let path = dir.path().join(LOG_FILE_NAME);
        let whole = std::fs::read(&path).unwrap();
        for cut in one..whole.len() {
            std::fs::write(&path, &whole[..cut]).unwrap();
            assert_eq!(RelaxedLog::open(dir.path()).unwrap().1, [batch(1)], "cut at {cut}");
        }
        let mut last_damaged = whole.clone();
        *last_damaged.last_mut().unwrap() ^= 1;
        std::fs::write(&path, &last_damaged).unwrap();
        assert_eq!(RelaxedLog::open(dir.path()).unwrap().1, [batch(1)]);
        let mut first_damaged = whole;
        first_damaged[one - 1] ^= 1;
        std::fs::write(&path, &first_damaged).unwrap();
        let refused = RelaxedLog::open(dir.path()).err().expect("damage before the last record");
        assert!(refused.to_string().contains("damaged at byte 0"), "{refused}");
    }

    #[test]
    fn a_failed_commit_puts_its_changes_back_first() {
        let dir = tempfile::tempdir().unwrap();
        let (mut log, _) = RelaxedLog::open(dir.path()).unwrap();
        log.append(&batch(1)).unwrap();
        let taken = log.take();
        log.append(&batch(2)).unwrap();
        log.put_back(taken);
        assert_eq!(log.take(), [batch(1), batch(2)].concat());
    }
}
