//! What the relay measured about one transfer and the limit it was judged to have hit: the
//! vocabulary the judgement (`transfer`), its words (`verdict`, `emulated`) and the
//! expectations (`expected`) share, with the thresholds both the judgement and its words
//! apply. It depends on no other part of `link` but `loss`.

use serde::{Deserialize, Serialize};

use super::loss::Loss;

/// The limits, named as reports and metrics name them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LinkLimit {
    /// The path's bandwidth (the good case).
    Link,
    /// Our side's receive window.
    ReceiveWindow,
    /// The server sends at most a fixed window per RTT.
    Sender,
    /// The application behind rttscope reads too slowly.
    ClientReader,
    /// Small responses: round trips dominate.
    Latency,
    /// The server pauses with an empty pipe.
    Server,
    /// Lost segments: the sender's window is what its loss rate allows (the Mathis bound).
    Loss,
}

impl LinkLimit {
    /// Every limit, in the order metrics list them.
    pub const ALL: [LinkLimit; 7] = [
        LinkLimit::Link,
        LinkLimit::ReceiveWindow,
        LinkLimit::Sender,
        LinkLimit::ClientReader,
        LinkLimit::Latency,
        LinkLimit::Server,
        LinkLimit::Loss,
    ];

    /// The snake_case name used in reports, logs and the `limit` metric label.
    pub fn name(self) -> &'static str {
        match self {
            LinkLimit::Link => "link",
            LinkLimit::ReceiveWindow => "receive_window",
            LinkLimit::Sender => "sender",
            LinkLimit::ClientReader => "client_reader",
            LinkLimit::Latency => "latency",
            LinkLimit::Server => "server",
            LinkLimit::Loss => "loss",
        }
    }
}

impl std::fmt::Display for LinkLimit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// What the relay measured about one transfer (or a run of small responses).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Measurement {
    /// The one limit that held the transfer back.
    pub limit: LinkLimit,
    /// A second limit that bound at the same time (loss under a window limit).
    pub secondary: Option<LinkLimit>,
    /// What the transfer showed of loss, duplication and reordering.
    pub loss: Loss,
    /// The response's MySQL packet bytes, headers included; 0 for a `latency` judgement.
    pub bytes: u64,
    /// First to last read of the response, µs; for `latency`, the small responses' time summed.
    pub duration_us: u64,
    /// Bytes per second.
    pub throughput: u64,
    /// Mean smoothed RTT (`tcpi_rtt`) over the transfer's readings, µs.
    pub rtt_us: u32,
    /// Least `tcpi_min_rtt` seen during the transfer, µs: what a round trip costs with empty queues.
    pub base_rtt_us: u32,
    /// Bytes delivered per round trip: the effective window.
    pub bytes_per_rtt: u64,
    /// Largest receive window we advertised.
    pub advertised_window: u64,
    /// Largest SO_RCVBUF seen during the transfer, bytes (autotuning grows it).
    pub receive_buffer: u64,
    /// Time the pipe stood empty for less than a round trip between reads, µs: a window waiting for ACKs.
    pub idle_us: u64,
    /// From the end of the sender's first recovery episode (its slow start's end, where loss
    /// ended it) to the transfer's, µs: `duration_us` without one.
    pub after_first_loss_us: u64,
    /// Of `idle_us`, the time in `after_first_loss_us`: the pipe empty while the sender's
    /// window was what loss left it, not still growing.
    pub idle_after_first_loss_us: u64,
    /// Time rttscope stopped reading upstream because the client lagged.
    pub held_off_us: u64,
    /// Of `held_off_us`, the hold-offs after which the server's bytes still waited unread in
    /// rttscope's socket (a round trip's worth and more): the client, not the path, was what
    /// the transfer waited for then.
    pub backlog_held_us: u64,
    /// Bytes the kernel took in from the server while rttscope held off for the client, over
    /// the hold-offs with a reading at both ends (`tcpi_bytes_received` at each): how much
    /// the server went on sending while the application lagged.
    pub held_received: u64,
    /// The time of those hold-offs, µs.
    pub held_timed_us: u64,
    /// Bytes the client's socket acknowledged during the hold-offs read at both ends on it
    /// (`tcpi_bytes_acked` at each): what the application took while it was behind.
    pub reader_taken: u64,
    /// The time of those hold-offs, µs.
    pub reader_timed_us: u64,
    /// The smallest receive window rttscope advertised at a reading right after it resumed
    /// reading for the client, bytes; `None` without a hold-off (or a reading after one).
    pub window_after_hold: Option<u64>,
    /// Time rttscope went on reading the response after the kernel had taken in all of it,
    /// µs (to a reading's resolution): what the client's pace added to the end of the transfer.
    pub reader_tail_us: u64,
    /// Gaps of several RTTs with nothing in flight: the server producing the result.
    pub server_pauses: u32,
    /// Their time, µs.
    pub server_pause_us: u64,
    /// `TCP_INFO` readings taken during the transfer.
    pub samples: u32,
    /// Client waits in the response (for `latency`, over the small responses judged).
    pub round_trips: u64,
    /// Time the emulated link (`inject`) held the transfer, µs: rttscope waiting for room in
    /// a buffer full of bytes the link had yet to let go, and the link's delivery of the
    /// last bytes after the server's. 0 without an emulated link.
    pub emulated_us: u64,
    /// Bytes of the response the application had still to take when its last byte from the
    /// server reached rttscope: what rttscope had written to the client's socket and the
    /// client had not yet acknowledged (`SIOCOUTQ`; under the client's own socket buffer,
    /// and on a Unix socket the kernel's allocation for them). `None`: not read.
    pub client_unread_at_end: Option<u64>,
    /// Readings of the client's TCP socket during the transfer.
    pub client_readings: u32,
    /// Of those, the readings that found more than [`UNREAD_FLOOR`] not yet taken by the
    /// application: whether it fell behind for long or only at the end.
    pub client_behind_readings: u32,
}

