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
//!   writer applies them; a replay commits them in that order too.
//! - **Generations.** Each durable commit that empties the log stores a new
//!   generation in redb, in the same transaction, and the records appended
//!   after it carry that generation, numbered from 0: a replay takes only
//!   the records of the generation redb holds, in their numbers' order from
//!   0, and stops at a gap, so that what it takes is a prefix of what was
//!   appended whatever a power loss kept of the file. The log is never fsynced, so after a power loss
//!   it may hold records from before a reset it no longer shows (on file
//!   systems that do not order the two); they are older generations, and left
//!   out. A crash between a durable commit and the reset leaves records of
//!   an older generation too: already in redb, and left out.
//! - **A commit redb lost.** After a failed write the store reopens redb,
//!   which drops its commits without fsync: the log's batches are read back
//!   from the file ([`RelaxedLog::redb_dropped`]) before the next commit
//!   takes them, and committed again. If what became of a durable commit
//!   cannot be read, the log takes no append until a durable commit lands.
//! - **Reads.** A payload kept apart is read from redb by snapshots; until
//!   its batch is committed there, a snapshot finds it among the log's
//!   ([`RelaxedLog::apart`]), as it stood when the snapshot was taken.
//! - **Bounds.** Past [`LOG_BYTES_MAX`] the next batch makes everything
//!   durable first, whatever the interval, and the log starts again.
//!
//! A record in the file: the length of what follows (u32 LE), the generation
//! (u64 LE), the record's number in it (u64 LE), the batch (`log_record`),
//! and a CRC-32 of all but the length (u32 LE). A crash may tear the last record, and a power loss may
//! leave any part of an unsynced file damaged: a replay stops at the first
//! record that does not read whole, and says how many bytes it left. What
//! the log held was at most one interval's writes, which a power loss may
//! lose by the mode's promise.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use super::super::error::StoreError;
use super::super::interface::Mutation;
use super::super::log_record;
use super::super::record;
use super::super::sealed::{seal_from, unseal, Reader};
use super::files::LogFile;
use hourglass_queue::{Failure, Payload};

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
    file: Box<dyn LogFile>,
    /// Bytes of whole records in the file: where a failed append is cut back to.
    len: u64,
    /// The generation of the records appended now: redb's, until the next
    /// durable commit from the log stores the next one.
    generation: u64,
    /// The number of the next record of this generation.
    next_seq: u64,
    /// No append is taken until a durable commit empties the log: an append
    /// failed and could not be cut back (the file ends in a torn record), the
    /// file could not be emptied, or what became of a durable commit could
    /// not be read (redb's generation is not known).
    broken: bool,
    /// redb dropped its commits without fsync: `pending` is read back from
    /// the file before a commit takes it.
    reload_owed: bool,
    /// The changes appended and not yet in redb, in order.
    pending: Vec<Mutation>,
    /// Payload bytes among them.
    pending_bytes: usize,
    /// The payloads kept apart among them.
    apart: Apart,
    /// The record being written, kept for its capacity.
    buf: Vec<u8>,
}

/// Whether an I/O error says the device (or a quota) is full.
pub(super) fn is_full(error: &std::io::Error) -> bool {
    error.kind() == std::io::ErrorKind::StorageFull
        || error.kind() == std::io::ErrorKind::QuotaExceeded
        || error.raw_os_error() == Some(super::ENOSPC)
}

/// Why a file operation on the log failed, as a store error.
fn io_error(what: String, error: std::io::Error) -> StoreError {
    if is_full(&error) {
        StoreError::Full(Failure::new(what, error))
    } else {
        StoreError::Database(Failure::new(what, error))
    }
}

impl RelaxedLog {
    /// The log in `file`, with the batches it holds of `generation`
    /// (redb's), in order, for the store to commit before anything else.
    ///
    /// # Errors
    /// The file cannot be read.
    pub(super) fn open(
        file: Box<dyn LogFile>,
        generation: u64,
    ) -> Result<(RelaxedLog, Vec<Vec<Mutation>>), StoreError> {
        let mut log = RelaxedLog {
            file,
            len: 0,
            generation,
            next_seq: 0,
            broken: false,
            reload_owed: false,
            pending: Vec::new(),
            pending_bytes: 0,
            apart: Arc::default(),
            buf: Vec::new(),
        };
        let (batches, len) = log.read()?;
        (log.len, log.next_seq) = (len, batches.len() as u64);
        Ok((log, batches))
    }

