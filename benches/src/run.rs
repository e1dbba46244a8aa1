//! One bench run: bring up MariaDB and one proxy per scenario (rttscope, the raw pipe,
//! HAProxy), run each workload on every side in alternating order, count instructions
//! under callgrind, and write the report.
//!
//! Every proxy process is owned here, so any error (or the caller dropping this future on
//! Ctrl-C) kills them; the private MariaDB stops when the process exits.

use std::path::Path;
use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, anyhow};
use mysql_async::{OptsBuilder, SslOpts};
use rttscope_integration_tests::mariadb::{NATIVE, TestDb, TlsDb, URL_ENV};

use crate::child::{self, Endpoint, Programs, ProxyChild, resolve_binary};
use crate::instructions::{self, InstructionCount, Valgrind};
use crate::options::{Options, Plan, Workload};
use crate::report::{Environment, LargeSample, PointSample, Report, Settings, SideResult, rows, utc};
use crate::scenario::{BUILTIN, Leg, Program};
use crate::stats::Latency;
use crate::workload::{fixtures, large, point, sequential};
use crate::{accuracy, haproxy};

/// Where clients connect for one side of the comparison.
struct Side {
    /// For error messages and progress lines.
    label: String,
    opts: OptsBuilder,
    /// `None` for direct.
    proxy: Option<ProxyChild>,
    result: SideResult,
}

