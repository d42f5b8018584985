//! Reference-counted string interning into one contiguous buffer.
//!
//! The relation index holds hundreds of thousands of short strings that repeat heavily (groups,
//! kinds, namespaces, reasons) or are short and unique (names). A `Box<str>` per string would cost
//! 16 bytes plus a heap chunk of at least 32 bytes; here a string costs its bytes in one shared
//! buffer plus a 12-byte slot and a hash-table entry of about 5 bytes, and every repeat costs
//! nothing but a reference count.
//!
//! A [`Sym`] is a slot number and stays valid until its last reference is released; the bytes
//! behind it may move when the buffer is compacted (which happens once dead bytes outweigh live
//! ones, so the amortised cost per release is O(1)).

use std::hash::BuildHasher;

use hashbrown::{DefaultHashBuilder, HashTable};

use crate::arena::Arena;

/// An interned string: an index into [`StrInterner`]'s slots.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct Sym(pub(crate) u32);

/// Marks "no symbol" in packed records (e.g. the namespace of a cluster-scoped key).
pub(crate) const NIL: u32 = u32::MAX;

#[derive(Debug, Clone, Copy)]
struct Slot {
    off: u32,
    len: u32,
    /// 0 = free; a free slot's `off` links to the next free slot.
    refs: u32,
}

#[derive(Debug, Default, Clone)]
pub(crate) struct StrInterner {
    buf: String,
    /// In a chunked arena: a `Vec` would keep up to as much slack as it holds.
    slots: Arena<Slot>,
    free_head: Option<u32>,
    table: HashTable<u32>,
    hasher: DefaultHashBuilder,
    live_bytes: usize,
}

/// The interner refuses to grow past what u32 offsets and ids can address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("string interner is full (4 GiB of text or 2^32 - 1 distinct strings)")]
pub(crate) struct Full;

impl StrInterner {
    fn text(buf: &str, slot: Slot) -> &str {
        // Offsets come from `intern`/`compact`, which only ever record char boundaries of `buf`.
        buf.get(slot.off as usize..(slot.off + slot.len) as usize)
            .unwrap_or_default()
    }

    /// The symbol for `s` if it is interned, without adding a reference.
    pub(crate) fn find(&self, s: &str) -> Option<Sym> {
        let hash = self.hasher.hash_one(s);
        let (buf, slots) = (&self.buf, &self.slots);
        self.table
            .find(hash, |&id| Self::text(buf, slots[id as usize]) == s)
            .map(|&id| Sym(id))
    }

    /// Interns `s`, adding one reference.
    pub(crate) fn intern(&mut self, s: &str) -> Result<Sym, Full> {
        if let Some(sym) = self.find(s) {
            self.slots[sym.0 as usize].refs += 1;
            return Ok(sym);
        }
        let off = u32::try_from(self.buf.len()).map_err(|_| Full)?;
        let len = u32::try_from(s.len()).map_err(|_| Full)?;
        off.checked_add(len).ok_or(Full)?;
        let id = match self.free_head {
            Some(id) => {
                let next = self.slots[id as usize].off;
                self.free_head = (next != NIL).then_some(next);
                self.slots[id as usize] = Slot { off, len, refs: 1 };
                id
            }
            None => {
                let id = u32::try_from(self.slots.len())
                    .ok()
                    .filter(|&id| id != NIL)
                    .ok_or(Full)?;
                self.slots.push(Slot { off, len, refs: 1 });
                id
            }
        };
        self.buf.push_str(s);
        self.live_bytes += s.len();
        let hash = self.hasher.hash_one(s);
        let (buf, slots, hasher) = (&self.buf, &self.slots, &self.hasher);
        self.table.insert_unique(hash, id, |&id| {
            hasher.hash_one(Self::text(buf, slots[id as usize]))
        });
        Ok(Sym(id))
    }

    /// Adds a reference to a symbol already held.
    pub(crate) fn retain(&mut self, sym: Sym) {
        debug_assert!(
            self.slots[sym.0 as usize].refs > 0,
            "retain of a free symbol"
        );
        self.slots[sym.0 as usize].refs += 1;
    }

