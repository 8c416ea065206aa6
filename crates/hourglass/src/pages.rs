//! Paged storage: entries in fixed-size pages addressed by a `u32` index.
//!
//! Growth adds one page and never moves an entry (no copy, no latency spike at
//! ten million entries), and the memory held is the entries plus at most one
//! partly used page, instead of up to twice the live set after a `Vec`
//! doubling. A page is a boxed array, so finding an entry is one load of a
//! (hot) page pointer and a masked index that needs no bounds check.
//!
//! The wheel's entry storage and the durable queue's task slots are both
//! built on it; each keeps its own free list (the wheel's is threaded through
//! its entries, with generations).

use std::ops::{Index, IndexMut};

/// `log2` of the entries per page.
const PAGE_BITS: u32 = 12;
/// Entries per page.
pub const PAGE_LEN: usize = 1 << PAGE_BITS;
const PAGE_MASK: u32 = (PAGE_LEN as u32) - 1;
const _: () = assert!(PAGE_LEN.is_power_of_two() && PAGE_MASK as usize == PAGE_LEN - 1);

/// Entries in pages of [`PAGE_LEN`].
///
/// # Example
/// ```
/// use hourglass::Pages;
///
/// let mut pages: Pages<Option<&str>> = Pages::new();
/// let first = pages.grow(|| None);
/// pages[first + 7] = Some("x");
/// assert_eq!(pages.get(first + 7), Some(&Some("x")));
/// assert_eq!(pages.capacity(), hourglass::PAGE_LEN);
/// assert!(pages.get(hourglass::PAGE_LEN as u32).is_none());
/// ```
#[derive(Debug)]
pub struct Pages<T> {
    pages: Vec<Box<[T; PAGE_LEN]>>,
}

impl<T> Default for Pages<T> {
    fn default() -> Self {
        Pages::new()
    }
}

impl<T> Pages<T> {
    /// No pages.
    pub const fn new() -> Self {
        Pages { pages: Vec::new() }
    }

    /// Entries held, in whole pages.
    #[inline]
    pub fn capacity(&self) -> usize {
        self.pages.len() * PAGE_LEN
    }

    /// Room for `pages` more pages in the page table.
    pub fn reserve_pages(&mut self, pages: usize) {
        self.pages.reserve(pages);
    }

    /// Adds a page whose entries are made by `fill`; returns the index of its
    /// first entry.
    ///
    /// # Panics
    /// If the indices would pass `u32::MAX`.
    pub fn grow(&mut self, fill: impl FnMut() -> T) -> u32 {
        let first = u32::try_from(self.capacity()).expect("fewer than 2^32 entries");
        let entries: Box<[T]> = std::iter::repeat_with(fill).take(PAGE_LEN).collect();
        self.pages.push(entries.try_into().unwrap_or_else(|_| unreachable!("a page has PAGE_LEN entries")));
        first
    }

    /// Pages held.
    #[inline]
    pub fn len_pages(&self) -> usize {
        self.pages.len()
    }

    /// Drops the last page and gives its memory back; `false` if there is none.
    /// Its indices are gone until a later [`grow`](Pages::grow) makes them again.
    pub fn pop_page(&mut self) -> bool {
        self.pages.pop().is_some()
    }

    /// Gives back the page table's unused room.
    pub fn shrink_to_fit(&mut self) {
        self.pages.shrink_to_fit();
    }

    /// The entries of page `page` (`index >> log2(PAGE_LEN)`), with the index of the first.
    ///
    /// # Panics
    /// If there is no such page.
    pub fn page(&self, page: usize) -> (u32, &[T]) {
        ((page << PAGE_BITS) as u32, &self.pages[page][..])
    }

    /// The entry at `index`, if its page exists.
    #[inline]
    pub fn get(&self, index: u32) -> Option<&T> {
        Some(&self.pages.get((index >> PAGE_BITS) as usize)?[(index & PAGE_MASK) as usize])
    }

    /// As [`get`](Pages::get), mutably.
    #[inline]
    pub fn get_mut(&mut self, index: u32) -> Option<&mut T> {
        Some(&mut self.pages.get_mut((index >> PAGE_BITS) as usize)?[(index & PAGE_MASK) as usize])
    }

    /// Bytes held by the pages and the page table.
    pub fn bytes_reserved(&self) -> usize {
        self.pages.len() * std::mem::size_of::<[T; PAGE_LEN]>()
            + self.pages.capacity() * std::mem::size_of::<Box<[T; PAGE_LEN]>>()
    }

    /// Every entry with its index, in index order.
    pub fn iter(&self) -> impl Iterator<Item = (u32, &T)> + '_ {
        self.pages.iter().enumerate().flat_map(|(page, entries)| {
            entries.iter().enumerate().map(move |(slot, entry)| (((page as u32) << PAGE_BITS) | slot as u32, entry))
        })
    }
}

impl<T> Index<u32> for Pages<T> {
    type Output = T;

    /// # Panics
    /// If `index` is past the last page.
    #[inline]
    fn index(&self, index: u32) -> &T {
        &self.pages[(index >> PAGE_BITS) as usize][(index & PAGE_MASK) as usize]
    }
}

impl<T> IndexMut<u32> for Pages<T> {
    #[inline]
    fn index_mut(&mut self, index: u32) -> &mut T {
        &mut self.pages[(index >> PAGE_BITS) as usize][(index & PAGE_MASK) as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indices_run_across_pages_in_order() {
        let mut pages = Pages::new();
        assert_eq!(pages.grow(|| 0u32), 0);
        assert_eq!(pages.grow(|| 0u32), PAGE_LEN as u32);
        let last = 2 * PAGE_LEN as u32 - 1;
        pages[last] = 7;
        pages[PAGE_LEN as u32] = 5;
        assert_eq!((pages[last], pages.get(PAGE_LEN as u32 - 1)), (7, Some(&0)));
        assert!(pages.get(last + 1).is_none() && pages.get_mut(u32::MAX).is_none());
        let seen: Vec<(u32, u32)> = pages.iter().filter(|(_, &v)| v != 0).map(|(i, &v)| (i, v)).collect();
        assert_eq!(seen, [(PAGE_LEN as u32, 5), (last, 7)]);
        assert!(pages.bytes_reserved() >= 2 * PAGE_LEN * 4);
        assert_eq!(pages.page(1).0, PAGE_LEN as u32);
        assert!(pages.pop_page() && pages.len_pages() == 1 && pages.get(PAGE_LEN as u32).is_none());
        assert_eq!(pages.grow(|| 0u32), PAGE_LEN as u32, "indices are made again");
        assert!(pages.pop_page() && pages.pop_page() && !pages.pop_page());
    }
}