    fn error(&self, what: &str, error: std::io::Error) -> StoreError {
        io_error(format!("{what} the relaxed log {}", self.file.name().display()), error)
    }

    /// The batches of this generation in the file, in order, and the file's
    /// length.
    fn read(&mut self) -> Result<(Vec<Vec<Mutation>>, u64), StoreError> {
        let bytes = self.file.read_all().map_err(|error| self.error("cannot read", error))?;
        Ok((read_records(&bytes, self.generation, self.file.name()), bytes.len() as u64))
    }

    /// Appends `batch`, which then waits for a commit to redb. A failed
    /// append leaves the file as it was, or the log broken until it starts
    /// again.
    ///
    /// # Errors
    /// The write failed ([`StoreError::Full`] if the device is), or the log
    /// is broken by an earlier one.
    pub(super) fn append(&mut self, batch: &[Mutation]) -> Result<(), StoreError> {
        if self.broken {
            return Err(StoreError::Database(Failure::msg(format!(
                "the relaxed log {} takes no write until a durable commit empties it (a torn record, a file that \
                 could not be emptied, or redb's generation unknown after a failed write)",
                self.file.name().display()
            ))));
        }
        // The length, then the generation, the number and the batch, sealed.
        self.buf.clear();
        self.buf.extend_from_slice(&[0; 4]);
        self.buf.extend_from_slice(&self.generation.to_le_bytes());
        self.buf.extend_from_slice(&self.next_seq.to_le_bytes());
        log_record::encode(batch, &mut self.buf);
        seal_from(&mut self.buf, 4);
        let len = (self.buf.len() - 4) as u32;
        self.buf[..4].copy_from_slice(&len.to_le_bytes());
        if let Err(error) = self.file.append(&self.buf) {
            // A torn record would hide every later one: cut it off.
            self.broken = self.file.set_len(self.len).is_err();
            return Err(self.error("cannot append to", error));
        }
        self.len += self.buf.len() as u64;
        self.next_seq += 1;
        self.hold(batch);
        Ok(())
    }

