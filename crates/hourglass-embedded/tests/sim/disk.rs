//! A data directory of simulated disks for the real [`RedbStore`]: the
//! store's file, a compaction's copy and the relaxed log ([`CrashDir`]).
//!
//! Each disk keeps what was synced; of each write and length change since,
//! in 4 KiB pieces, a seeded choice says whether it reached the disk before
//! the machine crashed, each on its own (a disk's cache writes back in any
//! order: only a sync orders). The directory's rename of the copy over the
//! file is durable once the directory is synced; a crash before that brings
//! back either file. A process that dies leaves the machine up: the disks
//! then hold every write that returned, as the page cache does.
//!
//! A directory may also fail one operation in so many, seeded, and go on
//! working, as a full or failing device does: a write to redb's file refused
//! with nothing written, an append to the log with any part of it written,
//! a read of the log refused.
//!
//! [`RedbStore`]: hourglass_embedded::RedbStore

use std::path::Path;
use std::sync::Arc;

use hourglass_embedded::{LogFile, Promotion, StoreFile, StoreFiles};
use parking_lot::Mutex;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// The unit a disk writes whole: a write is kept or lost in pieces of this.
const PIECE_BYTES: u64 = 4096;

#[derive(Debug)]
enum Change {
    Write(u64, Vec<u8>),
    SetLen(u64),
}

/// What every disk of a directory shares: one count of operations, the
/// crash, and the failures.
#[derive(Debug, Default)]
struct Machine {
    /// Writes, length changes, syncs, removals and renames so far.
    ops: u64,
    /// The one that crashes the machine.
    crash_at: Option<u64>,
    dead: bool,
    /// One operation in `.1` fails, drawn from `.0`, and the disks go on.
    failing: Option<(StdRng, u32)>,
    /// Operations failed so.
    failed: u64,
}

impl Machine {
    /// Whether the next operation fails (one of the failures), and how much
    /// of a write it leaves (`0..=len`).
    fn fails(&mut self, len: usize) -> Option<usize> {
        let (rng, one_in) = self.failing.as_mut()?;
        rng.random_ratio(1, *one_in).then(|| rng.random_range(0..=len))
    }

    /// Counts an operation; an error if it is the crash, or after it, or
    /// one of the failures.
    fn tick(&mut self) -> std::io::Result<()> {
        if self.dead {
            return Err(std::io::Error::other("the disk is gone"));
        }
        self.ops += 1;
        if self.crash_at == Some(self.ops) {
            self.dead = true;
            return Err(std::io::Error::other("crashed"));
        }
        if self.fails(0).is_some() {
            self.failed += 1;
            return Err(std::io::Error::other("injected: the write failed, nothing written"));
        }
        Ok(())
    }
}

#[derive(Debug, Default)]
struct Disk {
    /// What survives a crash for certain.
    synced: Vec<u8>,
    /// What reads see.
    current: Vec<u8>,
    /// Changes since the last sync, in order.
    pending: Vec<Change>,
}

impl Disk {
    /// A disk that holds `image`, synced.
    fn holding(image: Vec<u8>) -> Disk {
        Disk { synced: image.clone(), current: image, pending: Vec::new() }
    }
}

fn write_at(bytes: &mut Vec<u8>, offset: u64, data: &[u8]) {
    let (start, end) = (offset as usize, offset as usize + data.len());
    if bytes.len() < end {
        bytes.resize(end, 0);
    }
    bytes[start..end].copy_from_slice(data);
}

/// One file: a redb storage backend, or the relaxed log; clones share it.
#[derive(Debug, Clone)]
pub struct CrashDisk {
    disk: Arc<Mutex<Disk>>,
    machine: Arc<Mutex<Machine>>,
}

impl CrashDisk {
    fn holding(image: Vec<u8>, machine: &Arc<Mutex<Machine>>) -> CrashDisk {
        CrashDisk { disk: Arc::new(Mutex::new(Disk::holding(image))), machine: machine.clone() }
    }

    /// What the disk holds after the crash: what was synced, and each piece
    /// of every change since, kept or not as `rng` says.
    fn after_crash(&self, rng: &mut StdRng) -> Vec<u8> {
        let disk = self.disk.lock();
        let mut image = disk.synced.clone();
        for change in &disk.pending {
            match change {
                Change::SetLen(len) => {
                    if rng.random_bool(0.5) {
                        image.resize(*len as usize, 0);
                    }
                }
                Change::Write(offset, data) => {
                    let mut at = *offset;
                    for piece in data.chunks(PIECE_BYTES as usize) {
                        if rng.random_bool(0.5) {
                            write_at(&mut image, at, piece);
                        }
                        at += piece.len() as u64;
                    }
                }
            }
        }
        image
    }

