//! Which commands waited for a retransmission: the long-haul socket's loss counters
//! (rttscope's retransmissions, the server's segments that arrived behind a hole) read at
//! the end of a response. A command whose window — from the previous reading to its own
//! response's end — moved them was held up by a lost segment, its own or its response's.
//! The reading comes right after the response's last bytes are scanned, so the finished
//! record waits for it here (never longer than the next thing that happens on the
//! connection). A command under a millisecond, a moment after the last reading, gets none
//! (the link probe's gate, `link::probe`): its record is settled as it stands.

use super::CommandRecord;
use crate::socket::LossCounters;

#[derive(Debug, Default)]
pub struct RetransmissionWatch {
    /// A finished record waiting for the reading after its response's end.
    pending: Option<Box<CommandRecord>>,
    /// The counters at the last reading: where the pending command's window began. `None`
    /// until the first reading (none come from a Unix-socket upstream).
    baseline: Option<LossCounters>,
}

impl RetransmissionWatch {
    /// A record just finished: held until the next reading when readings come (a TCP
    /// upstream), else handed back at once. Returns what is to be sent now: it, or the
    /// record held before it (pipelined commands finishing in one read).
    pub fn finished(&mut self, record: Box<CommandRecord>) -> Option<Box<CommandRecord>> {
        if self.baseline.is_none() {
            return Some(record);
        }
        let earlier = self.flush();
        self.pending = Some(record);
        earlier
    }

    /// A reading of the counters: settles the pending record, if any, by whether they
    /// moved since the reading before; the window of the next starts here.
    pub fn counters(&mut self, counters: &LossCounters) -> Option<Box<CommandRecord>> {
        let baseline = self.baseline.replace(*counters);
        let mut record = self.pending.take()?;
        if let Some(baseline) = baseline {
            record.retransmission_wait = counters.retransmission_moved(&baseline);
        }
        Some(record)
    }

    /// Settles the pending record without a new reading (something else happened first):
    /// nothing moved in its window that a reading saw.
    pub fn flush(&mut self) -> Option<Box<CommandRecord>> {
        self.pending.take()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::fingerprint::FingerprintId;

    fn record() -> Box<CommandRecord> {
        Box::new(CommandRecord::new(1, 3, FingerprintId(7), Arc::from("SELECT ?"), 0))
    }

    #[test]
    fn a_command_whose_window_moved_the_counters_waited() {
        let mut w = RetransmissionWatch::default();
        // No readings yet (a Unix-socket upstream): records go straight through.
        assert!(w.finished(record()).is_some_and(|r| !r.retransmission_wait));
        let quiet = LossCounters { segments_in: 10, ..LossCounters::default() };
        assert!(w.counters(&quiet).is_none());
        assert!(w.finished(record()).is_none());
        let settled = w.counters(&LossCounters { segments_in: 11, ..quiet }).expect("settled");
        assert!(!settled.retransmission_wait, "new segments alone are no retransmission");
        w.finished(record());
        let lost = LossCounters { segments_in: 13, out_of_order: 1, ..quiet };
        assert!(w.counters(&lost).expect("settled").retransmission_wait);
        // The next command starts from there.
        w.finished(record());
        assert!(!w.counters(&lost).expect("settled").retransmission_wait);
        w.finished(record());
        let resent = LossCounters { retransmitted: 1, ..lost };
        w.counters(&resent);
        w.finished(record());
        assert!(!w.flush().expect("flushed").retransmission_wait);
    }

    /// A response's end whose record went out before its reading (something else came
    /// first) still ends a window: a loss before it is not the next command's.
    #[test]
    fn a_reading_with_nothing_pending_starts_the_next_window() {
        let mut w = RetransmissionWatch::default();
        let quiet = LossCounters { segments_in: 10, ..LossCounters::default() };
        w.counters(&quiet);
        w.finished(record());
        assert!(w.flush().is_some_and(|r| !r.retransmission_wait), "settled before its reading");
        // Its reading, after a loss during that response.
        assert!(w.counters(&LossCounters { segments_in: 12, out_of_order: 1, ..quiet }).is_none());
        w.finished(record());
        let next = w.counters(&LossCounters { segments_in: 13, out_of_order: 1, ..quiet });
        assert!(next.is_some_and(|r| !r.retransmission_wait), "the next command did not wait");
    }
}
