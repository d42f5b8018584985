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
}