/// Runs the bench as `options` say, writes `latest.md` and `latest.json` to the plan's
/// output directory, and returns the report.
pub async fn run(options: &Options) -> Result<Report> {
    let plan = options.plan()?;
    let started = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    let load_before = load_average();

    // The binaries first: a missing one should fail before a MariaDB start-up, not after.
    let proxy_bin = plan.proxy_bin.clone();
    let binary = tokio::task::spawn_blocking(move || resolve_binary(proxy_bin.as_deref())).await??;
    let (haproxy_bin, haproxy_version) = if plan.scenarios.iter().any(|s| s.program == Program::Haproxy) {
        let binary = haproxy::find(plan.haproxy_bin.as_deref())?;
        let version = haproxy::version(&binary)?;
        (Some(binary), Some(version))
    } else {
        (None, None)
    };
    for s in plan.scenarios.iter().filter(|s| s.program == Program::Rttscope && s.leg == Leg::Unix) {
        let probe = std::env::temp_dir().join("rttscope-bench-probe.sock");
        child::accepts_unix_listen(&binary, &probe, &s.name)
            .with_context(|| format!("scenario {:?} needs rttscope to listen on a Unix socket", s.name))?;
    }
    let mut programs = Programs { rttscope: binary.clone(), haproxy: haproxy_bin, client_cert: None };
    let valgrind = plan.runs(Workload::Instructions).then(Valgrind::find).transpose()?;
    progress("starting MariaDB (or using RTTSCOPE_TEST_MYSQL_URL)");
    let (db, client_tls) = if plan.tls {
        let db = tokio::task::spawn_blocking(tls_db).await??;
        let ca = std::fs::read(&db.certs().ca).with_context(|| format!("reading {}", db.certs().ca.display()))?;
        programs.client_cert = Some((db.certs().server_cert.clone(), db.certs().server_key.clone()));
        let trusting = SslOpts::default().with_root_certs(vec![ca.into()]).with_disable_built_in_roots(true);
        (&**db, Some(trusting))
    } else {
        (tokio::task::spawn_blocking(shared_db).await??, None)
    };
    let direct_opts = db.opts(NATIVE.user, NATIVE.password);
    if plan.runs_point() || plan.runs(Workload::Large) || plan.runs(Workload::Accuracy) {
        let rows = plan.runs_point().then_some(plan.table_rows);
        progress("preparing test data");
        if fixtures::prepare(&direct_opts, rows).await? {
            progress(&format!("built the sbtest table ({} rows)", plan.table_rows));
        }
    }

    let mut sides = vec![Side {
        label: format!("directly to MariaDB at {}", db.upstream_addr()),
        opts: direct_opts,
        proxy: None,
        result: SideResult::new("direct", Program::Direct, Leg::Tcp),
    }];
    // f starts proxies of its own, under callgrind: alone, it needs none of these.
    let races = plan.runs(Workload::Sequential)
        || plan.runs_point()
        || plan.runs(Workload::Large)
        || plan.runs(Workload::Accuracy);
    for scenario in plan.scenarios.iter().filter(|_| races) {
        let mut result = SideResult::new(&scenario.name, scenario.program, scenario.leg);
        result.proxy_config = (scenario.program != Program::Direct).then(|| scenario.yaml.clone());
        result.proxy_env = scenario.env.clone();
        result.client_tls = plan.tls && scenario.tls.client;
        result.server_tls = plan.tls && scenario.tls.server;
        // A TLS client trusts the test CA, whose certificate names 127.0.0.1.
        let tls_opts = |opts: OptsBuilder| match (&client_tls, scenario.tls.client) {
            (Some(trusting), true) => opts.ssl_opts(Some(trusting.clone())),
            _ => opts,
        };
        if scenario.program == Program::Direct && scenario.leg == Leg::Tcp {
            sides.push(Side {
                label: format!("directly to MariaDB at {} over TLS", db.upstream_addr()),
                opts: tls_opts(db.opts(NATIVE.user, NATIVE.password)),
                proxy: None,
                result,
            });
            continue;
        }
        if scenario.program == Program::Direct {
            // MariaDB's own socket: only a server the bench started has one it knows.
            let socket = db.socket_path().with_context(|| {
                format!(
                    "scenario {:?} needs MariaDB's Unix socket, and only a private server's is known \
                     (unset {URL_ENV})",
                    scenario.name
                )
            })?;
            let endpoint = Endpoint::Unix(socket.to_owned());
            sides.push(Side {
                label: format!("directly to MariaDB at {endpoint}"),
                opts: endpoint.opts(db),
                proxy: None,
                result,
            });
            continue;
        }
        let (p, upstream, s) = (programs.clone(), db.upstream_addr(), scenario.clone());
        let proxy = tokio::task::spawn_blocking(move || ProxyChild::start(&p, upstream, &s))
            .await?
            .with_context(|| format!("starting the proxy of scenario {:?}", scenario.name))?;
        let what = match scenario.program {
            Program::Rttscope => "rttscope",
            Program::RawPipe => "the raw pipe",
            Program::Haproxy => "HAProxy",
            Program::Direct => "nothing",
        };
        sides.push(Side {
            label: format!("through {what} ({}) at {}", scenario.name, proxy.endpoint()),
            opts: tls_opts(proxy.endpoint().opts(db)),
            proxy: Some(proxy),
            result,
        });
    }

    if plan.runs(Workload::Sequential) {
        run_sequential(&plan, &mut sides).await?;
    }
    if plan.runs_point() {
        run_point(&plan, &mut sides).await?;
    }
    if plan.runs(Workload::Large) {
        run_large(&plan, &mut sides).await?;
    }
    let mut instruction_counts: Vec<InstructionCount> = Vec::new();
    if let Some(valgrind) = &valgrind {
        for scenario in instructions::scenarios(&plan.scenarios) {
            progress(&format!(
                "f. {} under callgrind: {} × {} round trips",
                scenario.name, plan.instructions.windows, plan.instructions.round_trips
            ));
            let count = instructions::measure(&plan.instructions, valgrind, &programs, db, &scenario, &plan.out_dir)
                .await
                .with_context(|| format!("f. instructions per round trip of {:?}", scenario.name))?;
            progress(&format!("f. {}: {:.0} instructions per round trip", scenario.name, count.per_round_trip));
            instruction_counts.push(count);
        }
        check_alive(&mut sides)?;
    }
    let accuracy = if plan.runs(Workload::Accuracy) {
        // The baseline is rttscope as a user gets it, without injection: the `default` side.
        let baseline = sides.iter().find(|s| s.result.name == BUILTIN[0].name).context("no default scenario")?;
        Some(accuracy::run(&plan.accuracy, &binary, db, &baseline.opts).await?)
    } else {
        None
    };
    for side in &mut sides {
        if let Some(proxy) = &mut side.proxy {
            proxy.check_alive()?;
            side.result.peak_rss_kib = proxy.memory_kib().ok().map(|(_, peak)| peak);
        }
    }

    let results: Vec<SideResult> = sides.into_iter().map(|s| s.result).collect();
    let (direct, scenarios) = results.split_first().context("no sides")?;
    let mut report = Report {
        schema_version: 1,
        started_utc: utc(started),
        command: command_line(),
        environment: Environment {
            cpus: std::thread::available_parallelism().map_or(0, |n| n.get()),
            load_before,
            load_after: load_average(),
            server_version: db.version().to_owned(),
            server: match (plan.tls, db.is_private()) {
                (true, _) => "private, TLS with generated certificates".into(),
                (false, true) => "private".into(),
                (false, false) => URL_ENV.into(),
            },
            rttscope_binary: binary.display().to_string(),
            git: git_revision(),
            haproxy: haproxy_version,
            valgrind: valgrind.map(|v| v.version),
        },
        settings: Settings::of(&plan),
        rows: rows(&plan, direct, scenarios, &instruction_counts),
        sides: results.clone(),
        instructions: instruction_counts,
        accuracy,
        markdown: String::new(),
    };
    report.render();
    write(&plan.out_dir, &report)?;
    Ok(report)
}

