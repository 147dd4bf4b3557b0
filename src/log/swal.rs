//! S-WAL's software redo log: a circular byte stream after the head, written by ordinary
//! stores through the cache and made durable with cache-line flushes and fences.
//!
//! Log offset `lso` (a u64 byte count that only grows) lives at byte `64 + lso % capacity` of
//! the log area. Entries are 8-byte aligned; an entry may wrap around the end of the area.
//!
//! Entry header (24 bytes), followed for data entries by `len` bytes padded to 8:
//!
//! | bytes  | field | meaning                                                    |
//! |--------|-------|------------------------------------------------------------|
//! | 0..8   | seq   | u64 transaction sequence number                            |
//! | 8..16  | addr  | u64 home byte address (data); number of data entries (commit) |
//! | 16..20 | len   | u32 data bytes (0 for a commit entry)                       |
//! | 20..24 | kind  | u32: 1 = data, 2 = commit                                  |
//!
//! The commit entry is stored and flushed only after every data entry of the transaction is
//! durable, so a durable commit entry whose count matches vouches for the entries before it.

use super::le;

pub const HEADER_BYTES: usize = 24;
pub const KIND_DATA: u32 = 1;
pub const KIND_COMMIT: u32 = 2;

/// A decoded entry header.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct EntryHeader {
    pub seq: u64,
    /// Home address for data entries; number of data entries for a commit entry.
    pub addr: u64,
    pub len: u32,
    pub kind: u32,
}

impl EntryHeader {
    pub fn encode(&self) -> [u8; HEADER_BYTES] {
        let mut b = [0u8; HEADER_BYTES];
        le::put_u64(&mut b, 0, self.seq);
        le::put_u64(&mut b, 8, self.addr);
        le::put_u32(&mut b, 16, self.len);
        le::put_u32(&mut b, 20, self.kind);
        b
    }

    pub fn decode(b: &[u8]) -> EntryHeader {
        EntryHeader { seq: le::u64_at(b, 0), addr: le::u64_at(b, 8), len: le::u32_at(b, 16), kind: le::u32_at(b, 20) }
    }

    /// Bytes the whole entry occupies in the log (header + padded data).
    pub fn entry_bytes(&self) -> u64 {
        (HEADER_BYTES as u64) + (self.len as u64).div_ceil(8) * 8
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trips_and_sizes_pad_to_eight() {
        let h = EntryHeader { seq: 3, addr: 0x1234, len: 5, kind: KIND_DATA };
        assert_eq!(EntryHeader::decode(&h.encode()), h);
        assert_eq!(h.entry_bytes(), 32);
        let c = EntryHeader { seq: 3, addr: 2, len: 0, kind: KIND_COMMIT };
        assert_eq!(c.entry_bytes(), 24);
        assert_eq!(&c.encode()[20..24], &[2, 0, 0, 0]);
    }
}
