//! The server's side of the state machine: the grammar of each response,
//! so the end of every one is known without buffering it.

use super::{AfterDefs, ColumnOf, Observer, PreparedStatement, Resp, Session};
use crate::protocol::constants::{
    PROGRESS_REPORT_CODE,
    capability::*,
    command::{COM_QUERY, COM_STMT_PREPARE},
    header,
    status::*,
};
use crate::protocol::error::{DecodeError, Peer};
use crate::protocol::packets::{ErrPacket, OkPacket, is_terminator, lenenc_int, terminator_status, u16_at, u32_at};

/// What a packet does to the response it belongs to.
enum Step {
    Continue(Resp),
    Finish,
}

/// Every column definition starts with the catalog, which is always "def".
/// Checking it catches a state machine that has lost its place.
const COLUMN_DEFINITION_START: [u8; 4] = [3, b'd', b'e', b'f'];

fn bad(what: &'static str, why: &'static str) -> DecodeError {
    DecodeError::malformed(Peer::Upstream, what, why)
}

/// The most columns a result set may announce before the count is taken for garbage.
const MAX_RESULT_COLUMNS: u64 = 1 << 20;

impl Session {
    pub(super) fn upstream_start<O: Observer>(
        &mut self,
        seq: u8,
        len: usize,
        p: &[u8],
        obs: &mut O,
    ) -> Result<(), DecodeError> {
        let Some(front) = self.pending.front() else {
            return self.unsolicited(p);
        };
        // A server may refuse a command before it has fully arrived (one over
        // max_allowed_packet); only a complete command fixes the next id.
        if front.complete && seq != front.seq {
            return Err(DecodeError::OutOfOrder { from: Peer::Upstream, expected: front.seq, got: seq });
        }
        let (resp, command, wants_cursor) = (front.resp, front.command, front.wants_cursor);
        if !self.response_started {
            self.response_started = true;
            obs.response_started();
        }
        self.upstream_spoke = true;
        let first = *p.first().ok_or_else(|| bad("response", "empty packet"))?;
        let step = match resp {
            Resp::None => return Err(DecodeError::Unsolicited { first }),
            Resp::Single => match first {
                header::OK => {
                    self.ok(p)?;
                    Step::Finish
                }
                // A progress report (a long ALTER, REPAIR or LOAD DATA) ends nothing.
                header::ERR if self.err(p)? => Step::Continue(Resp::Single),
                _ => Step::Finish,
            },
            Resp::ResultStart { infile } => self.result_start(first, p, infile, obs)?,
            Resp::Definitions { left, then } => {
                if !p.starts_with(&COLUMN_DEFINITION_START) {
                    return Err(bad("column definition", "does not start with catalog \"def\""));
                }
                match then {
                    AfterDefs::Rows => obs.column(p, ColumnOf::ResultSet),
                    AfterDefs::Done if command == COM_STMT_PREPARE => obs.column(p, ColumnOf::PreparedStatement),
                    // Parameter definitions of a prepare.
                    _ => {}
                }
                if left > 1 {
                    Step::Continue(Resp::Definitions { left: left - 1, then })
                } else {
                    self.after_definitions(then)
                }
            }
            // The statement failed after its metadata went out (a cursor's query that
            // errs when it is materialised, a subquery returning more than one row):
            // the ERR ends the response.
            Resp::DefinitionsEof { then } if first == header::ERR => {
                if self.err(p)? {
                    Step::Continue(Resp::DefinitionsEof { then })
                } else {
                    Step::Finish
                }
            }
            Resp::DefinitionsEof { then } => {
                if !is_terminator(first, len, false) {
                    return Err(bad("result set", "expected EOF after column definitions"));
                }
                let (status, warnings) = terminator_status(p, len).ok_or_else(|| bad("EOF packet", "truncated"))?;
                self.summary.warnings = self.summary.warnings.saturating_add(u32::from(warnings));
                self.note_status(status);
                match then {
                    // A cursor was opened: rows come later, through COM_STMT_FETCH.
                    // Only an execute that asked for one opens one: a procedure's own
                    // cursors leave the flag set on the result sets a CALL sends (by
                    // COM_QUERY or by an execute without a cursor), whose rows still follow.
                    AfterDefs::Rows if status & SERVER_STATUS_CURSOR_EXISTS != 0 && wants_cursor => Step::Finish,
                    AfterDefs::Rows => Step::Continue(Resp::Rows),
                    AfterDefs::PrepareColumns(n) => prepare_columns(n),
                    AfterDefs::Done => Step::Finish,
                }
            }
            Resp::Rows => {
                if is_terminator(first, len, self.deprecate_eof()) {
                    let (status, warnings) = terminator_status(p, len).ok_or_else(|| bad("EOF packet", "truncated"))?;
                    self.summary.warnings = self.summary.warnings.saturating_add(u32::from(warnings));
                    self.note_status(status);
                    self.more_results(status, command == COM_QUERY)
                } else if first == header::ERR {
                    // MariaDB reports progress in the middle of a result too (REPAIR TABLE
                    // of an old table sends one between the metadata and its row).
                    if self.err(p)? { Step::Continue(Resp::Rows) } else { Step::Finish }
                } else {
                    self.summary.rows += 1;
                    obs.row(p);
                    Step::Continue(Resp::Rows)
                }
            }
            Resp::Uploading => {
                if first != header::ERR {
                    return Err(bad("LOCAL INFILE response", "server spoke during the upload"));
                }
                if self.err(p)? { Step::Continue(Resp::Uploading) } else { Step::Finish }
            }
            Resp::PrepareOk => match first {
                header::OK => {
                    let truncated = || bad("COM_STMT_PREPARE OK", "truncated");
                    let id = u32_at(p, 1).ok_or_else(truncated)?;
                    let columns = u16_at(p, 5).ok_or_else(truncated)?;
                    let params = u16_at(p, 7).ok_or_else(truncated)?;
                    self.summary.warnings = self.summary.warnings.saturating_add(u32::from(u16_at(p, 10).unwrap_or(0)));
                    self.summary.statement = Some(PreparedStatement { id, params, columns });
                    self.summary.columns = u32::from(columns);
                    if params > 0 {
                        Step::Continue(Resp::Definitions {
                            left: u32::from(params),
                            then: AfterDefs::PrepareColumns(columns),
                        })
                    } else {
                        prepare_columns(columns)
                    }
                }
                header::ERR => {
                    self.err(p)?;
                    Step::Finish
                }
                _ => return Err(bad("COM_STMT_PREPARE response", "neither OK nor ERR")),
            },
            Resp::FieldList => {
                if first == header::ERR {
                    self.err(p)?;
                    Step::Finish
                } else if is_terminator(first, len, self.deprecate_eof()) {
                    Step::Finish
                } else {
                    self.summary.columns += 1;
                    Step::Continue(Resp::FieldList)
                }
            }
            Resp::Binlog => match first {
                header::ERR => {
                    self.err(p)?;
                    Step::Finish
                }
                header::EOF if len < 9 => Step::Finish,
                _ => {
                    self.summary.rows += 1;
                    Step::Continue(Resp::Binlog)
                }
            },
            Resp::Auth => match first {
                header::OK => {
                    self.ok(p)?;
                    Step::Finish
                }
                header::ERR => {
                    self.err(p)?;
                    Step::Finish
                }
                // Auth switch request or more auth data: the client answers.
                _ => Step::Continue(Resp::Auth),
            },
        };
        match step {
            Step::Continue(next) => {
                if let Some(front) = self.pending.front_mut() {
                    front.resp = next;
                }
            }
            Step::Finish => self.finishing = true,
        }
        Ok(())
    }