    /// Drops one reference; the last one frees the string.
    pub(crate) fn release(&mut self, sym: Sym) {
        let slot = &mut self.slots[sym.0 as usize];
        debug_assert!(slot.refs > 0, "release of a free symbol");
        slot.refs -= 1;
        if slot.refs > 0 {
            return;
        }
        let slot = *slot;
        let hash = self.hasher.hash_one(Self::text(&self.buf, slot));
        if let Ok(entry) = self.table.find_entry(hash, |&id| id == sym.0) {
            entry.remove();
        }
        self.slots[sym.0 as usize] = Slot {
            off: self.free_head.unwrap_or(NIL),
            len: 0,
            refs: 0,
        };
        self.free_head = Some(sym.0);
        self.live_bytes -= slot.len as usize;
        // Compact when at least half the buffer is dead (and it is worth the copy).
        if self.buf.len() > 4096 && self.live_bytes * 2 < self.buf.len() {
            self.compact();
        }
    }

    fn compact(&mut self) {
        let mut buf = String::with_capacity(self.live_bytes);
        for slot in self.slots.iter_mut().filter(|s| s.refs > 0) {
            let off = buf.len();
            buf.push_str(Self::text(&self.buf, *slot));
            // Fits: the new buffer is smaller than the old one, whose offsets fitted in u32.
            slot.off = off as u32;
        }
        self.buf = buf;
    }

    pub(crate) fn get(&self, sym: Sym) -> &str {
        Self::text(&self.buf, self.slots[sym.0 as usize])
    }

    pub(crate) fn len(&self) -> usize {
        self.table.len()
    }

    pub(crate) fn heap_bytes(&self) -> usize {
        self.buf.capacity() + self.slots.heap_bytes() + table_bytes(&self.table)
    }
}

/// Heap bytes of a `HashTable<T>`: one control byte per bucket (plus a group's worth of
/// trailing control bytes) and the buckets themselves.
pub(crate) fn table_bytes<T>(table: &HashTable<T>) -> usize {
    let cap = table.capacity();
    if cap == 0 {
        return 0;
    }
    // hashbrown keeps at most 7/8 of the buckets full and rounds buckets up to a power of two.
    let buckets = if cap < 8 {
        (cap + 1).next_power_of_two()
    } else {
        (cap * 8 / 7).next_power_of_two()
    };
    buckets * (std::mem::size_of::<T>() + 1) + 16
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interning_is_shared_and_counted() {
        let mut i = StrInterner::default();
        let a = i.intern("team-a").expect("room");
        let b = i.intern("team-a").expect("room");
        assert_eq!(a, b);
        assert_eq!(i.get(a), "team-a");
        assert_eq!(i.len(), 1);
        i.release(a);
        assert_eq!(i.find("team-a"), Some(b));
        i.release(b);
        assert_eq!(i.find("team-a"), None);
        assert_eq!(i.len(), 0);
    }

    #[test]
    fn free_slots_are_reused_and_compaction_keeps_symbols() {
        let mut i = StrInterner::default();
        let keep: Vec<Sym> = (0..100)
            .map(|n| i.intern(&format!("keep-{n}")).expect("room"))
            .collect();
        for round in 0..5 {
            let tmp: Vec<Sym> = (0..2000)
                .map(|n| {
                    i.intern(&format!("tmp-{round}-{n}-padding-padding"))
                        .expect("room")
                })
                .collect();
            for s in tmp {
                i.release(s);
            }
        }
        assert_eq!(i.len(), 100);
        // Compaction ran: the buffer holds about the live bytes, not five rounds of garbage.
        assert!(i.buf.len() < 40_000, "buffer {} bytes", i.buf.len());
        // Slots were reused rather than appended.
        assert!(i.slots.len() <= 2100);
        for (n, s) in keep.iter().enumerate() {
            assert_eq!(i.get(*s), format!("keep-{n}"));
            assert_eq!(i.find(&format!("keep-{n}")), Some(*s));
        }
    }

    #[test]
    fn empty_string_is_a_string() {
        let mut i = StrInterner::default();
        let e = i.intern("").expect("room");
        assert_eq!(i.get(e), "");
        assert_eq!(i.find(""), Some(e));
        i.release(e);
        assert_eq!(i.find(""), None);
    }
}