    /// Takes `batch` as waiting for redb: its payloads kept apart readable.
    fn hold(&mut self, batch: &[Mutation]) {
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

    /// Whether the log must be made durable before it takes another batch:
    /// at its bound, or broken.
    pub(super) fn full(&self) -> bool {
        self.len >= LOG_BYTES_MAX || self.broken
    }

    /// The changes not yet in redb, in order, for a commit to take (read
    /// back from the file first if redb dropped them); handed back by
    /// [`put_back`](RelaxedLog::put_back) if it fails, or followed by
    /// [`applied`](RelaxedLog::applied) or
    /// [`committed`](RelaxedLog::committed).
    ///
    /// # Errors
    /// A reload owed failed again: nothing is taken, and it stays owed.
    pub(super) fn take(&mut self) -> Result<Vec<Mutation>, StoreError> {
        if self.reload_owed {
            self.reload()?;
        }
        Ok(std::mem::take(&mut self.pending))
    }

    /// redb was opened again after a failed write, and dropped its commits
    /// without fsync, the log's among them: every batch of this generation is
    /// read back from the file before the next commit takes them. With
    /// `generation_unknown`, whether a durable commit stored the next
    /// generation could not be read either: no append is taken until a
    /// durable commit lands, so that no record is written under a generation
    /// a replay might leave out.
    pub(super) fn redb_dropped(&mut self, generation_unknown: bool) {
        self.reload_owed = true;
        self.broken |= generation_unknown;
    }

    /// The changes [`take`](RelaxedLog::take) took, their commit failed: they
    /// wait again, first.
    pub(super) fn put_back(&mut self, mut pending: Vec<Mutation>) {
        pending.append(&mut self.pending);
        self.pending = pending;
    }

    /// Every batch of this generation, read back from the file, waits for
    /// redb again: what to do once redb has dropped its commits without
    /// fsync (reopened after a failed write).
    ///
    /// # Errors
    /// The file cannot be read.
    pub(super) fn reload(&mut self) -> Result<(), StoreError> {
        let (batches, _) = self.read()?;
        self.pending.clear();
        self.pending_bytes = 0;
        for batch in batches {
            self.hold(&batch);
        }
        self.reload_owed = false;
        Ok(())
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

    /// The generation a durable commit that empties the log stores.
    pub(super) fn next_generation(&self) -> u64 {
        self.generation + 1
    }

    /// A durable commit holds every change taken and stored `generation`
    /// ([`next_generation`](RelaxedLog::next_generation)): the log starts
    /// again. A log that cannot be emptied takes no append until it is (by
    /// the next durable commit): its records are of an older generation,
    /// which a replay leaves out, but what follows them may not read whole,
    /// and records appended after it would never be read.
    pub(super) fn committed(&mut self, generation: u64) {
        self.applied();
        (self.generation, self.next_seq, self.reload_owed) = (generation, 0, false);
        match self.file.set_len(0) {
            Ok(()) => (self.len, self.broken) = (0, false),
            Err(error) => {
                self.broken = true;
                tracing::warn!(%error, path = %self.file.name().display(), "cannot empty the relaxed log: it takes no write until the next durable commit empties it");
            }
        }
    }

    /// The payloads kept apart that redb does not hold yet, for snapshots.
    pub(super) fn apart(&self) -> Apart {
        self.apart.clone()
    }
}

/// The batches of `generation` in a log's records, in order, up to the
/// first record that does not read whole.
fn read_records(mut bytes: &[u8], generation: u64, path: &Path) -> Vec<Vec<Mutation>> {
    let total = bytes.len();
    let mut batches = Vec::new();
    let mut older = 0;
    while !bytes.is_empty() {
        let at = total - bytes.len();
        let record = bytes.split_first_chunk::<4>().and_then(|(len, rest)| {
            let len = u32::from_le_bytes(*len) as usize;
            rest.get(..len).map(|record| (record, &rest[len..]))
        });
        let read = record.ok_or_else(|| "torn".to_owned()).and_then(|(record, rest)| {
            let mut reader = Reader { bytes: unseal(record)?, at: 0 };
            let (of, seq) = (reader.u64()?, reader.u64()?);
            Ok((of, seq, log_record::decode(&reader.bytes[reader.at..])?, rest))
        });
        match read {
            Ok((of, seq, batch, rest)) if of == generation => {
                if seq != batches.len() as u64 {
                    tracing::warn!(path = %path.display(), at, left = total - at, expected = batches.len(), seq, "the relaxed log skips a record here (a power loss's damage): the rest left out");
                    break;
                }
                batches.push(batch);
                bytes = rest;
            }
            Ok((_, _, _, rest)) => {
                older += 1;
                bytes = rest;
            }
            Err(why) => {
                tracing::warn!(path = %path.display(), at, left = total - at, %why, "the relaxed log ends in a record that does not read whole: the rest left out (never answered, or lost with the machine)");
                break;
            }
        }
    }
    if older > 0 {
        tracing::info!(path = %path.display(), older, "the relaxed log holds records of an older generation, already in redb: left out");
    }
    batches
}

#[cfg(test)]
mod tests {
    use super::super::files::{Directory, StoreFiles, LOG_FILE_NAME};
    use super::*;

    /// The log of a data directory at `dir`, as a store opens it.
    fn open(dir: &Path, generation: u64) -> Result<(RelaxedLog, Vec<Vec<Mutation>>), StoreError> {
        RelaxedLog::open(Directory::new(dir, "tasks.redb").open_log().unwrap(), generation)
    }

    fn batch(id: u64) -> Vec<Mutation> {
        vec![Mutation::NextId(id), Mutation::Delete(id)]
    }

    #[test]
    fn appended_batches_come_back_in_order_until_committed() {
        let dir = tempfile::tempdir().unwrap();
        let (mut log, replay) = open(dir.path(), 0).unwrap();
        assert!(replay.is_empty());
        log.append(&batch(1)).unwrap();
        log.append(&batch(2)).unwrap();
        assert_eq!(open(dir.path(), 0).unwrap().1, [batch(1), batch(2)]);
        assert_eq!(log.take().unwrap(), [batch(1), batch(2)].concat());
        log.committed(log.next_generation());
        log.append(&batch(3)).unwrap();
        assert_eq!(open(dir.path(), 1).unwrap().1, [batch(3)]);
    }

    /// Records of an older generation (already in redb) are left out,
    /// wherever a power loss or a crash left them.
    #[test]
    fn a_replay_takes_the_generation_redb_holds() {
        let dir = tempfile::tempdir().unwrap();
        let (mut log, _) = open(dir.path(), 4).unwrap();
        log.append(&batch(1)).unwrap();
        let path = dir.path().join(LOG_FILE_NAME);
        let older = std::fs::read(&path).unwrap();
        log.committed(5);
        log.append(&batch(2)).unwrap();
        // As if the reset had been lost: the older record back before the new.
        let newer = std::fs::read(&path).unwrap();
        std::fs::write(&path, [older, newer].concat()).unwrap();
        assert_eq!(open(dir.path(), 5).unwrap().1, [batch(2)]);
        assert_eq!(open(dir.path(), 4).unwrap().1, [batch(1)]);
    }

    /// A replay stops at the first record that does not read whole: torn by
    /// a crash, or damaged by a power loss.
    #[test]
    fn a_replay_stops_at_the_first_record_that_does_not_read_whole() {
        let dir = tempfile::tempdir().unwrap();
        let (mut log, _) = open(dir.path(), 0).unwrap();
        log.append(&batch(1)).unwrap();
        let one = log.len as usize;
        log.append(&batch(2)).unwrap();
        log.append(&batch(3)).unwrap();
        let path = dir.path().join(LOG_FILE_NAME);
        let whole = std::fs::read(&path).unwrap();
        for cut in one..whole.len() {
            std::fs::write(&path, &whole[..cut]).unwrap();
            let read = open(dir.path(), 0).unwrap().1;
            assert!(read.len() < 3 && read.first() == Some(&batch(1)), "cut at {cut}");
        }
        let mut zeroed = whole.clone();
        zeroed[one..one + 8].fill(0);
        std::fs::write(&path, &zeroed).unwrap();
        assert_eq!(open(dir.path(), 0).unwrap().1, [batch(1)], "zeros in the middle");
    }

    /// Records are numbered within their generation, and a replay stops at a
    /// gap: what a power loss kept of the file past a lost record (an old
    /// record's bytes, say, in its place) is never replayed without it.
    #[test]
    fn a_replay_stops_at_a_gap_in_the_records_numbers() {
        let dir = tempfile::tempdir().unwrap();
        let (mut log, _) = open(dir.path(), 0).unwrap();
        let mut ends = Vec::new();
        for id in 1..=3 {
            log.append(&batch(id)).unwrap();
            ends.push(log.len as usize);
        }
        let path = dir.path().join(LOG_FILE_NAME);
        let whole = std::fs::read(&path).unwrap();
        // The second record gone, the third whole after the first.
        let holed = [&whole[..ends[0]], &whole[ends[1]..]].concat();
        std::fs::write(&path, holed).unwrap();
        assert_eq!(open(dir.path(), 0).unwrap().1, [batch(1)]);
        // Numbering starts again with each generation.
        let (mut log, _) = open(dir.path(), 0).unwrap();
        log.committed(1);
        log.append(&batch(4)).unwrap();
        assert_eq!(open(dir.path(), 1).unwrap().1, [batch(4)]);
    }

    #[test]
    fn a_reload_reads_back_every_batch_of_the_generation() {
        let dir = tempfile::tempdir().unwrap();
        let (mut log, _) = open(dir.path(), 0).unwrap();
        log.append(&batch(1)).unwrap();
        let _ = log.take();
        log.applied();
        log.append(&batch(2)).unwrap();
        log.reload().unwrap();
        assert_eq!(log.take().unwrap(), [batch(1), batch(2)].concat());
    }
}
