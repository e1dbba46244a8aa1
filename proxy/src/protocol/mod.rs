//! The MySQL wire protocol, sans-io: bytes in, events out. No sockets, no
//! clocks, no `.await` — what the unit tests and fuzzers drive directly.
//!
//! - [`framing`] walks a byte stream into packets without buffering payloads;
//! - [`handshake`] parses and masks the connection-phase packets;
//! - [`auth`] reads what rttscope needs of the auth exchange to stand in for a server's key;
//! - [`packets`] reads OK/EOF/ERR and builds the ERR packets rttscope sends;
//! - [`session`] is the command/response state machine.

pub mod auth;
pub mod binary;
pub mod codes;
pub mod compress;
pub mod constants;
pub mod error;
pub mod framing;
pub mod handshake;
pub mod packets;
pub mod peer;
pub mod session;
#[cfg(any(test, feature = "test-util"))]
pub mod test_util;

pub use error::DecodeError;
pub use framing::{FrameSink, PacketScanner};
pub use peer::{Direction, Peer};
pub use session::{ColumnOf, CommandPacket, Identity, NoObserver, Observer, Session, Summary};
