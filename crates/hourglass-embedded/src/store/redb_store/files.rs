//! Where a [`RedbStore`](super::RedbStore) keeps its database: the store's
//! file, the copy a compaction writes beside it and then puts in its
//! place, and the relaxed mode's log ([`StoreFiles`]). [`Directory`] is a
//! data directory on the file system; the crash simulator has one of its
//! own.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use redb::{Builder, Database, DatabaseError};

/// One of the two files of a [`StoreFiles`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreFile {
    /// The store's database: what a start opens.
    Main,
    /// A compaction's copy, written beside the main file and never opened
    /// by a start: until it is promoted it is scratch.
    Copy,
}

/// The files a [`RedbStore`](super::RedbStore) lives in.
///
/// The contract a compaction relies on: until [`promote_copy`] returns, a
/// crash leaves the main file as it was; once it has returned, a crash
/// leaves the copy in its place. [`Promotion::Unsynced`] is the one state in
/// between, where either may come back: the store makes no write durable
/// until [`sync_promotion`] has returned.
///
/// [`promote_copy`]: StoreFiles::promote_copy
/// [`sync_promotion`]: StoreFiles::sync_promotion
pub trait StoreFiles: Send + Sync + 'static {
    /// The main file's path (or a name), for messages.
    fn name(&self) -> &Path;

    /// Opens `file` as a database with `builder`'s settings, creating it if
    /// it is not there.
    ///
    /// # Errors
    /// What redb reports.
    fn open(&self, file: StoreFile, builder: &Builder) -> Result<Database, DatabaseError>;

    /// The bytes of `file`.
    ///
    /// # Errors
    /// If its length cannot be read.
    fn len(&self, file: StoreFile) -> io::Result<u64>;

    /// Removes the copy; fine if there is none.
    ///
    /// # Errors
    /// If it is there and cannot be removed.
    fn remove_copy(&self) -> io::Result<()>;

    /// Puts the copy in the main file's place, atomically.
    fn promote_copy(&self) -> Promotion;

    /// Makes a promotion that returned [`Promotion::Unsynced`] durable.
    ///
    /// # Errors
    /// If it still cannot.
    fn sync_promotion(&self) -> io::Result<()>;

    /// Opens the relaxed mode's log, creating it empty if it is not there.
    /// A store opens it once, at its start.
    ///
    /// # Errors
    /// If it cannot be opened or made.
    fn open_log(&self) -> io::Result<Box<dyn LogFile>>;
}

/// The relaxed mode's log file ([`StoreFiles::open_log`]): read whole at a
/// start, appended to, cut back. It is never synced: a durable commit to
/// redb is what makes its batches durable. What it promises is the page
/// cache's: a write that returned is read back after the process dies, and
/// may be lost, in any part, with the machine.
pub trait LogFile: Send + 'static {
    /// Its path (or a name), for messages.
    fn name(&self) -> &Path;

    /// Every byte it holds.
    ///
    /// # Errors
    /// If it cannot be read.
    fn read_all(&mut self) -> io::Result<Vec<u8>>;

    /// Appends `bytes` at its end. On an error, any part of them may be there.
    ///
    /// # Errors
    /// If the write fails.
    fn append(&mut self, bytes: &[u8]) -> io::Result<()>;

    /// Cuts it (or extends it with zeros) to `len` bytes.
    ///
    /// # Errors
    /// If its length cannot be set.
    fn set_len(&mut self, len: u64) -> io::Result<()>;
}

/// What [`StoreFiles::promote_copy`] did.
#[derive(Debug)]
pub enum Promotion {
    /// The copy is the main file, durably.
    Done,
    /// The copy is the main file, but a crash may still bring the old one
    /// back: [`StoreFiles::sync_promotion`] is owed.
    Unsynced(io::Error),
    /// Nothing changed: the main file is the old one.
    Failed(io::Error),
}

/// A data directory: the main file, and the copy beside it under
/// [`COPY_SUFFIX`].
#[derive(Debug, Clone)]
pub struct Directory {
    dir: PathBuf,
    main: PathBuf,
    copy: PathBuf,
}

/// The relaxed log's name in a data directory.
pub const LOG_FILE_NAME: &str = "relaxed.log";

/// What a compaction's copy adds to the main file's name.
pub const COPY_SUFFIX: &str = ".compacting";

impl Directory {
    /// The files named `file_name` (and its copy) in `dir`.
    pub fn new(dir: &Path, file_name: &str) -> Directory {
        Directory {
            dir: dir.to_path_buf(),
            main: dir.join(file_name),
            copy: dir.join(format!("{file_name}{COPY_SUFFIX}")),
        }
    }

    fn path(&self, file: StoreFile) -> &Path {
        match file {
            StoreFile::Main => &self.main,
            StoreFile::Copy => &self.copy,
        }
    }

    /// A rename is durable once the directory that holds it is.
    fn sync_dir(&self) -> io::Result<()> {
        std::fs::File::open(&self.dir)?.sync_all()
    }
}

impl StoreFiles for Directory {
    fn name(&self) -> &Path {
        &self.main
    }

    fn open(&self, file: StoreFile, builder: &Builder) -> Result<Database, DatabaseError> {
        builder.create(self.path(file))
    }

    fn len(&self, file: StoreFile) -> io::Result<u64> {
        std::fs::metadata(self.path(file)).map(|metadata| metadata.len())
    }

    fn remove_copy(&self) -> io::Result<()> {
        match std::fs::remove_file(&self.copy) {
            Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(()),
            removed => removed,
        }
    }

    fn promote_copy(&self) -> Promotion {
        if let Err(error) = std::fs::rename(&self.copy, &self.main) {
            return Promotion::Failed(error);
        }
        match self.sync_dir() {
            Ok(()) => Promotion::Done,
            Err(error) => Promotion::Unsynced(error),
        }
    }

    fn sync_promotion(&self) -> io::Result<()> {
        self.sync_dir()
    }

    fn open_log(&self) -> io::Result<Box<dyn LogFile>> {
        let path = self.dir.join(LOG_FILE_NAME);
        let file = OpenOptions::new().read(true).append(true).create(true).open(&path)?;
        Ok(Box::new(DirectoryLog { file, path }))
    }
}

/// The relaxed log of a [`Directory`]: [`LOG_FILE_NAME`] in it, opened to
/// append.
struct DirectoryLog {
    file: File,
    path: PathBuf,
}

impl LogFile for DirectoryLog {
    fn name(&self) -> &Path {
        &self.path
    }

    fn read_all(&mut self) -> io::Result<Vec<u8>> {
        let mut bytes = Vec::new();
        self.file.seek(SeekFrom::Start(0))?;
        self.file.read_to_end(&mut bytes)?;
        Ok(bytes)
    }

    fn append(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.file.write_all(bytes)
    }

    fn set_len(&mut self, len: u64) -> io::Result<()> {
        self.file.set_len(len)
    }
}
