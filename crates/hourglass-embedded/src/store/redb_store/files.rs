//! Where a [`RedbStore`](super::RedbStore) keeps its database: the store's
//! file, and the copy a compaction writes beside it and then puts in its
//! place ([`StoreFiles`]). [`Directory`] is a data directory on the file
//! system; the crash simulator has one of its own.

use std::io;
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
}