/// The order of sides in round `round`: forwards, then backwards (ABBA), so a linear
/// drift in machine speed weighs on every side equally.
fn order(sides: usize, round: u32) -> Vec<usize> {
    let mut order: Vec<usize> = (0..sides).collect();
    if round % 2 == 1 {
        order.reverse();
    }
    order
}

async fn run_sequential(plan: &Plan, sides: &mut [Side]) -> Result<()> {
    let mut histograms = (0..sides.len()).map(|_| sequential::histogram()).collect::<Result<Vec<_>>>()?;
    let mut clients = Vec::with_capacity(sides.len());
    for side in sides.iter() {
        progress(&format!("a. connecting and warming up {}", side.label));
        clients.push(sequential::Client::start(&side.opts, &side.label, plan.warmup).await?);
    }
    let batches = plan.sequential_batches();
    progress(&format!("a. {} round trips per side in {batches} interleaved batches", plan.round_trips));
    for batch in 0..batches {
        // The remainder goes one each to the first batches, so exactly round_trips are measured.
        let count = plan.round_trips / batches + u64::from(batch < plan.round_trips % batches);
        for i in order(sides.len(), batch as u32) {
            clients[i].measure(count, &mut histograms[i]).await?;
        }
    }
    for client in clients {
        client.finish().await?;
    }
    check_alive(sides)?;
    for (side, h) in sides.iter_mut().zip(&histograms) {
        side.result.sequential = Some(Latency::from_ns(h));
    }
    Ok(())
}

async fn run_point(plan: &Plan, sides: &mut [Side]) -> Result<()> {
    for round in 0..plan.rounds {
        for i in order(sides.len(), round) {
            let side = &mut sides[i];
            progress(&format!(
                "b. round {}/{}: {} connections for {:?} {}",
                round + 1,
                plan.rounds,
                plan.connections,
                plan.point_duration,
                side.label
            ));
            let polled_before = match &side.proxy {
                Some(proxy) => proxy.idle_poll().await?,
                None => None,
            };
            let clock = side.proxy.as_ref().map(|p| move || p.cpu_time());
            let clock: Option<point::CpuClock<'_>> = clock.as_ref().map(|c| c as point::CpuClock<'_>);
            let run =
                point::run(&side.opts, &side.label, plan.connections, plan.table_rows, plan.point_duration, clock)
                    .await?;
            let proxy_idle_poll = match (&side.proxy, polled_before) {
                (Some(proxy), Some(before)) => proxy.idle_poll().await?.map(|after| after.since(before)),
                _ => None,
            };
            side.result.point_runs.push(PointSample {
                queries: run.queries,
                seconds: run.elapsed.as_secs_f64(),
                per_second: run.per_second(),
                proxy_cpu_seconds: run.cpu.map(|c| c.as_secs_f64()),
                proxy_idle_poll,
            });
        }
        check_alive(sides)?;
    }
    Ok(())
}

