//! `fingerprint-loop N KIND`: fingerprints N statements of one shape, each with a literal of
//! its own, as a connection's cache would miss them (an ORM's inline values, PHP PDO's
//! emulated prepares). Run by `scripts/callgrind-fingerprint.sh` under callgrind at two N:
//! the difference over the difference in N is the instructions of one fingerprint.

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
            let mut text = String::from("INSERT INTO sbtest (id, k, c, pad) VALUES ");
            for row in 0..50u64 {
                let sep = if row == 0 { "" } else { ", " };
                let _ = write!(
                    text,
                    "{sep}({}, {}, 'c-{row:08}-28773972837-60736120486', 'pad-{n:06}')",
                    n + row,
                    row * 31
                );
            }
            out.push_str(&text);
            Ok(())
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
            eprintln!("usage: fingerprint-loop N point|orm|insert");
            return ExitCode::from(2);
        }
    };
    let kind = args.next().unwrap_or_else(|| "point".to_owned());
    let mut fingerprinter = Fingerprinter::new();
    let mut text = String::new();
    let mut ids = 0u64;
    for i in 0..count {
        if let Err(e) = statement(&kind, i * 7919 % 1_000_003, &mut text) {
            eprintln!("fingerprint-loop: {e}");
            return ExitCode::from(2);
        }
        ids = ids.wrapping_add(fingerprinter.fingerprint(std::hint::black_box(text.as_bytes())).id.0);
    }
    println!("{ids:016x}");
    ExitCode::SUCCESS
}
