//! A growable array in fixed-size chunks.
//!
//! A `Vec` grows by doubling, so an index built up one relation at a time carries up to 100%
//! slack in its largest arrays (at 100,000 relations, room for 131,072). Chunks of 4,096 records
//! bound the slack to one chunk and never copy on growth; indexing costs a shift and a mask.

use std::ops::{Index, IndexMut};

const CHUNK_BITS: usize = 12;
const CHUNK: usize = 1 << CHUNK_BITS;

#[derive(Debug, Clone)]
pub(crate) struct Arena<T> {
    chunks: Vec<Vec<T>>,
    len: usize,
}

impl<T> Default for Arena<T> {
    fn default() -> Self {
        Self {
            chunks: Vec::new(),
            len: 0,
        }
    }
}

impl<T> Arena<T> {
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn push(&mut self, value: T) {
        if self.len.is_multiple_of(CHUNK) {
            // The first chunk grows as a `Vec` does (to exactly `CHUNK`: capacities double from
            // a power of two), so that the many small arenas (an interner or a rule's join per
            // rule) do not each take a whole chunk; later chunks are allocated whole.
            self.chunks.push(if self.len == 0 {
                Vec::new()
            } else {
                Vec::with_capacity(CHUNK)
            });
        }
        if let Some(chunk) = self.chunks.last_mut() {
            chunk.push(value);
            self.len += 1;
        }
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &T> {
        self.chunks.iter().flatten()
    }

    pub(crate) fn iter_mut(&mut self) -> impl Iterator<Item = &mut T> {
        self.chunks.iter_mut().flatten()
    }

    pub(crate) fn heap_bytes(&self) -> usize {
        self.chunks.capacity() * size_of::<Vec<T>>()
            + self
                .chunks
                .iter()
                .map(|c| c.capacity() * size_of::<T>())
                .sum::<usize>()
    }
}

impl<T> Index<usize> for Arena<T> {
    type Output = T;

    fn index(&self, i: usize) -> &T {
        &self.chunks[i >> CHUNK_BITS][i & (CHUNK - 1)]
    }
}

impl<T> IndexMut<usize> for Arena<T> {
    fn index_mut(&mut self, i: usize) -> &mut T {
        &mut self.chunks[i >> CHUNK_BITS][i & (CHUNK - 1)]
    }
}

/// Short strings back to back in chunks of 64 KiB, addressed by a `u32` offset.
///
/// A `String` grown by `push_str` keeps up to as much slack as it holds (4 MB of names sat in
/// 6.8 MB); chunks bound the slack to one chunk plus a string's length per chunk, since a
/// string never straddles two.
#[derive(Debug, Clone, Default)]
pub(crate) struct TextArena {
    chunks: Vec<String>,
    used: usize,
}

/// The longest string a [`TextArena`] takes, and the size of its chunks.
pub(crate) const TEXT_CHUNK: usize = 1 << 16;

impl TextArena {
    /// Appends `s` (at most [`TEXT_CHUNK`] bytes) and returns its offset; `None` when it is too
    /// long or the offsets would pass `u32`.
    pub(crate) fn push(&mut self, s: &str) -> Option<u32> {
        if s.len() > TEXT_CHUNK {
            return None;
        }
        let fits = self
            .chunks
            .last()
            .is_some_and(|c| c.len() + s.len() <= TEXT_CHUNK);
        if !fits {
            u32::try_from((self.chunks.len() + 1) * TEXT_CHUNK).ok()?;
            self.chunks.push(String::with_capacity(TEXT_CHUNK));
        }
        let index = self.chunks.len() - 1;
        let chunk = self.chunks.last_mut()?;
        let off = index * TEXT_CHUNK + chunk.len();
        chunk.push_str(s);
        self.used += s.len();
        u32::try_from(off).ok()
    }

    /// The `len` bytes at `off`, as pushed.
    pub(crate) fn get(&self, off: u32, len: usize) -> &str {
        let (chunk, at) = (off as usize / TEXT_CHUNK, off as usize % TEXT_CHUNK);
        // Offsets come from `push`, which records char boundaries within one chunk.
        self.chunks
            .get(chunk)
            .and_then(|c| c.get(at..at + len))
            .unwrap_or_default()
    }

    /// Bytes pushed so far, dead or alive (slack at chunk ends not included).
    pub(crate) fn len(&self) -> usize {
        self.used
    }

    pub(crate) fn heap_bytes(&self) -> usize {
        self.chunks.capacity() * size_of::<String>()
            + self.chunks.iter().map(String::capacity).sum::<usize>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn push_index_iter_across_chunks() {
        let mut a = Arena::default();
        for i in 0..(CHUNK * 2 + 5) {
            a.push(i);
        }
        assert_eq!(a.len(), CHUNK * 2 + 5);
        assert_eq!(a[CHUNK + 3], CHUNK + 3);
        a[CHUNK * 2] = 7;
        assert_eq!(a[CHUNK * 2], 7);
        assert_eq!(a.iter().count(), a.len());
        assert!(a.heap_bytes() / size_of::<usize>() >= CHUNK * 3);
    }

    #[test]
    fn text_never_straddles_chunks() {
        let mut t = TextArena::default();
        let long = "x".repeat(40_000);
        let a = t.push(&long).expect("fits");
        let b = t.push(&long).expect("fits");
        let c = t.push("name").expect("fits");
        assert_eq!(
            (a, b as usize, c as usize),
            (0, TEXT_CHUNK, TEXT_CHUNK + 40_000)
        );
        assert_eq!(t.get(b, 40_000), long);
        assert_eq!(t.get(c, 4), "name");
        assert_eq!(t.len(), 80_004);
        assert!(t.push(&"y".repeat(TEXT_CHUNK + 1)).is_none());
        assert!(t.heap_bytes() >= 2 * TEXT_CHUNK);
    }
}