    /// What the disk holds after the process died: every write that returned.
    fn as_written(&self) -> Vec<u8> {
        self.disk.lock().current.clone()
    }
}

impl redb::StorageBackend for CrashDisk {
    fn len(&self) -> Result<u64, std::io::Error> {
        Ok(self.disk.lock().current.len() as u64)
    }

    fn read(&self, offset: u64, out: &mut [u8]) -> Result<(), std::io::Error> {
        if self.machine.lock().dead {
            return Err(std::io::Error::other("the disk is gone"));
        }
        let disk = self.disk.lock();
        let (start, end) = (offset as usize, offset as usize + out.len());
        let bytes = disk.current.get(start..end).ok_or_else(|| std::io::Error::other("read past the end"))?;
        out.copy_from_slice(bytes);
        Ok(())
    }

    fn set_len(&self, len: u64) -> Result<(), std::io::Error> {
        self.machine.lock().tick()?;
        let mut disk = self.disk.lock();
        disk.current.resize(len as usize, 0);
        disk.pending.push(Change::SetLen(len));
        Ok(())
    }

    fn sync_data(&self) -> Result<(), std::io::Error> {
        self.machine.lock().tick()?;
        let disk = &mut *self.disk.lock();
        for change in disk.pending.drain(..) {
            match change {
                Change::SetLen(len) => disk.synced.resize(len as usize, 0),
                Change::Write(offset, data) => write_at(&mut disk.synced, offset, &data),
            }
        }
        Ok(())
    }

    fn write(&self, offset: u64, data: &[u8]) -> Result<(), std::io::Error> {
        self.machine.lock().tick()?;
        self.put(offset, data);
        Ok(())
    }
}

impl CrashDisk {
    /// Writes `data` at `offset`, to be kept by a crash or not.
    fn put(&self, offset: u64, data: &[u8]) {
        let mut disk = self.disk.lock();
        write_at(&mut disk.current, offset, data);
        disk.pending.push(Change::Write(offset, data.to_vec()));
    }
}

/// The relaxed log on a [`CrashDisk`]: appends write at its end.
struct CrashLog(CrashDisk);

impl LogFile for CrashLog {
    fn name(&self) -> &Path {
        "crash dir/relaxed.log".as_ref()
    }

    fn read_all(&mut self) -> std::io::Result<Vec<u8>> {
        let mut machine = self.0.machine.lock();
        if machine.dead {
            return Err(std::io::Error::other("the disk is gone"));
        }
        if machine.fails(0).is_some() {
            machine.failed += 1;
            return Err(std::io::Error::other("injected: the read failed"));
        }
        drop(machine);
        Ok(self.0.disk.lock().current.clone())
    }

    /// A failure leaves any part of the bytes written, a torn record.
    fn append(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        let end = self.0.disk.lock().current.len() as u64;
        let mut machine = self.0.machine.lock();
        if let Some(written) = machine.fails(bytes.len()) {
            machine.failed += 1;
            drop(machine);
            self.0.put(end, &bytes[..written]);
            return Err(std::io::Error::other("injected: the append failed, part of it written"));
        }
        machine.tick()?;
        drop(machine);
        self.0.put(end, bytes);
        Ok(())
    }

    fn set_len(&mut self, len: u64) -> std::io::Result<()> {
        redb::StorageBackend::set_len(&self.0, len)
    }
}

/// What a directory's disks hold: its store's file and its relaxed log.
#[derive(Debug, Default)]
pub struct Images {
    main: Vec<u8>,
    log: Vec<u8>,
}

#[derive(Debug)]
struct Entries {
    main: CrashDisk,
    copy: Option<CrashDisk>,
    /// The main file before a rename the directory has not synced: a crash
    /// brings back either.
    before_rename: Option<CrashDisk>,
    log: CrashDisk,
}

/// A data directory of crash disks: the store's file, a compaction's copy,
/// and the relaxed log; clones share it.
#[derive(Debug, Clone)]
pub struct CrashDir {
    entries: Arc<Mutex<Entries>>,
    machine: Arc<Mutex<Machine>>,
}