    pub(super) fn upstream_end<O: Observer>(&mut self, last_seq: u8, bytes: u64, obs: &mut O) {
        let Some(front) = self.pending.front_mut() else { return };
        front.seq = last_seq.wrapping_add(1);
        self.summary.bytes_down += bytes;
        if std::mem::take(&mut self.finishing) {
            self.finish_front(obs);
        }
    }

    fn result_start<O: Observer>(
        &mut self,
        first: u8,
        p: &[u8],
        infile: bool,
        obs: &mut O,
    ) -> Result<Step, DecodeError> {
        Ok(match first {
            header::OK => {
                let status = self.ok(p)?;
                self.summary.results += 1;
                self.more_results(status, infile)
            }
            header::ERR => {
                if self.err(p)? {
                    Step::Continue(Resp::ResultStart { infile })
                } else {
                    Step::Finish
                }
            }
            header::LOCAL_INFILE if infile => {
                self.summary.local_infile = true;
                self.client_mode = super::ClientMode::Upload;
                Step::Continue(Resp::Uploading)
            }
            _ => {
                let (count, width) = lenenc_int(p).ok_or_else(|| bad("result set", "bad column count"))?;
                // A table has at most 4,096 columns, but a result joins tables: MariaDB's
                // own tests send 68,001. Past a million, it is garbage.
                if count == 0 || count > MAX_RESULT_COLUMNS {
                    return Err(bad("result set", "column count out of range"));
                }
                self.summary.results += 1;
                if self.summary.columns == 0 {
                    self.summary.columns = count as u32;
                }
                obs.result_set(count as u32);
                // MariaDB may skip metadata the client has cached, MySQL metadata the
                // client said it can do without; a flag after the count says which.
                let optional = self.has(MARIADB_CLIENT_CACHE_METADATA) || self.has(CLIENT_OPTIONAL_RESULTSET_METADATA);
                let metadata = !optional || p.get(width).is_none_or(|&f| f != 0);
                if metadata {
                    Step::Continue(Resp::Definitions { left: count as u32, then: AfterDefs::Rows })
                } else {
                    self.after_definitions(AfterDefs::Rows)
                }
            }
        })
    }