async fn run_large(plan: &Plan, sides: &mut [Side]) -> Result<()> {
    for round in 0..plan.large_runs {
        for i in order(sides.len(), round) {
            let side = &mut sides[i];
            progress(&format!("c. run {}/{}: large result {}", round + 1, plan.large_runs, side.label));
            let run = large::run(&side.opts, &side.label, plan.large_bytes, plan.large_row_len).await?;
            side.result.large_runs.push(LargeSample {
                megabytes: run.bytes as f64 / 1e6,
                seconds: run.elapsed.as_secs_f64(),
                mb_per_second: run.mb_per_second(),
            });
        }
        check_alive(sides)?;
    }
    Ok(())
}

fn check_alive(sides: &mut [Side]) -> Result<()> {
    sides.iter_mut().filter_map(|s| s.proxy.as_mut()).try_for_each(|p| p.check_alive())
}

/// The harness's server; it panics on failure (tests want that), the bench wants a message.
fn shared_db() -> Result<&'static TestDb> {
    std::panic::catch_unwind(TestDb::shared).map_err(|panic| {
        let message = panic_message(&*panic);
        anyhow!(
            "no MariaDB to benchmark against: {message}\n\
             (install one with scripts/install-deps.sh, or point {URL_ENV} at an existing server)"
        )
    })
}

/// The harness's server that speaks TLS (`--tls`): always a private one, with its own
/// certificates.
fn tls_db() -> Result<&'static TlsDb> {
    std::panic::catch_unwind(TlsDb::shared)
        .map_err(|panic| anyhow!("no MariaDB with TLS to benchmark against: {}", panic_message(&*panic)))
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> &str {
    panic
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| panic.downcast_ref::<&str>().copied())
        .unwrap_or("(no message)")
}

fn write(dir: &Path, report: &Report) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let md = dir.join("latest.md");
    std::fs::write(&md, &report.markdown).with_context(|| format!("writing {}", md.display()))?;
    let json = dir.join("latest.json");
    let text = serde_json::to_string_pretty(report)?;
    std::fs::write(&json, text + "\n").with_context(|| format!("writing {}", json.display()))?;
    progress(&format!("wrote {} and {}", md.display(), json.display()));
    Ok(())
}

fn progress(message: &str) {
    eprintln!("rttscope-bench: {message}");
}

/// `scripts/bench.sh` passes its own command line; otherwise this executable's.
fn command_line() -> String {
    std::env::var("RTTSCOPE_BENCH_COMMAND").unwrap_or_else(|_| {
        let args: Vec<String> = std::env::args().collect();
        args.join(" ")
    })
}

fn load_average() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg").ok()?.split_whitespace().next()?.parse().ok()
}

/// `abc1234`, with `-dirty` when the work tree has changes; `None` outside git.
fn git_revision() -> Option<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent()?;
    let git = |args: &[&str]| {
        let out = Command::new("git").arg("-C").arg(root).args(args).output().ok()?;
        out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
    };
    let head = git(&["rev-parse", "--short", "HEAD"])?;
    let dirty = git(&["status", "--porcelain", "--untracked-files=no"]).is_some_and(|s| !s.is_empty());
    Some(if dirty { format!("{head}-dirty") } else { head })
}
