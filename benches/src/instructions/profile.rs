//! Reading a callgrind dump: its total, and the instructions each function executed itself
//! (exclusive cost), summed over the source files its inlined code came from.
//!
//! The format (valgrind's `docs/callgrind-format`): `fn=`/`cfn=` name the current and the
//! called function, with names compressed as `(id) name` the first time and `(id)` after;
//! a cost line is positions then event counts; the cost line after a `calls=` line is the
//! inclusive cost of that call, not the caller's own. With `positions: line` and the one
//! event `Ir`, a cost line is `<line> <Ir>`.

use std::collections::HashMap;

use anyhow::{Context, Result, bail};

/// One function's own instructions in a dump.
#[derive(Clone, Debug, PartialEq)]
pub struct FunctionCost {
    pub function: String,
    pub instructions: u64,
}

/// What a dump says: the total, and every function's own cost, largest first.
#[derive(Clone, Debug, Default)]
pub struct Profile {
    pub total: u64,
    pub functions: Vec<FunctionCost>,
}

pub fn parse(text: &str) -> Result<Profile> {
    let mut names: HashMap<String, String> = HashMap::new();
    let mut own: HashMap<String, u64> = HashMap::new();
    let mut current: Option<String> = None;
    let mut after_calls = false;
    let (mut summary, mut totals) = (None, None);
    for line in text.lines() {
        let first = line.as_bytes().first().copied();
        if matches!(first, Some(b'0'..=b'9' | b'+' | b'-' | b'*')) {
            if std::mem::take(&mut after_calls) {
                continue;
            }
            let cost = line.split_whitespace().last().and_then(|c| c.parse::<u64>().ok());
            let (Some(cost), Some(function)) = (cost, &current) else {
                bail!("callgrind dump: a cost line outside a function: {line:?}");
            };
            *own.entry(function.clone()).or_default() += cost;
        } else if let Some(spec) = line.strip_prefix("fn=") {
            current = Some(resolve(&mut names, spec));
        } else if let Some(spec) = line.strip_prefix("cfn=") {
            // Only to learn the compressed name: the called function is not the current one.
            resolve(&mut names, spec);
        } else if line.starts_with("calls=") {
            after_calls = true;
        } else if let Some(v) = line.strip_prefix("summary:") {
            summary = v.trim().parse::<u64>().ok();
        } else if let Some(v) = line.strip_prefix("totals:") {
            totals = v.trim().parse::<u64>().ok();
        }
    }
    let total = totals.or(summary).context("callgrind dump: no `totals:` or `summary:` line")?;
    let mut functions: Vec<FunctionCost> =
        own.into_iter().map(|(function, instructions)| FunctionCost { function, instructions }).collect();
    functions.sort_by(|a, b| b.instructions.cmp(&a.instructions).then_with(|| a.function.cmp(&b.function)));
    Ok(Profile { total, functions })
}

/// `(12) name` defines id 12 and returns the name; `(12)` looks it up; a bare name is itself.
fn resolve(names: &mut HashMap<String, String>, spec: &str) -> String {
    let spec = spec.trim();
    let Some(rest) = spec.strip_prefix('(') else { return spec.to_owned() };
    let Some((id, name)) = rest.split_once(')') else { return spec.to_owned() };
    let name = name.trim();
    if name.is_empty() {
        names.get(id).cloned().unwrap_or_else(|| format!("({id})"))
    } else {
        names.insert(id.to_owned(), name.to_owned());
        name.to_owned()
    }
}

/// The dump with every `calls=0` made `calls=1`. A call entered before the counters were
/// zeroed and still running (a worker thread's main loop) is dumped with a count of 0, and
/// `callgrind_annotate` (3.19) then adds its inclusive cost to the caller's own, so that
/// `start_thread` seems to execute everything. The costs are untouched.
pub fn fix_open_calls(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        match line.strip_prefix("calls=0 ") {
            Some(rest) => {
                out.push_str("calls=1 ");
                out.push_str(rest);
            }
            None => out.push_str(line),
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Trimmed from a real dump taken between a zero and a dump command.
    const DUMP: &str = "# callgrind format
version: 1
creator: callgrind-3.19.0
positions: line
events: Ir
summary: 1160

ob=(3) /usr/lib/x86_64-linux-gnu/libc.so.6
fl=(547) ./nptl/./nptl/cancellation.c
fn=(4344) __pthread_disable_asynccancel
66 36
+5 4
fn=(3948) start_thread
cob=(7)
cfi=(425) /rustc/x/library/std/src/sys/thread/unix.rs
cfn=(3952) thread_start
calls=0 108 
442 1000
fl=(9) proxy/src/relay/pipe.rs
fn=(10) rttscope::relay::pipe::HalfPipe::poll_step
fi=(11) proxy/src/protocol/framing.rs
12 20
fe=(9)
30 70
cfn=(4344)
calls=3 66
0 40
fn=(4344)
+1 10

totals: 1160
";

    #[test]
    fn own_costs_by_function() -> Result<()> {
        let p = parse(DUMP)?;
        assert_eq!(p.total, 1160);
        let cost = |f: &str| p.functions.iter().find(|c| c.function == f).map(|c| c.instructions);
        assert_eq!(cost("rttscope::relay::pipe::HalfPipe::poll_step"), Some(90), "inlined lines count, calls do not");
        assert_eq!(cost("__pthread_disable_asynccancel"), Some(50), "by compressed name too");
        assert_eq!(cost("start_thread"), None, "a call's inclusive cost is not the caller's own");
        assert_eq!(p.functions[0].function, "rttscope::relay::pipe::HalfPipe::poll_step");
        Ok(())
    }

    #[test]
    fn open_calls_get_a_count() {
        let fixed = fix_open_calls(DUMP);
        assert!(fixed.contains("\ncalls=1 108 \n442 1000\n"));
        assert!(fixed.contains("\ncalls=3 66\n"));
        assert_eq!(fixed.lines().count(), DUMP.lines().count());
    }
}
