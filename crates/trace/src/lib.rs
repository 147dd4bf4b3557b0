//! The locsim trace format, byte by byte in `docs/formats/trace.md`: the one module that encodes
//! and decodes it, in its binary and its text encoding.
//!
//! A trace is a stream of [`Record`]s. A header (`region`, then optionally `warmup`, then `init`
//! records) declares the persistent heap and its initial content; the body is transactions
//! (`begin`, `load`, `store`, `compute`, `commit` or `abort`) and non-transactional `load` and
//! `compute` records; `end` closes the stream. From version 2 a `core` record between
//! transactions says which core runs the records that follow it (core 0 until the first one, and
//! throughout a version-1 trace); from version 3 a `lock` record inside a transaction names a
//! lock the program took there (the replayer on N cores then takes the transaction's recorded
//! locks instead of locking every line it touches). The [`Decoder`] checks every rule of the format
//! as it reads (bad bytes, truncation, a record out of the region, a store outside a
//! transaction, ...) and names the byte offset (and, for text, the line) of the record at fault.
//! It reads through one reused buffer: memory is bounded by the longest record, not by the
//! length of the trace.
#![warn(missing_docs)]

use std::io::{self, Read, Write};

/// First 8 bytes of a binary trace.
pub const MAGIC: [u8; 8] = *b"LOCTRACE";
/// First word of a text trace (`locsim-trace 2`).
pub const TEXT_MAGIC: &str = "locsim-trace";
/// The newest format version: the decoder reads every version from [`OLDEST_VERSION`] to this
/// one, and [`Encoder::with_version`] writes any of them.
pub const VERSION: u16 = 3;
/// The oldest version the decoder reads: version 1, the single-core format (no `core` record;
/// every record runs on core 0).
pub const OLDEST_VERSION: u16 = 1;
/// The first version with the `core` record.
pub const CORE_VERSION: u16 = 2;
/// The first version with the `lock` record.
pub const LOCK_VERSION: u16 = 3;
/// The version [`Encoder::new`] writes: the oldest that holds every record but `lock`, so that
/// a trace without locks reads in every locsim since version 2.
pub const DEFAULT_VERSION: u16 = CORE_VERSION;
/// Bytes of one line, the unit a `lock` record names (a lock on the line holding its address).
pub const LINE_BYTES: u64 = 64;
/// Core numbers a trace may name: `0..MAX_CORES` (a machine may have fewer: see
/// [`Decoder::set_cores`]).
pub const MAX_CORES: u64 = 1 << 16;
/// Bytes of the binary file header.
pub const HEADER_BYTES: usize = 16;
/// Most bytes one `load`, `store` or `init` record may cover.
pub const MAX_ACCESS_BYTES: u64 = 1 << 20;
/// Largest persistent region a trace may declare (64 GiB).
pub const MAX_REGION_BYTES: u64 = 1 << 36;

/// Record opcodes of the binary encoding (the first byte of a record).
pub mod op {
    /// `region base size`
    pub const REGION: u8 = 0x01;
    /// `warmup txs`
    pub const WARMUP: u8 = 0x02;
    /// `init addr len bytes`
    pub const INIT: u8 = 0x03;
    /// `begin`
    pub const BEGIN: u8 = 0x10;
    /// `commit`
    pub const COMMIT: u8 = 0x11;
    /// `abort`
    pub const ABORT: u8 = 0x12;
    /// `load addr len`
    pub const LOAD: u8 = 0x13;
    /// `store addr len bytes`
    pub const STORE: u8 = 0x14;
    /// `compute cycles`
    pub const COMPUTE: u8 = 0x15;
    /// `core n` (version 2)
    pub const CORE: u8 = 0x16;
    /// `lock addr` (version 3)
    pub const LOCK: u8 = 0x17;
    /// `end records`
    pub const END: u8 = 0xFF;
}

/// One record. Addresses are the program's own (inside the declared region).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Record<'a> {
    /// The persistent heap: `size` bytes from `base` (the first record).
    Region {
        /// First byte address of the region.
        base: u64,
        /// Bytes in the region, 1..=[`MAX_REGION_BYTES`].
        size: u64,
    },
    /// The first `txs` transactions warm the caches up and are left out of the figures.
    Warmup {
        /// Number of warm-up transactions (committed or aborted).
        txs: u64,
    },
    /// Initial content of the region, written before any transaction (not a store).
    Init {
        /// First byte address.
        addr: u64,
        /// The bytes.
        bytes: &'a [u8],
    },
    /// TxBegin.
    Begin,
    /// TxCommit.
    Commit,
    /// TxAbort: the transaction's stores are undone.
    Abort,
    /// A load of `len` bytes.
    Load {
        /// First byte address.
        addr: u64,
        /// Bytes loaded, 0..=[`MAX_ACCESS_BYTES`].
        len: u64,
    },
    /// A store of `bytes` (inside a transaction).
    Store {
        /// First byte address.
        addr: u64,
        /// The bytes stored.
        bytes: &'a [u8],
    },
    /// Non-memory work of `cycles` core cycles.
    Compute {
        /// Core cycles.
        cycles: u64,
    },
    /// The records that follow (up to the next `Core`) run on core `core` (version 2; only
    /// between transactions).
    Core {
        /// Core number, `0..`[`MAX_CORES`].
        core: u32,
    },
    /// The running transaction takes the lock of the [`LINE_BYTES`]-byte line of the region
    /// holding `addr` (version 3; only inside a transaction, lines ascending within it). The
    /// lock is the program's, released when the transaction ends; it accesses nothing in the
    /// region.
    Lock {
        /// A byte address inside the region; the lock is that of its line (line `(addr - base)
        /// / 64` of the region).
        addr: u64,
    },
    /// The end of the trace.
    End,
}

/// A bad trace: where and what. Displayed as one line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceError {
    /// Byte offset of the record at fault in the (uncompressed) stream.
    pub offset: u64,
    /// Line number (1-based) in a text trace.
    pub line: Option<u64>,
    /// What is wrong.
    pub msg: String,
}

impl std::fmt::Display for TraceError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.line {
            Some(l) => write!(f, "trace line {l} (byte offset {}): {}", self.offset, self.msg),
            None => write!(f, "trace record at byte offset {}: {}", self.offset, self.msg),
        }
    }
}

impl std::error::Error for TraceError {}

/// Which encoding a stream uses (told by its first bytes).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Encoding {
    /// Opcode bytes and LEB128 numbers.
    Binary,
    /// One record per line.
    Text,
}

// ---------------------------------------------------------------------------------------------
// Encoding

/// Append `v` as unsigned LEB128 (7 bits per byte, low group first, high bit = more follows).
pub fn put_uleb(out: &mut Vec<u8>, mut v: u64) {
    loop {
        let b = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(b);
            return;
        }
        out.push(b | 0x80);
    }
}

/// Writes records in either encoding. It counts the records it writes (the binary `end` record
/// carries the count). Errors are the writer's I/O errors.
pub struct Encoder<W: Write> {
    out: W,
    enc: Encoding,
    records: u64,
    scratch: Vec<u8>,
    /// The core the last `core` record named (0 before any).
    core: u32,
    /// The version in the header: records it lacks are refused.
    version: u16,
}

impl<W: Write> Encoder<W> {
    /// Start a trace on `out` of version [`DEFAULT_VERSION`] (every record but `lock`): the
    /// binary file header or the text version line.
    pub fn new(out: W, enc: Encoding) -> io::Result<Encoder<W>> {
        Encoder::with_version(out, enc, DEFAULT_VERSION)
    }