impl CrashDir {
    /// A directory whose disks hold `images`, synced.
    pub fn holding(images: Images) -> CrashDir {
        let machine = Arc::new(Mutex::new(Machine::default()));
        let entries = Entries {
            main: CrashDisk::holding(images.main, &machine),
            copy: None,
            before_rename: None,
            log: CrashDisk::holding(images.log, &machine),
        };
        CrashDir { entries: Arc::new(Mutex::new(entries)), machine }
    }

    /// An empty directory.
    pub fn empty() -> CrashDir {
        CrashDir::holding(Images::default())
    }

    /// This directory, failing one operation in `one_in` from now, as
    /// `seed` draws them.
    pub fn failing(self, seed: u64, one_in: u32) -> CrashDir {
        self.machine.lock().failing = Some((StdRng::seed_from_u64(seed), one_in));
        self
    }

    /// Operations failed by [`failing`](CrashDir::failing) so far.
    pub fn failed(&self) -> u64 {
        self.machine.lock().failed
    }

    pub fn ops(&self) -> u64 {
        self.machine.lock().ops
    }

    /// Crashes at the `nth` operation from now.
    pub fn crash_in(&self, nth: u64) {
        let mut machine = self.machine.lock();
        machine.crash_at = Some(machine.ops + nth);
    }

    /// Crashes now: every later operation fails.
    pub fn crash(&self) {
        self.machine.lock().dead = true;
    }

    pub fn crashed(&self) -> bool {
        self.machine.lock().dead
    }

    /// What the disks hold after the machine crashed: the file the
    /// directory names (either, for a rename not synced), and the log, as
    /// their disks kept them.
    pub fn after_crash(&self, rng: &mut StdRng) -> Images {
        let entries = self.entries.lock();
        let main = match &entries.before_rename {
            Some(before) if rng.random_bool(0.5) => before.after_crash(rng),
            _ => entries.main.after_crash(rng),
        };
        Images { main, log: entries.log.after_crash(rng) }
    }

    /// What the disks hold after the process died, the machine up: every
    /// write that returned, the rename's too.
    pub fn as_written(&self) -> Images {
        let entries = self.entries.lock();
        Images { main: entries.main.as_written(), log: entries.log.as_written() }
    }
}

impl StoreFiles for CrashDir {
    fn name(&self) -> &Path {
        "crash dir".as_ref()
    }

    fn open(&self, file: StoreFile, builder: &redb::Builder) -> Result<redb::Database, redb::DatabaseError> {
        let disk = {
            let mut entries = self.entries.lock();
            match file {
                StoreFile::Main => entries.main.clone(),
                StoreFile::Copy => {
                    entries.copy.get_or_insert_with(|| CrashDisk::holding(Vec::new(), &self.machine)).clone()
                }
            }
        };
        builder.create_with_backend(disk)
    }

    fn len(&self, file: StoreFile) -> std::io::Result<u64> {
        let entries = self.entries.lock();
        let disk = match file {
            StoreFile::Main => Some(&entries.main),
            StoreFile::Copy => entries.copy.as_ref(),
        };
        Ok(disk.map_or(0, |disk| disk.disk.lock().current.len() as u64))
    }

    fn remove_copy(&self) -> std::io::Result<()> {
        self.machine.lock().tick()?;
        self.entries.lock().copy = None;
        Ok(())
    }

    fn promote_copy(&self) -> Promotion {
        if let Err(error) = self.machine.lock().tick() {
            return Promotion::Failed(error);
        }
        {
            let mut entries = self.entries.lock();
            let Some(copy) = entries.copy.take() else {
                return Promotion::Failed(std::io::Error::other("no copy to promote"));
            };
            let before = std::mem::replace(&mut entries.main, copy);
            entries.before_rename = Some(before);
        }
        match self.sync_promotion() {
            Ok(()) => Promotion::Done,
            Err(error) => Promotion::Unsynced(error),
        }
    }

    fn sync_promotion(&self) -> std::io::Result<()> {
        self.machine.lock().tick()?;
        self.entries.lock().before_rename = None;
        Ok(())
    }

    fn open_log(&self) -> std::io::Result<Box<dyn LogFile>> {
        Ok(Box::new(CrashLog(self.entries.lock().log.clone())))
    }
}
