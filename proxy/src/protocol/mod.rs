//! The MySQL wire protocol, sans-io: bytes in, events out. No sockets, no
//! clocks, no `.await` — what the unit tests and fuzzers drive directly.
//!
//! - [`framing`] walks a byte stream into packets without buffering payloads;
//! - [`handshake`] parses and masks the connection-phase packets;
//! - [`packets`] reads OK/EOF/ERR and builds the ERR packets rttscope sends;
//! - [`session`] is the command/response state machine.

pub mod binary;
pub mod codes;
pub mod constants;
pub mod error;
pub mod framing;
pub mod handshake;
pub mod packets;
pub mod session;
pub mod wire;

pub use error::{DecodeError, Peer};
pub use framing::{FrameSink, PacketScanner};
pub use session::{ColumnOf, CommandPacket, NoObserver, Observer, Session, Summary};