    /// Start a trace on `out` of format version `version` ([`OLDEST_VERSION`]..=[`VERSION`]);
    /// [`LOCK_VERSION`] to write `lock` records. A record the version lacks is refused
    /// ([`io::ErrorKind::InvalidInput`]).
    pub fn with_version(mut out: W, enc: Encoding, version: u16) -> io::Result<Encoder<W>> {
        if !(OLDEST_VERSION..=VERSION).contains(&version) {
            let m = format!("trace format version {version}: this module writes {OLDEST_VERSION}..={VERSION}");
            return Err(io::Error::new(io::ErrorKind::InvalidInput, m));
        }
        match enc {
            Encoding::Binary => {
                let mut h = [0u8; HEADER_BYTES];
                h[..8].copy_from_slice(&MAGIC);
                h[8..10].copy_from_slice(&version.to_le_bytes());
                out.write_all(&h)?;
            }
            Encoding::Text => writeln!(out, "{TEXT_MAGIC} {version}")?,
        }
        Ok(Encoder { out, enc, records: 0, scratch: Vec::with_capacity(64), core: 0, version })
    }

    /// The format version in the header.
    pub fn version(&self) -> u16 {
        self.version
    }

    /// Make `core` the core of the records that follow: writes a `core` record only when it
    /// differs from the current one (core 0 at the start), so a single-core trace has none.
    /// Call it between transactions (the format allows `core` only there).
    pub fn set_core(&mut self, core: u32) -> io::Result<()> {
        if core == self.core {
            return Ok(());
        }
        self.write(&Record::Core { core })
    }

    /// The core of the records written next.
    pub fn core(&self) -> u32 {
        self.core
    }

    /// Write one record. `End` writes the record count; nothing may follow it. A `core` or
    /// `lock` record in a version without it is refused, before anything is written.
    pub fn write(&mut self, r: &Record) -> io::Result<()> {
        let since = match r {
            Record::Core { .. } => CORE_VERSION,
            Record::Lock { .. } => LOCK_VERSION,
            _ => OLDEST_VERSION,
        };
        if self.version < since {
            let m = format!("a `{}` record in a version-{} trace: allowed from version {since}", name(r), self.version);
            return Err(io::Error::new(io::ErrorKind::InvalidInput, m));
        }
        match self.enc {
            Encoding::Binary => self.write_binary(r)?,
            Encoding::Text => self.write_text(r)?,
        }
        if let Record::Core { core } = *r {
            self.core = core;
        }
        self.records += 1;
        Ok(())
    }

    fn write_binary(&mut self, r: &Record) -> io::Result<()> {
        let s = &mut self.scratch;
        s.clear();
        let mut payload: &[u8] = &[];
        match *r {
            Record::Region { base, size } => {
                s.push(op::REGION);
                put_uleb(s, base);
                put_uleb(s, size);
            }
            Record::Warmup { txs } => {
                s.push(op::WARMUP);
                put_uleb(s, txs);
            }
            Record::Init { addr, bytes } | Record::Store { addr, bytes } => {
                s.push(if matches!(r, Record::Init { .. }) { op::INIT } else { op::STORE });
                put_uleb(s, addr);
                put_uleb(s, bytes.len() as u64);
                payload = bytes;
            }
            Record::Begin => s.push(op::BEGIN),
            Record::Commit => s.push(op::COMMIT),
            Record::Abort => s.push(op::ABORT),
            Record::Load { addr, len } => {
                s.push(op::LOAD);
                put_uleb(s, addr);
                put_uleb(s, len);
            }
            Record::Compute { cycles } => {
                s.push(op::COMPUTE);
                put_uleb(s, cycles);
            }
            Record::Core { core } => {
                s.push(op::CORE);
                put_uleb(s, core.into());
            }
            Record::Lock { addr } => {
                s.push(op::LOCK);
                put_uleb(s, addr);
            }
            Record::End => {
                s.push(op::END);
                put_uleb(s, self.records);
            }
        }
        self.out.write_all(s)?;
        self.out.write_all(payload)
    }

    fn write_text(&mut self, r: &Record) -> io::Result<()> {
        let o = &mut self.out;
        match *r {
            Record::Region { base, size } => writeln!(o, "region {base:#x} {size}"),
            Record::Warmup { txs } => writeln!(o, "warmup {txs}"),
            Record::Init { addr, bytes } | Record::Store { addr, bytes } => {
                let word = if matches!(r, Record::Init { .. }) { "init" } else { "store" };
                let s = &mut self.scratch;
                s.clear();
                for b in bytes {
                    s.extend_from_slice(&[HEX[(b >> 4) as usize], HEX[(b & 15) as usize]]);
                }
                write!(o, "{word} {addr:#x} ")?;
                o.write_all(s)?;
                o.write_all(b"\n")
            }
            Record::Begin => writeln!(o, "begin"),
            Record::Commit => writeln!(o, "commit"),
            Record::Abort => writeln!(o, "abort"),
            Record::Load { addr, len } => writeln!(o, "load {addr:#x} {len}"),
            Record::Compute { cycles } => writeln!(o, "compute {cycles}"),
            Record::Core { core } => writeln!(o, "core {core}"),
            Record::Lock { addr } => writeln!(o, "lock {addr:#x}"),
            Record::End => writeln!(o, "end"),
        }
    }

    /// Flush and return the writer.
    pub fn finish(mut self) -> io::Result<W> {
        self.out.flush()?;
        Ok(self.out)
    }

    /// Records written so far.
    pub fn records(&self) -> u64 {
        self.records
    }
}

const HEX: &[u8; 16] = b"0123456789abcdef";

/// A record's word (its text form's first word).
fn name(r: &Record) -> &'static str {
    match r {
        Record::Region { .. } => "region",
        Record::Warmup { .. } => "warmup",
        Record::Init { .. } => "init",
        Record::Begin => "begin",
        Record::Commit => "commit",
        Record::Abort => "abort",
        Record::Load { .. } => "load",
        Record::Store { .. } => "store",
        Record::Compute { .. } => "compute",
        Record::Core { .. } => "core",
        Record::Lock { .. } => "lock",
        Record::End => "end",
    }
}

// ---------------------------------------------------------------------------------------------
// Decoding

/// Where the stream stands in the format's grammar.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Phase {
    /// Nothing yet: the next record must be `region`.
    Start,
    /// After `region` (and perhaps `warmup` and `init` records).
    Header,
    /// Body, outside a transaction.
    Idle,
    /// Body, inside a transaction.
    InTx,
    /// After `end`.
    Ended,
}

/// Reads and checks a trace from any byte source, in either encoding (told by its first bytes).
pub struct Decoder<R: Read> {
    src: R,
    enc: Encoding,
    buf: Vec<u8>,
    /// `buf[pos..end]` holds unread bytes; `buf[pos]` is at stream offset `offset`.
    pos: usize,
    end: usize,
    offset: u64,
    eof: bool,
    /// Text: the line number of the last line read; decoded bytes of `store`/`init`.
    line: u64,
    bytes: Vec<u8>,
    phase: Phase,
    region: (u64, u64),
    records: u64,
    /// Stream offset of the next record [`Decoder::look_ahead`] has not passed yet.
    ahead: u64,
    /// The stream's format version.
    version: u16,
    /// The core of the records being read (the last `core` record's; 0 before any).
    core: u32,
    /// Core numbers allowed: `0..cores`; `configured` when [`Decoder::set_cores`] set it.
    cores: u64,
    configured: bool,
    /// Inside a transaction: the region line of its last `lock` record (locks ascend).
    lock_line: Option<u64>,
}

