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
//!
//! Packed headers (`swal.packed_headers`, the torn-write fix of docs/faults.md; off by
//! default): `kind` moves into the first 8-byte unit with `seq`, so a header whose first unit is
//! new has the new kind, whatever its other units hold.
//!
//! | bytes  | field |
//! |--------|-------|
//! | 0..8   | u64: bits 0..48 `seq`, bits 48..56 `kind`, bits 56..63 zero, bit 63 set (packed) |
//! | 8..16  | `addr`, as above |
//! | 16..20 | `len`, as above |
//! | 20..24 | zero |
//!
//! Decoding is by bit 63 (an unpacked `seq` never reaches 2^63).

use super::le;

pub const HEADER_BYTES: usize = 24;
pub const KIND_DATA: u32 = 1;
pub const KIND_COMMIT: u32 = 2;
/// Bit 63 of a packed header's first unit.
const PACKED: u64 = 1 << 63;
/// Sequence numbers a packed header holds: below 2^48.
const SEQ_LIMIT: u64 = 1 << 48;

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

    /// [`EntryHeader::encode`] in the packed form (`seq` below 2^48, `kind` below 256).
    pub fn encode_packed(&self) -> [u8; HEADER_BYTES] {
        assert!(self.seq < SEQ_LIMIT && self.kind < 256, "a packed header holds a 48-bit seq and an 8-bit kind");
        let mut b = [0u8; HEADER_BYTES];
        le::put_u64(&mut b, 0, PACKED | (self.kind as u64) << 48 | self.seq);
        le::put_u64(&mut b, 8, self.addr);
        le::put_u32(&mut b, 16, self.len);
        b
    }

    /// Decode either form (by bit 63 of the first unit).
    pub fn decode(b: &[u8]) -> EntryHeader {
        let first = le::u64_at(b, 0);
        if first & PACKED != 0 {
            let (seq, kind) = (first & (SEQ_LIMIT - 1), (first >> 48 & 0xFF) as u32);
            return EntryHeader { seq, addr: le::u64_at(b, 8), len: le::u32_at(b, 16), kind };
        }
        EntryHeader { seq: first, addr: le::u64_at(b, 8), len: le::u32_at(b, 16), kind: le::u32_at(b, 20) }
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

    #[test]
    fn a_packed_header_round_trips_and_its_first_unit_carries_the_kind() {
        let c = EntryHeader { seq: 0x1234_5678_9abc, addr: 7, len: 0, kind: KIND_COMMIT };
        let b = c.encode_packed();
        assert_eq!(EntryHeader::decode(&b), c);
        assert_eq!(&b[0..8], &[0xbc, 0x9a, 0x78, 0x56, 0x34, 0x12, 2, 0x80]);
        // A data header torn after its first unit, over a stale commit header: still data.
        let d = EntryHeader { seq: 9, addr: 0x40, len: 16, kind: KIND_DATA }.encode_packed();
        let stale = EntryHeader { seq: 1, addr: 3, len: 0, kind: KIND_COMMIT }.encode_packed();
        let torn = [&d[0..8], &stale[8..24]].concat();
        assert_eq!(EntryHeader::decode(&torn).kind, KIND_DATA);
    }
}
