//! Fuzz harnesses for rttscope's decoders: one module per target, each a
//! `run(&[u8])` that must never panic on any input.
//!
//! The modules depend on nothing but `rttscope` and std, so the same code is
//! compiled twice: by cargo-fuzz (with libFuzzer, see `fuzz_targets/`) and by
//! `proxy/tests/fuzz_regressions.rs` (with `#[path]`, on stable), which
//! replays every kept crash and the seeds. A found case therefore stays a
//! regression test without copying the harness.

pub mod admin_inject;
pub mod binary;
pub mod compress;
pub mod fingerprint;
pub mod framing;
pub mod handshake;
pub mod packets;
pub mod seeds;
pub mod session;

/// Reads structured choices off the front of a fuzz input. Past the end it
/// yields zeros rather than failing, so every input, however short, is a
/// valid run: libFuzzer then mutates freely without wasting executions on
/// inputs the harness would reject.
pub struct Input<'a> {
    data: &'a [u8],
}

impl<'a> Input<'a> {
    pub fn new(data: &'a [u8]) -> Self {
        Input { data }
    }

    pub fn u8(&mut self) -> u8 {
        let (&b, rest) = self.data.split_first().unwrap_or((&0, &[]));
        self.data = rest;
        b
    }

    pub fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.u8(), self.u8()])
    }

    pub fn u64(&mut self) -> u64 {
        let mut le = [0u8; 8];
        for b in &mut le {
            *b = self.u8();
        }
        u64::from_le_bytes(le)
    }

    /// Up to `n` bytes (fewer at the end of the input).
    pub fn bytes(&mut self, n: usize) -> &'a [u8] {
        let (taken, rest) = self.data.split_at(n.min(self.data.len()));
        self.data = rest;
        taken
    }

    /// Everything not read yet.
    pub fn rest(&mut self) -> &'a [u8] {
        std::mem::take(&mut self.data)
    }

    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }
}