/// How far [`Decoder::look_ahead`] runs ahead of the reader, in bytes (about a dozen small
/// transactions).
pub const LOOK_AHEAD_BYTES: u64 = 512;

/// Initial read buffer; it grows (once) to hold the longest record.
const BUF_BYTES: usize = 256 << 10;

impl<R: Read> Decoder<R> {
    /// Start decoding: reads and checks the binary file header or the text version line.
    pub fn new(src: R) -> Result<Decoder<R>, TraceError> {
        let mut d = Decoder {
            src,
            enc: Encoding::Binary,
            buf: vec![0; BUF_BYTES],
            pos: 0,
            end: 0,
            offset: 0,
            eof: false,
            line: 0,
            bytes: Vec::new(),
            phase: Phase::Start,
            region: (0, 0),
            records: 0,
            ahead: 0,
            version: VERSION,
            core: 0,
            cores: MAX_CORES,
            configured: false,
            lock_line: None,
        };
        d.fill(HEADER_BYTES)?;
        let head = &d.buf[d.pos..d.end];
        if head.is_empty() {
            return Err(d.err(0, "empty input: expected a trace header (`LOCTRACE` or `locsim-trace 1`)"));
        }
        if head.starts_with(&[0x28, 0xB5, 0x2F, 0xFD]) {
            return Err(
                d.err(0, "zstd-compressed input: decompress it first (e.g. `zstd -dc FILE | locsim run --trace -`)")
            );
        }
        if head.starts_with(TEXT_MAGIC.as_bytes()) {
            d.enc = Encoding::Text;
            let line = d.version_line()?;
            let mut w = line.split_whitespace();
            let (_, v) = (w.next(), w.next());
            match v.map(str::parse::<u16>) {
                Some(Ok(v)) if w.next().is_none() => d.version = d.known_version(v)?,
                _ => return Err(d.err(0, &format!("bad version line `{line}`: expected `{TEXT_MAGIC} {VERSION}`"))),
            }
            return Ok(d);
        }
        // A short header is truncated whether it stops inside the magic or after it.
        if head.len() < HEADER_BYTES && (MAGIC.starts_with(head) || head.starts_with(&MAGIC)) {
            return Err(d.err(0, &format!("truncated file header: {} of {HEADER_BYTES} bytes", head.len())));
        }
        if !head.starts_with(&MAGIC) {
            return Err(d.err(0, "not a locsim trace: expected magic `LOCTRACE` (binary) or `locsim-trace 1` (text)"));
        }
        let version = u16::from_le_bytes([head[8], head[9]]);
        let flags = u16::from_le_bytes([head[10], head[11]]);
        let reserved = u32::from_le_bytes([head[12], head[13], head[14], head[15]]);
        d.version = d.known_version(version)?;
        if flags != 0 || reserved != 0 {
            return Err(d.err(
                8,
                &format!("header flags {flags:#x} / reserved {reserved:#x}: both must be 0 in version {version}"),
            ));
        }
        d.pos += HEADER_BYTES;
        d.offset += HEADER_BYTES as u64;
        Ok(d)
    }

    /// `v` if this decoder reads that version.
    fn known_version(&self, v: u16) -> Result<u16, TraceError> {
        if (OLDEST_VERSION..=VERSION).contains(&v) {
            return Ok(v);
        }
        Err(self.err(0, &format!("trace format version {v}: this locsim reads versions {OLDEST_VERSION}..={VERSION}")))
    }

    /// The encoding of the stream.
    pub fn encoding(&self) -> Encoding {
        self.enc
    }

    /// The stream's format version ([`OLDEST_VERSION`]..=[`VERSION`]).
    pub fn version(&self) -> u16 {
        self.version
    }

    /// Allow only cores `0..cores` (the machine's core count): a `core` record naming another
    /// is an error naming its offset, the core and the allowed range. Without it, any core
    /// below [`MAX_CORES`] is allowed.
    pub fn set_cores(&mut self, cores: u32) {
        self.cores = u64::from(cores).min(MAX_CORES);
        self.configured = true;
    }

    /// The core of the last record returned (the last `core` record's number; 0 before any).
    pub fn core(&self) -> u32 {
        self.core
    }

    /// The declared region `(base, size)` once the `region` record has been read.
    pub fn region(&self) -> Option<(u64, u64)> {
        (self.phase != Phase::Start).then_some(self.region)
    }

    /// Records decoded so far.
    pub fn records(&self) -> u64 {
        self.records
    }

    fn err(&self, offset: u64, msg: &str) -> TraceError {
        TraceError { offset, line: (self.enc == Encoding::Text).then_some(self.line), msg: msg.to_string() }
    }

    /// Make at least `need` unread bytes available unless the source ends first. Moves the
    /// unread bytes to the front and grows the buffer only when a record needs it.
    fn fill(&mut self, need: usize) -> Result<(), TraceError> {
        while self.end - self.pos < need && !self.eof {
            if self.pos > 0 && (self.buf.len() - self.end < need || self.pos == self.end) {
                self.buf.copy_within(self.pos..self.end, 0);
                self.end -= self.pos;
                self.pos = 0;
            }
            if self.buf.len() - self.end < need.min(BUF_BYTES) {
                self.buf.resize(self.end + need.max(BUF_BYTES), 0);
            }
            match self.src.read(&mut self.buf[self.end..]) {
                Ok(0) => self.eof = true,
                Ok(n) => self.end += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(self.err(self.offset, &format!("read error: {e}"))),
            }
        }
        Ok(())
    }

    /// Call `hint` with the address of every `load` and `store` that lies between
    /// [`LOOK_AHEAD_BYTES`] and about twice that ahead of the reader in the buffered bytes
    /// (binary encoding only; unchecked, for host prefetching: a replayer announces the
    /// addresses its simulated accesses will touch a few transactions early, as the built-in
    /// workloads do). Cheap when nothing new is in reach.
    #[inline]
    pub fn look_ahead(&mut self, mut hint: impl FnMut(u64)) {
        if self.enc != Encoding::Binary {
            return;
        }
        self.ahead = self.ahead.max(self.offset);
        while self.ahead < self.offset + LOOK_AHEAD_BYTES {
            // Buffer index of the stream offset `ahead` (`buf[pos]` is at `offset`).
            let at = self.pos + (self.ahead - self.offset) as usize;
            let Some(&opcode) = self.buf[..self.end].get(at) else { return };
            let mut i = at + 1;
            let num = |i: &mut usize| -> Option<u64> {
                let mut v = 0u64;
                for k in 0..10 {
                    let b = *self.buf[..self.end].get(*i)?;
                    *i += 1;
                    v |= ((b & 0x7f) as u64) << (7 * k);
                    if b & 0x80 == 0 {
                        return Some(v);
                    }
                }
                None
            };
            let step = match opcode {
                op::BEGIN | op::COMMIT | op::ABORT => Some(()),
                op::COMPUTE | op::WARMUP | op::CORE | op::LOCK => num(&mut i).map(drop),
                op::LOAD | op::STORE | op::INIT => match (num(&mut i), num(&mut i)) {
                    (Some(addr), Some(len)) => {
                        if opcode != op::LOAD {
                            i += len.min(MAX_ACCESS_BYTES) as usize;
                        }
                        (opcode != op::INIT).then(|| hint(addr));
                        Some(())
                    }
                    _ => None,
                },
                _ => None,
            };
            if step.is_none() || i > self.end {
                return;
            }
            self.ahead += (i - at) as u64;
        }
    }

