//! `fingerprint-loop N KIND [--build-only]`: fingerprints N statements of one shape, each with
//! a literal of its own, as a connection's cache would miss them (an ORM's inline values, PHP
//! PDO's emulated prepares). Run by `scripts/callgrind-fingerprint.sh` under callgrind at two
//! N, with and without fingerprinting: what the fingerprints add, over N, is one fingerprint
//! (building the statements, and start-up, cancel out).

use std::fmt::Write;
use std::process::ExitCode;

use rttscope::fingerprint::Fingerprinter;

/// The statement of each kind, with `{n}` the varying literal.
fn statement(kind: &str, n: u64, out: &mut String) -> Result<(), String> {
    out.clear();
    let written = match kind {
        "point" => write!(out, "SELECT c FROM sbtest WHERE id = {n}"),
        "orm" => write!(
            out,
            "SELECT `users`.`id`, `users`.`name`, `users`.`email`, `users`.`created_at` FROM `users` \
             WHERE `users`.`account_id` = {n} AND `users`.`deleted_at` IS NULL ORDER BY `users`.`id` ASC LIMIT 20"
        ),
        "insert" => {
            out.push_str("INSERT INTO sbtest (id, k, c, pad) VALUES ");
            (0..50u64).try_for_each(|row| {
                let sep = if row == 0 { "" } else { ", " };
                write!(out, "{sep}({}, {}, 'c-{row:08}-28773972837-60736120486', 'pad-{n:06}')", n + row, row * 31)
            })
        }
        other => return Err(format!("unknown kind {other:?}: point, orm or insert")),
    };
    written.map_err(|e| e.to_string())
}

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let count: u64 = match args.next().and_then(|a| a.parse().ok()) {
        Some(n) => n,
        None => {
            eprintln!("usage: fingerprint-loop N point|orm|insert [--build-only]");
            return ExitCode::from(2);
        }
    };
    let kind = args.next().unwrap_or_else(|| "point".to_owned());
    let fingerprint = args.next().as_deref() != Some("--build-only");
    let mut fingerprinter = Fingerprinter::new();
    let mut text = String::new();
    let mut ids = 0u64;
    for i in 0..count {
        if let Err(e) = statement(&kind, i * 7919 % 1_000_003, &mut text) {
            eprintln!("fingerprint-loop: {e}");
            return ExitCode::from(2);
        }
        let text = std::hint::black_box(text.as_bytes());
        if fingerprint {
            ids = ids.wrapping_add(fingerprinter.fingerprint(text).id.0);
        }
    }
    println!("{ids:016x}");
    ExitCode::SUCCESS
}