/// Holding off for the client cost a transfer time only when the server then had to wait
/// (the window closed) or when the response's end waited for the client after the kernel
/// had it all (this share of the transfer or more). Otherwise the path kept delivering
/// meanwhile and rttscope caught up: over the emulator a reader that lagged in bursts (held
/// off 17-28 % of the time) still left the transfer at 88-92 % of the link, with tails of
/// about a millisecond, where one reading at 40 % of the link left tails of 16-24 %.
pub(super) const READER_TAIL_SHARE: f64 = 0.1;

/// A transfer that moved at no more than this many times the pace at which the application
/// took bytes while it was behind (rttscope holding off for it) moved at the application's
/// pace. Over the emulator a reader taking 5 MB/s from a 100 Mbit/s line was timed at
/// 5.0-5.1 MB/s at 20 and 80 ms, the transfers at 0.98-1.02 × that; at 5 ms, where the
/// acknowledgements come in bursts a hold-off does not always span, at 3.3-6.1 MB/s, the
/// transfers at 0.79-1.85 × (those this misses, [`HELD_SLOWED`] names). A reader that lags in
/// bursts takes little while behind, and the path keeps the transfer far above that.
pub(super) const READER_SETS_PACE: f64 = 1.25;

/// A server whose bytes reached rttscope at under this share of the transfer's pace while
/// rttscope held off for the client slowed with the client: the hold-offs cost the transfer
/// time though no backlog piled up and the window never shut. The same 5 ms reader, whose
/// pace its socket's acknowledgements time only roughly at that RTT (3.3-6.1 MB/s for 5),
/// left the server's bytes arriving at 0.39-0.56 of the transfer's pace while held in the
/// runs its pace did not name; at 20 and 80 ms, where the server kept sending into the
/// hold-offs, 0.87-1.5.
pub(super) const HELD_SLOWED: f64 = 0.6;