    /// The next record, checked against the format's rules; `None` after `end`.
    pub fn next_record(&mut self) -> Result<Option<Record<'_>>, TraceError> {
        if self.phase == Phase::Ended {
            return Ok(None);
        }
        let start = self.offset;
        let r = match self.enc {
            Encoding::Binary => self.binary_record()?,
            Encoding::Text => match self.text_record()? {
                Some(r) => r,
                None => return self.next_record(),
            },
        };
        self.check(start, r)?;
        self.records += 1;
        Ok(Some(self.materialise(r)))
    }

    /// Apply the grammar: region first, header records before the body, stores inside a
    /// transaction, accesses inside the region, `end` outside a transaction and last.
    fn check(&mut self, at: u64, r: Raw) -> Result<(), TraceError> {
        let fail = |d: &Self, m: String| Err(d.err(at, &m));
        let name = r.name();
        match (self.phase, r) {
            (Phase::Start, Raw::Region { base, size }) => {
                if size == 0 || size > MAX_REGION_BYTES {
                    return fail(self, format!("region size {size}: allowed 1..={MAX_REGION_BYTES}"));
                }
                if base.checked_add(size).is_none() {
                    return fail(self, format!("region base {base:#x} + size {size} overflows 64 bits"));
                }
                self.region = (base, size);
                self.phase = Phase::Header;
            }
            (Phase::Start, _) => {
                return fail(self, format!("`{name}` before `region`: a trace starts with `region base size`"))
            }
            (_, Raw::Region { .. }) => return fail(self, "a second `region` record: allowed once, first".into()),
            (Phase::Header, Raw::Warmup { .. }) if self.records == 1 => {}
            (_, Raw::Warmup { .. }) => return fail(self, "`warmup` allowed once, right after `region`".into()),
            (Phase::Header, Raw::Init { .. }) => {}
            (_, Raw::Init { .. }) => {
                return fail(self, "`init` after the body began: allowed only in the header".into())
            }
            (Phase::Header | Phase::Idle, Raw::Begin) => {
                self.phase = Phase::InTx;
                self.lock_line = None;
            }
            (Phase::InTx, Raw::Begin) => {
                return fail(self, "`begin` inside a transaction: transactions do not nest".into())
            }
            (Phase::InTx, Raw::Commit | Raw::Abort) => self.phase = Phase::Idle,
            (_, Raw::Commit | Raw::Abort) => return fail(self, format!("`{name}` outside a transaction")),
            (Phase::InTx, Raw::Store { .. }) => {}
            (_, Raw::Store { .. }) => return fail(self, "`store` outside a transaction".into()),
            (Phase::Header | Phase::Idle, Raw::Load { .. } | Raw::Compute { .. }) => self.phase = Phase::Idle,
            (Phase::InTx, Raw::Load { .. } | Raw::Compute { .. }) => {}
            (_, Raw::Core { .. } | Raw::Lock { .. }) if self.version < r.since() => {
                let (v, since) = (self.version, r.since());
                return fail(self, format!("`{name}` record in a version-{v} trace: allowed from version {since}"));
            }
            (Phase::InTx, Raw::Core { .. }) => {
                return fail(self, "`core` inside a transaction: a transaction runs on one core".into())
            }
            (Phase::Header | Phase::Idle, Raw::Core { core }) => {
                if core >= self.cores {
                    let whose = if self.configured { format!(" (--cores {})", self.cores) } else { String::new() };
                    return fail(self, format!("core {core}: allowed 0..={}{whose}", self.cores - 1));
                }
                self.core = core as u32;
                self.phase = Phase::Idle;
            }
            (Phase::InTx, Raw::Lock { addr }) => self.check_lock(at, addr)?,
            (_, Raw::Lock { .. }) => return fail(self, "`lock` outside a transaction".into()),
            (Phase::InTx, Raw::End { .. }) => {
                return fail(self, "`end` inside a transaction: commit or abort it first".into())
            }
            (_, Raw::End { records }) => {
                if let Some(n) = records {
                    if n != self.records {
                        return fail(
                            self,
                            format!("`end` counts {n} records but {} were read: records lost", self.records),
                        );
                    }
                }
                self.phase = Phase::Ended;
                self.fill(1)?;
                if self.end > self.pos {
                    return Err(self.err(self.offset, "bytes after the `end` record"));
                }
            }
            (Phase::Ended, _) => unreachable!("nothing is decoded after `end`"),
        }
        if let Raw::Init { addr, len } | Raw::Store { addr, len } | Raw::Load { addr, len } = r {
            self.check_access(at, name, addr, len, matches!(r, Raw::Load { .. }))?;
        }
        Ok(())
    }

    /// An access record's length and place: inside the region, of at least one byte unless it
    /// is a `load` (`is_load`: a load may be empty, as the protocol charges what it charges for
    /// one; a store or an init of no bytes has no meaning).
    fn check_access(&self, at: u64, name: &str, addr: u64, len: u64, is_load: bool) -> Result<(), TraceError> {
        let least = u64::from(!is_load);
        if len < least || len > MAX_ACCESS_BYTES {
            return Err(self.err(at, &format!("`{name}` of {len} bytes: allowed {least}..={MAX_ACCESS_BYTES}")));
        }
        let (base, size) = self.region;
        let inside = addr >= base && addr - base <= size && len <= size - (addr - base);
        if !inside {
            let m = format!("`{name}` of {len} bytes at {addr:#x} outside the region {base:#x}..{:#x}", base + size);
            return Err(self.err(at, &m));
        }
        Ok(())
    }

    /// A `lock` record's address: inside the region, its line at or after the transaction's
    /// last lock's (ascending lines keep any set of cores free of deadlock; the same line again
    /// is the lock already held).
    fn check_lock(&mut self, at: u64, addr: u64) -> Result<(), TraceError> {
        let (base, size) = self.region;
        if addr < base || addr - base >= size {
            let m = format!("`lock` at {addr:#x} outside the region {base:#x}..{:#x}", base + size);
            return Err(self.err(at, &m));
        }
        let line = (addr - base) / LINE_BYTES;
        if let Some(last) = self.lock_line.filter(|&l| l > line) {
            let m = format!(
                "`lock` at {addr:#x} (line {line} of the region) after line {last}: \
                 a transaction's locks must ascend"
            );
            return Err(self.err(at, &m));
        }
        self.lock_line = Some(line);
        Ok(())
    }

    /// Turn a checked raw record into a [`Record`], its bytes borrowed from the buffer.
    fn materialise(&self, r: Raw) -> Record<'_> {
        match r {
            Raw::Region { base, size } => Record::Region { base, size },
            Raw::Warmup { txs } => Record::Warmup { txs },
            Raw::Init { addr, len } => Record::Init { addr, bytes: self.payload(len) },
            Raw::Store { addr, len } => Record::Store { addr, bytes: self.payload(len) },
            Raw::Begin => Record::Begin,
            Raw::Commit => Record::Commit,
            Raw::Abort => Record::Abort,
            Raw::Load { addr, len } => Record::Load { addr, len },
            Raw::Compute { cycles } => Record::Compute { cycles },
            Raw::Core { core } => Record::Core { core: core as u32 },
            Raw::Lock { addr } => Record::Lock { addr },
            Raw::End { .. } => Record::End,
        }
    }

    /// The bytes of the last `store`/`init` record.
    fn payload(&self, len: u64) -> &[u8] {
        match self.enc {
            Encoding::Binary => &self.buf[self.pos - len as usize..self.pos],
            Encoding::Text => &self.bytes,
        }
    }

    /// One unsigned LEB128 number at `buf[*at..]`.
    fn uleb(&self, at: &mut usize, rec: u64, what: &str) -> Result<u64, TraceError> {
        let mut v: u64 = 0;
        for i in 0..10 {
            let Some(&b) = self.buf[..self.end].get(*at) else {
                return Err(self.err(rec, &format!("truncated record: the stream ends inside its {what}")));
            };
            *at += 1;
            if i == 9 && b > 1 {
                return Err(self.err(rec, &format!("{what} does not fit in 64 bits")));
            }
            v |= ((b & 0x7f) as u64) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(self.err(rec, &format!("{what} does not fit in 64 bits")))
    }

    fn binary_record(&mut self) -> Result<Raw, TraceError> {
        // The longest record head: an opcode and two 10-byte numbers.
        self.fill(21)?;
        let rec = self.offset;
        if self.pos == self.end {
            return Err(self.err(rec, "truncated trace: the stream ends without an `end` record"));
        }
        let opcode = self.buf[self.pos];
        let mut at = self.pos + 1;
        let raw = match opcode {
            op::REGION => {
                let base = self.uleb(&mut at, rec, "region base")?;
                Raw::Region { base, size: self.uleb(&mut at, rec, "region size")? }
            }
            op::WARMUP => Raw::Warmup { txs: self.uleb(&mut at, rec, "warm-up count")? },
            op::INIT | op::STORE | op::LOAD => {
                let addr = self.uleb(&mut at, rec, "address")?;
                let len = self.uleb(&mut at, rec, "length")?;
                match opcode {
                    op::INIT => Raw::Init { addr, len },
                    op::STORE => Raw::Store { addr, len },
                    _ => Raw::Load { addr, len },
                }
            }
            op::BEGIN => Raw::Begin,
            op::COMMIT => Raw::Commit,
            op::ABORT => Raw::Abort,
            op::COMPUTE => Raw::Compute { cycles: self.uleb(&mut at, rec, "cycle count")? },
            op::CORE => Raw::Core { core: self.uleb(&mut at, rec, "core number")? },
            op::LOCK => Raw::Lock { addr: self.uleb(&mut at, rec, "lock address")? },
            op::END => Raw::End { records: Some(self.uleb(&mut at, rec, "record count")?) },
            other => {
                return Err(self.err(
                    rec,
                    &format!(
                        "unknown record type {other:#04x}: allowed 0x01-0x03, 0x10-0x17, 0xff (docs/formats/trace.md)"
                    ),
                ))
            }
        };
        let head = at - self.pos;
        // The bytes of a store or init follow its head.
        let body = match raw {
            Raw::Init { len, .. } | Raw::Store { len, .. } if len <= MAX_ACCESS_BYTES => len as usize,
            _ => 0,
        };
        if body > 0 {
            self.fill(head + body)?;
            if self.end - self.pos < head + body {
                return Err(self.err(
                    rec,
                    &format!(
                        "truncated record: `{}` of {body} bytes, the stream ends after {}",
                        raw.name(),
                        self.end - self.pos - head
                    ),
                ));
            }
        }
        self.pos += head + body;
        self.offset += (head + body) as u64;
        Ok(raw)
    }

    /// One line of text without its newline (read up to a bounded length), as a range of the
    /// buffer.
    fn text_line(&mut self) -> Result<std::ops::Range<usize>, TraceError> {
        let limit = 2 * MAX_ACCESS_BYTES as usize + 64;
        let mut scanned = 0;
        let nl = loop {
            if let Some(i) = self.buf[self.pos + scanned..self.end].iter().position(|&b| b == b'\n') {
                break Some(self.pos + scanned + i);
            }
            scanned = self.end - self.pos;
            if self.eof {
                break None;
            }
            if scanned > limit {
                return Err(self.err(self.offset, &format!("line longer than {limit} bytes")));
            }
            self.fill(scanned + 1)?;
        };
        let stop = nl.unwrap_or(self.end);
        self.line += 1;
        let start = self.pos;
        let used = stop - start + usize::from(nl.is_some());
        self.pos += used;
        self.offset += used as u64;
        match std::str::from_utf8(&self.buf[start..stop]) {
            Ok(_) => Ok(start..stop),
            Err(_) => Err(self.err(self.offset - used as u64, "not UTF-8 text")),
        }
    }

    /// The version line of a text trace.
    fn version_line(&mut self) -> Result<String, TraceError> {
        let r = self.text_line()?;
        Ok(String::from_utf8_lossy(&self.buf[r]).into_owned())
    }

    /// The next text record; `None` for a blank or comment line.
    fn text_record(&mut self) -> Result<Option<Raw>, TraceError> {
        let rec = self.offset;
        if self.pos == self.end {
            self.fill(1)?;
            if self.pos == self.end {
                self.line += 1;
                return Err(self.err(rec, "truncated trace: the stream ends without an `end` record"));
            }
        }
        let range = self.text_line()?;
        let line = std::str::from_utf8(&self.buf[range]).expect("checked in text_line");
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            return Ok(None);
        }
        let mut words = line.split_ascii_whitespace();
        let word = words.next().unwrap_or("");
        let mut args = [""; 3];
        let mut n = 0;
        for w in words {
            if n < args.len() {
                args[n] = w;
            }
            n += 1;
        }
        let parsed = parse_text(word, &args[..n.min(args.len())], n, &mut self.bytes);
        match parsed {
            Ok(r) => Ok(Some(r)),
            Err(m) => Err(self.err(rec, &m)),
        }
    }
}

