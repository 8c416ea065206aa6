use std::fmt;

/// A handle to an entry of a [`Wheel`](super::Wheel).
///
/// A key names one entry for as long as it is pending. Once that entry has been
/// removed or has expired, the key is stale forever: every operation given it
/// returns `None` or `false`, even after the entry's storage has been reused by a
/// newer entry. Each storage slot carries a 32-bit generation that changes on every
/// reuse, and a slot whose generation is exhausted is retired rather than wrapped,
/// so a stale key can never alias a live entry.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Key {
    pub(crate) index: u32,
    pub(crate) generation: u32,
}

impl Key {
    /// Packs the key into a `u64`, for storage or for use as an id.
    ///
    /// # Example
    /// ```
    /// use hourglass::{Key, Wheel};
    /// let mut wheel = Wheel::new();
    /// let key = wheel.insert(10, "x").unwrap();
    /// assert_eq!(Key::from_raw(key.into_raw()), key);
    /// ```
    #[inline]
    pub const fn into_raw(self) -> u64 {
        ((self.generation as u64) << 32) | self.index as u64
    }

    /// Unpacks a key made by [`Key::into_raw`]. Any `u64` is accepted: one that
    /// names no live entry is simply stale.
    #[inline]
    pub const fn from_raw(raw: u64) -> Key {
        Key { index: raw as u32, generation: (raw >> 32) as u32 }
    }
}

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Key({}v{})", self.index, self.generation)
    }
}