/// The hold-offs read at both ends must be this share of the transfer for their pace to say
/// anything of it.
pub(super) const HELD_TIMED_SHARE: f64 = 0.2;

/// A client that held rttscope off this share of a transfer's time or more may have set its
/// pace (and did, if the hold-offs cost something: [`READER_TAIL_SHARE`], a shut window, a
/// backlog in rttscope's socket, or the response left unread at the end).
pub(super) const CLIENT_READER_SHARE: f64 = 0.25;

/// A reader that left this share of the response (or more) still to take when the server's
/// last byte of it reached rttscope read slower than the path delivered: one taking it at the
/// path's pace has only what is in flight between the sockets left by then. Over the emulator
/// (100 Mbit/s, 20 ms, default buffers) the `mariadb` CLI reading at full speed left 0-94 KB of
/// 22 MB; taking 2 MB/s of a 4 MB result it left 2.9 MB (72 %) — without once holding rttscope
/// off: rttscope's send buffer and the client's receive buffer held it all.
pub(super) const READER_UNREAD_SHARE: f64 = 0.2;

/// A reader named by what it left unread was behind at this share of the readings of its
/// socket or more. Over the emulator the slow reader above was behind at 57-69 % of them (four
/// runs); the `mariadb` CLI behind a 30 Mbit/s line at 20 ms, a fast reader, once left 596 KiB
/// of 1 MiB unread at the end after falling behind at 9 of 20 readings (45 %; the cause not
/// found, not seen in the next run of that cell).
pub(super) const BEHIND_SHARE: f64 = 0.5;

/// Less unread than this at the end is what two relay buffers and a socket's hold: a reader at
/// the path's pace leaves that much too.
pub(super) const UNREAD_FLOOR: u64 = 64 << 10;

/// Fewer loss events than this say nothing about a rate.
pub(super) const MIN_LOSS_EVENTS: u32 = 3;

/// A transfer this many times faster than the Mathis bound of its own loss rate was not held
/// by loss: its drops came in a few bursts, a full bottleneck queue overflowing as the sender
/// probed it (over the emulator, autotuned Reno transfers carried 3.9-4.5 × the bound of the
/// slow-start drops they met, at 79 of 100 Mbit/s). Above `LOSS_BOUND`'s end, with margin.
pub(super) const LOSS_OUTRUN: f64 = 2.0;

impl Measurement {
    /// Whether the application was still behind when the server had sent it all: more than
    /// the buffers' worth (and a round trip's) unread at the end, and either a fifth of the
    /// response or after holding rttscope off a quarter of the transfer (when it held
    /// rttscope off, the path slowed to its pace and less is left at the end) — and, where the
    /// client's socket was read during the transfer, behind at half of those readings or more
    /// ([`BEHIND_SHARE`]): a reader that stalled only near the end is not a slow one.
    pub(super) fn reader_left_behind(&self) -> bool {
        let Some(unread) = self.client_unread_at_end else { return false };
        let held = self.held_off_us as f64 / self.duration_us.max(1) as f64;
        let behind_long = self.client_readings == 0
            || f64::from(self.client_behind_readings) >= BEHIND_SHARE * f64::from(self.client_readings);
        unread >= UNREAD_FLOOR.max(self.bytes_per_rtt)
            && (unread as f64 >= READER_UNREAD_SHARE * self.bytes as f64 || held >= CLIENT_READER_SHARE)
            && behind_long
    }

    /// Bytes a second the server's bytes reached rttscope's socket while rttscope held off
    /// for the client (`None`: no hold-off read at both ends).
    pub fn pace_while_held(&self) -> Option<u64> {
        per_second(self.held_received, self.held_timed_us)
    }