/// A decoded record before its bytes are borrowed.
#[derive(Copy, Clone, Debug)]
enum Raw {
    Region { base: u64, size: u64 },
    Warmup { txs: u64 },
    Init { addr: u64, len: u64 },
    Begin,
    Commit,
    Abort,
    Load { addr: u64, len: u64 },
    Store { addr: u64, len: u64 },
    Compute { cycles: u64 },
    Core { core: u64 },
    Lock { addr: u64 },
    End { records: Option<u64> },
}

impl Raw {
    /// The first version with this record.
    fn since(&self) -> u16 {
        match self {
            Raw::Core { .. } => CORE_VERSION,
            Raw::Lock { .. } => LOCK_VERSION,
            _ => OLDEST_VERSION,
        }
    }

    fn name(&self) -> &'static str {
        match self {
            Raw::Region { .. } => "region",
            Raw::Warmup { .. } => "warmup",
            Raw::Init { .. } => "init",
            Raw::Begin => "begin",
            Raw::Commit => "commit",
            Raw::Abort => "abort",
            Raw::Load { .. } => "load",
            Raw::Store { .. } => "store",
            Raw::Compute { .. } => "compute",
            Raw::Core { .. } => "core",
            Raw::Lock { .. } => "lock",
            Raw::End { .. } => "end",
        }
    }
}

/// A number in decimal or `0x` hexadecimal.
fn number(s: &str, what: &str) -> Result<u64, String> {
    let v = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => u64::from_str_radix(h, 16),
        None => s.parse(),
    };
    v.map_err(|_| format!("{what} `{s}`: expected a number (decimal or 0x hex) below 2^64"))
}

