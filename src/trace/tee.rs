//! One byte stream read by several consumers at their own pace, in bounded memory: how
//! `locsim run --trace - -p a,b,...` replays standard input under every protocol at once.
//!
//! A reader thread cuts the source into chunks and hands each chunk (shared, not copied) to
//! every consumer through a channel of [`DEPTH`] chunks; the fastest consumer waits for the
//! slowest, so at most `DEPTH + 2` chunks per consumer are alive, whatever the stream's length.
#![warn(missing_docs)]

use std::io::{self, Read};
use std::sync::mpsc::{sync_channel, Receiver};
use std::sync::Arc;

/// Bytes per chunk.
pub const CHUNK_BYTES: usize = 1 << 20;
/// Chunks queued per consumer.
pub const DEPTH: usize = 4;

type Chunk = Result<Arc<Vec<u8>>, String>;

/// One consumer's view of the stream.
pub struct Branch {
    rx: Receiver<Chunk>,
    cur: Arc<Vec<u8>>,
    pos: usize,
}

impl Read for Branch {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.pos == self.cur.len() {
            match self.rx.recv() {
                Ok(Ok(c)) => (self.cur, self.pos) = (c, 0),
                Ok(Err(e)) => return Err(io::Error::other(e)),
                Err(_) => return Ok(0),
            }
        }
        let n = buf.len().min(self.cur.len() - self.pos);
        buf[..n].copy_from_slice(&self.cur[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

/// Split `src` into `n` branches (a reader thread feeds them until the source ends or every
/// branch is dropped).
pub fn tee(mut src: Box<dyn Read + Send>, n: usize) -> Vec<Branch> {
    let (txs, rxs): (Vec<_>, Vec<_>) = (0..n).map(|_| sync_channel::<Chunk>(DEPTH)).unzip();
    std::thread::spawn(move || {
        let mut live = txs;
        while !live.is_empty() {
            let mut buf = vec![0u8; CHUNK_BYTES];
            let mut got = 0;
            let chunk: Chunk = loop {
                match src.read(&mut buf[got..]) {
                    Ok(0) => {
                        break Ok(Arc::new({
                            buf.truncate(got);
                            buf
                        }))
                    }
                    Ok(k) => {
                        got += k;
                        if got == buf.len() {
                            break Ok(Arc::new(buf));
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => break Err(e.to_string()),
                }
            };
            let last = !matches!(&chunk, Ok(c) if c.len() == CHUNK_BYTES);
            if !matches!(&chunk, Ok(c) if c.is_empty()) {
                live.retain(|tx| tx.send(chunk.clone()).is_ok());
            }
            if last {
                return;
            }
        }
    });
    rxs.into_iter().map(|rx| Branch { rx, cur: Arc::new(Vec::new()), pos: 0 }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_branch_reads_the_whole_stream() {
        let data: Vec<u8> = (0..3 * CHUNK_BYTES + 12345).map(|i| (i * 7 % 251) as u8).collect();
        let branches = tee(Box::new(io::Cursor::new(data.clone())), 3);
        let got: Vec<Vec<u8>> = std::thread::scope(|s| {
            let hs: Vec<_> = branches
                .into_iter()
                .map(|mut b| {
                    s.spawn(move || {
                        let mut v = Vec::new();
                        b.read_to_end(&mut v).unwrap();
                        v
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for g in got {
            assert!(g == data);
        }
    }
}