    fn after_definitions(&self, then: AfterDefs) -> Step {
        if !self.deprecate_eof() {
            return Step::Continue(Resp::DefinitionsEof { then });
        }
        match then {
            AfterDefs::Rows => Step::Continue(Resp::Rows),
            AfterDefs::PrepareColumns(n) => prepare_columns(n),
            AfterDefs::Done => Step::Finish,
        }
    }

    /// After an OK or a row terminator: another result follows, or the
    /// response is over.
    fn more_results(&self, status: u16, infile: bool) -> Step {
        if status & SERVER_MORE_RESULTS_EXISTS != 0 {
            Step::Continue(Resp::ResultStart { infile })
        } else {
            Step::Finish
        }
    }

    /// Records an OK packet; returns its status flags.
    fn ok(&mut self, p: &[u8]) -> Result<u16, DecodeError> {
        let ok = OkPacket::parse(p).ok_or_else(|| bad("OK packet", "bad length-encoded field"))?;
        // Saturating: both come off the wire, and a hostile server can send
        // affected-row counts near 2^64 or 65,536 packets of 65,535 warnings.
        self.summary.affected_rows = self.summary.affected_rows.saturating_add(ok.affected_rows);
        if ok.last_insert_id != 0 {
            self.summary.last_insert_id = ok.last_insert_id;
        }
        self.summary.warnings = self.summary.warnings.saturating_add(u32::from(ok.warnings));
        self.note_status(ok.status);
        Ok(ok.status)
    }

    /// Records an ERR packet. Returns true when it is a MariaDB progress
    /// report, which does not end anything.
    fn err(&mut self, p: &[u8]) -> Result<bool, DecodeError> {
        let err = ErrPacket::parse(p).ok_or_else(|| bad("ERR packet", "truncated"))?;
        if err.code == PROGRESS_REPORT_CODE && self.has(MARIADB_CLIENT_PROGRESS) {
            return Ok(true);
        }
        self.summary.error = Some(err);
        Ok(false)
    }

    fn unsolicited(&mut self, p: &[u8]) -> Result<(), DecodeError> {
        let first = p.first().copied().unwrap_or(0);
        // A server may say why it is about to close (shutdown, KILL) between
        // commands; and after a command rttscope did not know, stray packets
        // may be the rest of its answer.
        if first == header::ERR || self.lenient {
            return Ok(());
        }
        Err(DecodeError::Unsolicited { first })
    }
}

fn prepare_columns(columns: u16) -> Step {
    if columns > 0 {
        Step::Continue(Resp::Definitions { left: u32::from(columns), then: AfterDefs::Done })
    } else {
        Step::Finish
    }
}