/// Hex digits (two per byte) into `out`.
fn hex_bytes(s: &str, out: &mut Vec<u8>) -> Result<(), String> {
    out.clear();
    let b = s.as_bytes();
    if !b.len().is_multiple_of(2) || b.len() as u64 > 2 * MAX_ACCESS_BYTES {
        return Err(format!(
            "bytes `{}`: expected an even number of hex digits, at most {}",
            clip(s),
            2 * MAX_ACCESS_BYTES
        ));
    }
    let digit = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
    for pair in b.chunks_exact(2) {
        match (digit(pair[0]), digit(pair[1])) {
            (Some(h), Some(l)) => out.push(h << 4 | l),
            _ => return Err(format!("bytes `{}`: not hex digits", clip(s))),
        }
    }
    Ok(())
}

fn clip(s: &str) -> &str {
    s.get(..s.len().min(32)).unwrap_or(s)
}

/// One text record from its first word and its fields (`count` fields in all; the first few
/// in `args`).
fn parse_text(word: &str, args: &[&str], count: usize, bytes: &mut Vec<u8>) -> Result<Raw, String> {
    let want = |n: usize, form: &str| {
        if count == n {
            Ok(())
        } else {
            Err(format!("`{word}` takes {n} fields ({form}), found {count}"))
        }
    };
    Ok(match word {
        "region" => {
            want(2, "region BASE SIZE")?;
            Raw::Region { base: number(args[0], "base")?, size: number(args[1], "size")? }
        }
        "warmup" => {
            want(1, "warmup TXS")?;
            Raw::Warmup { txs: number(args[0], "count")? }
        }
        "init" | "store" => {
            want(2, if word == "init" { "init ADDR HEXBYTES" } else { "store ADDR HEXBYTES" })?;
            let addr = number(args[0], "address")?;
            hex_bytes(args[1], bytes)?;
            let len = bytes.len() as u64;
            if word == "init" {
                Raw::Init { addr, len }
            } else {
                Raw::Store { addr, len }
            }
        }
        "load" => {
            want(2, "load ADDR LEN")?;
            Raw::Load { addr: number(args[0], "address")?, len: number(args[1], "length")? }
        }
        "compute" => {
            want(1, "compute CYCLES")?;
            Raw::Compute { cycles: number(args[0], "cycles")? }
        }
        "core" => {
            want(1, "core N")?;
            Raw::Core { core: number(args[0], "core")? }
        }
        "lock" => {
            want(1, "lock ADDR")?;
            Raw::Lock { addr: number(args[0], "lock address")? }
        }
        "begin" | "commit" | "abort" | "end" => {
            want(0, word)?;
            match word {
                "begin" => Raw::Begin,
                "commit" => Raw::Commit,
                "abort" => Raw::Abort,
                _ => Raw::End { records: None },
            }
        }
        other => {
            let allowed = "region, warmup, init, begin, load, store, compute, commit, abort, core, lock, end";
            return Err(format!("unknown record `{}`: allowed {allowed}", clip(other)));
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<Record<'static>> {
        vec![
            Record::Region { base: 0x7f00_0000_0000, size: 4096 },
            Record::Warmup { txs: 1 },
            Record::Init { addr: 0x7f00_0000_0010, bytes: &[1, 2, 3] },
            Record::Compute { cycles: 300 },
            Record::Begin,
            Record::Lock { addr: 0x7f00_0000_0000 },
            Record::Load { addr: 0x7f00_0000_0000, len: 8 },
            Record::Lock { addr: 0x7f00_0000_0fff },
            Record::Store { addr: 0x7f00_0000_0ff8, bytes: &[9; 8] },
            Record::Commit,
            Record::Begin,
            Record::Store { addr: 0x7f00_0000_0000, bytes: &[0xab] },
            Record::Abort,
            Record::Core { core: 3 },
            Record::Load { addr: 0x7f00_0000_0008, len: 0 },
            Record::Begin,
            Record::Store { addr: 0x7f00_0000_0040, bytes: &[1; 64] },
            Record::Commit,
            Record::Core { core: 0 },
            Record::Compute { cycles: 1 },
            Record::End,
        ]
    }

    /// `recs` as a trace of the newest version.
    fn encode(enc: Encoding, recs: &[Record]) -> Vec<u8> {
        let mut e = Encoder::with_version(Vec::new(), enc, VERSION).unwrap();
        for r in recs {
            e.write(r).unwrap();
        }
        e.finish().unwrap()
    }

    fn decode(bytes: &[u8]) -> Result<Vec<String>, TraceError> {
        let mut d = Decoder::new(bytes)?;
        let mut out = Vec::new();
        while let Some(r) = d.next_record()? {
            out.push(format!("{r:?}"));
        }
        Ok(out)
    }

    #[test]
    fn both_encodings_round_trip_every_record_kind() {
        let want: Vec<String> = sample().iter().map(|r| format!("{r:?}")).collect();
        for enc in [Encoding::Binary, Encoding::Text] {
            let bytes = encode(enc, &sample());
            assert_eq!(decode(&bytes).unwrap(), want, "{enc:?}");
        }
    }

    #[test]
    fn binary_bytes_are_little_endian_leb128_as_documented() {
        let mut e = Encoder::new(Vec::new(), Encoding::Binary).unwrap();
        e.write(&Record::Region { base: 0x80, size: 300 }).unwrap();
        e.write(&Record::End).unwrap();
        let bytes = e.finish().unwrap();
        assert_eq!(&bytes[..16], b"LOCTRACE\x02\x00\x00\x00\x00\x00\x00\x00");
        assert_eq!(&bytes[16..], &[0x01, 0x80, 0x01, 0xac, 0x02, 0xff, 0x01]);
        // Version 3, a transaction locking the lines of 0x1040 and 0x10c0 (offsets 0x40 and 0xc0
        // of the region at 0x1000: lines 1 and 3): opcode 0x17, then the address as LEB128.
        let bytes = encode(
            Encoding::Binary,
            &[
                Record::Region { base: 0x1000, size: 256 },
                Record::Begin,
                Record::Lock { addr: 0x1040 },
                Record::Lock { addr: 0x10c0 },
                Record::Commit,
                Record::End,
            ],
        );
        assert_eq!(&bytes[..16], b"LOCTRACE\x03\x00\x00\x00\x00\x00\x00\x00");
        let want = [0x01, 0x80, 0x20, 0x80, 0x02, 0x10, 0x17, 0xc0, 0x20, 0x17, 0xc0, 0x21, 0x11, 0xff, 0x05];
        assert_eq!(&bytes[16..], &want);
        // `core 300` between transactions: opcode 0x16, then 300 as LEB128 (ac 02).
        let bytes = encode(
            Encoding::Binary,
            &[
                Record::Region { base: 0, size: 64 },
                Record::Core { core: 300 },
                Record::Begin,
                Record::Commit,
                Record::End,
            ],
        );
        assert_eq!(&bytes[16..], &[0x01, 0x00, 0x40, 0x16, 0xac, 0x02, 0x10, 0x11, 0xff, 0x04]);
    }

    #[test]
    fn set_core_writes_a_core_record_only_when_the_core_changes() {
        let mut e = Encoder::new(Vec::new(), Encoding::Text).unwrap();
        e.write(&Record::Region { base: 0, size: 64 }).unwrap();
        for c in [0, 0, 2, 2, 1, 0] {
            e.set_core(c).unwrap();
            e.write(&Record::Compute { cycles: 1 }).unwrap();
        }
        e.write(&Record::End).unwrap();
        let text = String::from_utf8(e.finish().unwrap()).unwrap();
        let cores: Vec<&str> = text.lines().filter(|l| l.starts_with("core")).collect();
        assert_eq!(cores, ["core 2", "core 1", "core 0"]);
    }

    /// The core of every body record as the decoder reports it.
    fn cores_of(bytes: &[u8], limit: Option<u32>) -> Result<Vec<u32>, TraceError> {
        let mut d = Decoder::new(bytes)?;
        if let Some(n) = limit {
            d.set_cores(n);
        }
        let mut out = Vec::new();
        while let Some(r) = d.next_record()? {
            if matches!(r, Record::Begin | Record::Load { .. } | Record::Compute { .. }) {
                out.push(d.core());
            }
        }
        Ok(out)
    }

    #[test]
    fn each_record_runs_on_the_core_of_the_last_core_record_and_version_1_on_core_0() {
        let ok = encode(Encoding::Binary, &sample());
        // Compute, begin, load, begin (core 0), load and begin (core 3), compute (core 0).
        assert_eq!(cores_of(&ok, Some(4)).unwrap(), [0, 0, 0, 0, 3, 3, 0]);
        assert_eq!(cores_of(&encode(Encoding::Text, &sample()), None).unwrap(), [0, 0, 0, 0, 3, 3, 0]);
        // A version-1 stream (the same bytes without `core` and `lock` records, version 1) reads
        // as core 0.
        let v1: Vec<Record> =
            sample().into_iter().filter(|r| !matches!(r, Record::Core { .. } | Record::Lock { .. })).collect();
        let mut bytes = encode(Encoding::Binary, &v1);
        bytes[8] = 1;
        let mut d = Decoder::new(&bytes[..]).unwrap();
        assert_eq!(d.version(), 1);
        while d.next_record().unwrap().is_some() {
            assert_eq!(d.core(), 0);
        }
        assert_eq!(cores_of(&bytes, Some(1)).unwrap(), [0; 7]);
    }

    #[test]
    fn a_core_beyond_the_machine_or_the_format_or_a_corrupt_core_field_is_named_with_its_offset() {
        let ok = encode(Encoding::Binary, &sample());
        // `core 3` is the 9th record: at 16 + the bytes of the 8 before it.
        let at = 16 + ok[16..].windows(2).position(|w| w == [op::CORE, 3]).unwrap() as u64;
        let e = cores_of(&ok, Some(2)).unwrap_err();
        assert_eq!(e.offset, at);
        assert_eq!(e.to_string(), format!("trace record at byte offset {at}: core 3: allowed 0..=1 (--cores 2)"));
        let e = cores_of(b"locsim-trace 2\nregion 0 64\ncore 1\nend\n", Some(1)).unwrap_err();
        assert_eq!((e.line, e.offset), (Some(3), 27));
        assert!(e.to_string().contains("core 1: allowed 0..=0"), "{e}");
        let small = encode(Encoding::Binary, &[Record::Region { base: 0, size: 64 }, Record::End]);
        let region = &small[..16 + 3];
        let corrupt: Vec<(Vec<u8>, &str)> = vec![
            // Beyond the format's own range, whatever the machine.
            ([region, &[op::CORE, 0x80, 0x80, 0x04, op::END, 2]].concat(), "core 65536: allowed 0..=65535"),
            ([region, &[op::CORE], &[0xff; 10]].concat(), "core number does not fit in 64 bits"),
            ([region, &[op::CORE, 0x80]].concat(), "the stream ends inside its core number"),
            (b"locsim-trace 2\nregion 0 64\ncore x\nend\n".to_vec(), "core `x`: expected a number"),
            (b"locsim-trace 2\nregion 0 64\ncore\nend\n".to_vec(), "`core` takes 1 fields"),
            (b"locsim-trace 2\nregion 0 64\nbegin\ncore 1\ncommit\nend\n".to_vec(), "`core` inside a transaction"),
            (b"locsim-trace 1\nregion 0 64\ncore 0\nend\n".to_vec(), "`core` record in a version-1 trace"),
            (b"locsim-trace 2\ncore 0\nregion 0 64\nend\n".to_vec(), "`core` before `region`"),
            (b"locsim-trace 2\nregion 0 64\ncore 0\ninit 0 00\nend\n".to_vec(), "`init` after the body"),
        ];
        for (bytes, want) in corrupt {
            let e = cores_of(&bytes, None).expect_err(want).to_string();
            assert!(e.contains(want), "{e:?} should contain {want:?}");
        }
    }

    #[test]
    fn lock_records_round_trip_in_both_encodings_and_every_bad_one_is_named_with_its_offset() {
        let recs = [
            Record::Region { base: 0x1000, size: 4096 },
            Record::Begin,
            Record::Lock { addr: 0x1000 },
            Record::Lock { addr: 0x103f },
            Record::Load { addr: 0x1000, len: 8 },
            Record::Lock { addr: 0x1fff },
            Record::Store { addr: 0x1ff8, bytes: &[1; 8] },
            Record::Commit,
            Record::End,
        ];
        let want: Vec<String> = recs.iter().map(|r| format!("{r:?}")).collect();
        for enc in [Encoding::Binary, Encoding::Text] {
            assert_eq!(decode(&encode(enc, &recs)).unwrap(), want, "{enc:?}");
        }
        let text = String::from_utf8(encode(Encoding::Text, &recs)).unwrap();
        assert!(text.starts_with("locsim-trace 3\n") && text.contains("\nlock 0x103f\n"), "{text}");
        // An encoder of an older version refuses the record before writing anything.
        for v in [1, 2] {
            let mut e = Encoder::with_version(Vec::new(), Encoding::Binary, v).unwrap();
            e.write(&recs[0]).unwrap();
            e.write(&recs[1]).unwrap();
            let err = e.write(&recs[2]).unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
            assert!(err.to_string().contains("allowed from version 3"), "{err}");
            assert_eq!(e.records(), 2);
        }
        assert!(Encoder::with_version(Vec::new(), Encoding::Text, 4).is_err());
        // The first lock of `ok` is the third record: at 16 + region (5 bytes) + begin (1).
        let ok = encode(Encoding::Binary, &recs);
        assert_eq!(ok[22], op::LOCK);
        let e = decode(&[&ok[..22], &[op::LOCK], &[0xff; 10], &ok[25..]].concat()).unwrap_err();
        assert_eq!(e.to_string(), "trace record at byte offset 22: lock address does not fit in 64 bits");
        let e = decode(&[&ok[..22], &[op::LOCK, 0x80, 0x40]].concat()).unwrap_err();
        assert_eq!(e.to_string(), "trace record at byte offset 22: `lock` at 0x2000 outside the region 0x1000..0x2000");
        let e = decode(&[&ok[..22], &[op::LOCK, 0x80]].concat()).unwrap_err();
        assert_eq!(e.offset, 22);
        assert!(e.to_string().contains("the stream ends inside its lock address"), "{e}");
        let mut v2 = ok.clone();
        v2[8] = 2;
        let e = decode(&v2).unwrap_err();
        assert_eq!(
            e.to_string(),
            "trace record at byte offset 22: `lock` record in a version-2 trace: allowed from version 3"
        );
        let t = |body: &str| format!("locsim-trace 3\nregion 0x1000 4096\n{body}").into_bytes();
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (t("begin\nlock 0x1040\nlock 0x1000\ncommit\nend\n"), "line 5 (byte offset 52): `lock` at 0x1000 (line 0 of the region) after line 1: a transaction's locks must ascend"),
            (t("lock 0x1000\nend\n"), "line 3 (byte offset 34): `lock` outside a transaction"),
            (t("begin\nlock 0xfff\ncommit\nend\n"), "`lock` at 0xfff outside the region 0x1000..0x2000"),
            (t("begin\nlock x\ncommit\nend\n"), "lock address `x`: expected a number"),
            (t("begin\nlock\ncommit\nend\n"), "`lock` takes 1 fields (lock ADDR), found 0"),
            (t("begin\nlock 0x1000 8\ncommit\nend\n"), "`lock` takes 1 fields (lock ADDR), found 2"),
            (b"locsim-trace 2\nregion 0 64\nbegin\nlock 0\ncommit\nend\n".to_vec(), "line 4 (byte offset 33): `lock` record in a version-2 trace"),
        ];
        for (bytes, want) in cases {
            let e = decode(&bytes).expect_err(want).to_string();
            assert!(e.contains(want), "{e:?} should contain {want:?}");
        }
        // A new transaction starts its ascent afresh.
        assert!(decode(&t("begin\nlock 0x1040\ncommit\nbegin\nlock 0x1000\nabort\nend\n")).is_ok());
    }

    #[test]
    fn a_record_split_across_reads_decodes_whole() {
        // A reader that hands out one byte at a time.
        struct Trickle<'a>(&'a [u8]);
        impl Read for Trickle<'_> {
            fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
                let n = self.0.len().min(1).min(buf.len());
                buf[..n].copy_from_slice(&self.0[..n]);
                self.0 = &self.0[n..];
                Ok(n)
            }
        }
        let big = vec![7u8; 600_000];
        let recs = [
            Record::Region { base: 0, size: 1 << 20 },
            Record::Begin,
            Record::Store { addr: 8, bytes: &big },
            Record::Commit,
            Record::End,
        ];
        for enc in [Encoding::Binary, Encoding::Text] {
            let bytes = encode(enc, &recs);
            let mut d = Decoder::new(Trickle(&bytes)).unwrap();
            let mut stores = 0;
            while let Some(r) = d.next_record().unwrap() {
                if let Record::Store { bytes, .. } = r {
                    assert_eq!(bytes, &big[..]);
                    stores += 1;
                }
            }
            assert_eq!(stores, 1);
        }
    }

    #[test]
    fn every_kind_of_bad_input_is_named_with_its_offset() {
        let ok = encode(Encoding::Binary, &sample());
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (vec![], "empty input"),
            (b"hello world, not a trace".to_vec(), "not a locsim trace"),
            (ok[..5].to_vec(), "truncated file header"),
            // Found by tests/fuzz_inputs.rs (it panicked): the magic whole, the header cut short.
            (ok[..11].to_vec(), "truncated file header: 11 of 16"),
            ([&ok[..8], &[4, 0], &ok[10..]].concat(), "version 4: this locsim reads versions 1..=3"),
            ([&ok[..8], &[0, 0], &ok[10..]].concat(), "version 0"),
            (ok[..ok.len() - 1].to_vec(), "truncated"),
            ([&ok[..], &[0]].concat(), "bytes after the `end`"),
            ([&ok[..16], &[0x42]].concat(), "unknown record type 0x42"),
            (b"locsim-trace 1\nbegin\nend\n".to_vec(), "before `region`"),
            (b"locsim-trace 1\nregion 0 64\nload 60 8\nend\n".to_vec(), "outside the region"),
            (b"locsim-trace 1\nregion 0 64\nstore 0 00\nend\n".to_vec(), "`store` outside a transaction"),
            (b"locsim-trace 1\nregion 0 64\nbegin\nbegin\nend\n".to_vec(), "do not nest"),
            (b"locsim-trace 1\nregion 0 64\nbegin\nend\n".to_vec(), "inside a transaction"),
            (b"locsim-trace 1\nregion 0 64\nfrob\nend\n".to_vec(), "unknown record `frob`"),
            (b"locsim-trace 1\nregion 0 64\nbegin\nstore 0 0g\n".to_vec(), "not hex"),
            (b"locsim-trace 4\n".to_vec(), "version 4"),
            (b"locsim-trace 1\nregion 0 0\nend\n".to_vec(), "region size 0"),
            (b"locsim-trace 1\nregion 0 64\nbegin\ncommit\nregion 0 64\nend\n".to_vec(), "second `region`"),
            (b"locsim-trace 1\nregion 0 64\nbegin\ncommit\ninit 0 00\nend\n".to_vec(), "`init` after the body"),
            (b"locsim-trace 1\nregion 0 64\nbegin\nstore 0 \nend\n".to_vec(), "takes 2 fields"),
            (b"locsim-trace 1\nregion 0 64\ninit 0 00\nload 0 2000000\nend\n".to_vec(), "of 2000000 bytes"),
            ([&ok[..16], &[0x15], &[0xff; 11]].concat(), "does not fit in 64 bits"),
        ];
        for (bytes, want) in cases {
            let e = decode(&bytes).expect_err(want);
            let line = e.to_string();
            assert!(line.contains(want), "{line:?} should contain {want:?}");
            assert!(!line.contains('\n'));
        }
        // The offset is the record's: the unknown opcode sits right after the header.
        assert_eq!(decode(&[&ok[..16], &[0x42]].concat()).unwrap_err().offset, 16);
        let e = decode(b"locsim-trace 1\nregion 0 64\n\n# c\nload 60 8\nend\n").unwrap_err();
        assert_eq!((e.line, e.offset), (Some(5), 32));
    }

    #[test]
    fn look_ahead_hints_every_access_once_in_order_ahead_of_the_reader() {
        let mut recs = vec![Record::Region { base: 0, size: 1 << 20 }];
        let data = [5u8; 24];
        for i in 0..5000u64 {
            recs.extend([
                Record::Begin,
                Record::Load { addr: 8 * i, len: 8 },
                Record::Store { addr: 8 * i + 4, bytes: &data[..(i % 24 + 1) as usize] },
                Record::Compute { cycles: i },
                Record::Commit,
            ]);
        }
        recs.push(Record::End);
        let bytes = encode(Encoding::Binary, &recs);
        let mut d = Decoder::new(&bytes[..]).unwrap();
        let (mut hints, mut seen) = (Vec::new(), Vec::new());
        loop {
            let before = hints.len();
            d.look_ahead(|a| hints.push(a));
            // Whatever is hinted lies ahead of what has been read.
            assert!(hints[before..].iter().all(|a| seen.last().is_none_or(|s| a > s)));
            match d.next_record().unwrap() {
                Some(Record::Load { addr, .. } | Record::Store { addr, .. }) => seen.push(addr),
                Some(_) => {}
                None => break,
            }
        }
        assert_eq!(hints, seen);
    }

    #[test]
    fn a_lost_record_is_caught_by_the_end_count() {
        let ok = encode(
            Encoding::Binary,
            &[Record::Region { base: 0, size: 64 }, Record::Compute { cycles: 1 }, Record::End],
        );
        // Drop the compute record (2 bytes: opcode, 1).
        let cut = [&ok[..16 + 3], &ok[16 + 5..]].concat();
        assert!(decode(&cut).unwrap_err().to_string().contains("records lost"));
    }
}