    /// Bytes a second the application took while it was behind: what its socket acknowledged
    /// while rttscope held off for it (`None`: no hold-off read at both ends).
    pub fn reader_pace(&self) -> Option<u64> {
        per_second(self.reader_taken, self.reader_timed_us)
    }

    /// Whether the server slowed while rttscope held off for the client ([`slowed_while_held`]).
    pub(super) fn slowed_while_held(&self) -> bool {
        slowed_while_held(self.held_received, self.held_timed_us, self.throughput, self.duration_us)
    }

    /// Whether the transfer moved at the application's pace ([`at_reader_pace`]).
    pub(super) fn at_reader_pace(&self) -> bool {
        at_reader_pace(self.reader_taken, self.reader_timed_us, self.throughput)
    }

    /// The same measurement with the client's unread bytes at its end, and the reader named
    /// if those say it was the limit.
    pub(crate) fn with_client_unread(mut self, unread: u64) -> Measurement {
        self.client_unread_at_end = Some(unread);
        if self.limit != LinkLimit::ClientReader && self.reader_left_behind() {
            (self.limit, self.secondary) = (LinkLimit::ClientReader, None);
        }
        self
    }
}

/// `bytes` over `timed_us`, per second (`None` for no time).
fn per_second(bytes: u64, timed_us: u64) -> Option<u64> {
    (timed_us > 0).then(|| (u128::from(bytes) * 1_000_000 / u128::from(timed_us)) as u64)
}

/// Whether the transfer (`throughput`) moved at the application's pace: no faster than
/// [`READER_SETS_PACE`] times what it took while behind (`taken` bytes in `timed_us`).
pub(super) fn at_reader_pace(taken: u64, timed_us: u64, throughput: u64) -> bool {
    per_second(taken, timed_us).is_some_and(|pace| throughput as f64 <= READER_SETS_PACE * pace as f64)
}

/// Whether the server slowed while rttscope held off for the client: `received` bytes in
/// `timed_us` of hold-offs, under [`HELD_SLOWED`] of the transfer's pace (`throughput`), the
/// hold-offs timed being [`HELD_TIMED_SHARE`] of its `duration_us` or more.
pub(super) fn slowed_while_held(received: u64, timed_us: u64, throughput: u64, duration_us: u64) -> bool {
    timed_us as f64 >= HELD_TIMED_SHARE * duration_us as f64
        && per_second(received, timed_us).is_some_and(|pace| (pace as f64) < HELD_SLOWED * throughput as f64)
}

/// Whether the window rttscope advertised right after a hold-off was shut: under two
/// segments (the kernel advertises none smaller).
pub(super) fn window_closed(window_after_hold: Option<u64>, mss: u32) -> bool {
    window_after_hold.is_some_and(|w| w < 2 * u64::from(mss.max(1)))
}

/// A transfer for tests to vary: 1 MiB in 100 ms over a 1 ms path, a 1 MiB window.
#[cfg(test)]
pub(crate) fn test_measurement(limit: LinkLimit) -> Measurement {
    Measurement {
        limit,
        secondary: None,
        loss: Default::default(),
        bytes: 1 << 20,
        duration_us: 100_000,
        throughput: 10_485_760,
        rtt_us: 1_000,
        base_rtt_us: 1_000,
        bytes_per_rtt: 10_485,
        advertised_window: 1 << 20,
        receive_buffer: 2 << 20,
        idle_us: 0,
        after_first_loss_us: 100_000,
        idle_after_first_loss_us: 0,
        held_off_us: 0,
        backlog_held_us: 0,
        held_received: 0,
        held_timed_us: 0,
        reader_taken: 0,
        reader_timed_us: 0,
        window_after_hold: None,
        reader_tail_us: 0,
        server_pauses: 1,
        server_pause_us: 50_000,
        samples: 100,
        round_trips: 1,
        emulated_us: 0,
        client_unread_at_end: None,
        client_readings: 0,
        client_behind_readings: 0,
    }
}
