//! The `gpudoctor` binary: parse the command line, run, render, exit with the documented code.
//! stdout carries only the report; everything else goes to stderr. A closed pipe is not a crash.

use std::io::{self, IsTerminal, Write};
use std::process::ExitCode;

use anyhow::Context as _;
use clap::Parser;

use gpudoctor::cli::{
    CatalogueFormat, CheckArgs, Cli, Command, DiffArgs, FleetArgs, ListFormat, RecordArgs,
    ReportFormat, TopoArgs, TopoFormat, TriageFormat,
};
use gpudoctor::render::table::Style;
use gpudoctor::report::exit;
use gpudoctor::{checks, engine, explain, profile, record, render, source};

fn main() -> ExitCode {
    // Every child is started through process::Group; SIGINT/SIGTERM/SIGHUP stop them and remove
    // temporary files before gpudoctor dies of the signal (process/signals.rs).
    gpudoctor::process::own_all_children();
    if let Err(err) = gpudoctor::process::signals::install() {
        eprintln!("gpudoctor: cannot handle signals ({err}); an interrupted run may leave files");
    }
    let cli = Cli::parse();
    let npd = match &cli.command {
        Command::Check(args) => args.npd,
        Command::Render(args) => args.npd_condition.is_some(),
        _ => false,
    };
    let mut code = match run(cli) {
        Ok(code) => code,
        Err(err) => {
            // The error may name a path or quote a file from the node.
            let err = gpudoctor::text::sanitize::text(&format!("{err:#}")).into_owned();
            eprintln!("gpudoctor: internal error: {err}");
            if npd {
                let line = render::npd::fit(
                    &format!("gpudoctor: internal error: {err}"),
                    render::npd::MAX_MESSAGE_BYTES,
                );
                let _ = emit(&format!("{line}\n"));
            }
            exit::INTERNAL
        }
    };
    if npd {
        // node-problem-detector knows 0 OK, 1 problem and anything else as unknown; a usage
        // error printed its reason on stderr only, so give NPD a line too.
        if code == exit::USAGE {
            let _ = emit("gpudoctor: usage error, see the plugin's stderr\n");
        }
        code = render::npd::exit_code(code);
    }
    // After SIGINT/SIGTERM/SIGHUP the signal watcher ends the process, not this return.
    gpudoctor::process::signals::wait_if_interrupted();
    gpudoctor::process::reap_leftovers();
    ExitCode::from(u8::try_from(code).unwrap_or(4))
}

fn run(cli: Cli) -> anyhow::Result<i32> {
    match cli.command {
        Command::Check(args) => check(&args),
        Command::Topo(args) => topo(&args),
        Command::Judge(args) => match gpudoctor::cli::judge::run(&args) {
            Ok((text, code)) => emit(&text).context("writing the report").map(|()| code),
            Err(code) => Ok(code),
        },
        Command::Record(args) => record(&args),
        Command::ListChecks { format } => {
            let text = match format {
                CatalogueFormat::Table => explain::list_table(),
                CatalogueFormat::Json => explain::list_json(),
                CatalogueFormat::Markdown => explain::list_markdown(),
            };
            emit(&text)?;
            Ok(exit::HEALTHY)
        }
        Command::Explain { code } => match checks::find(&code) {
            Some(check) => {
                emit(&explain::explain(&check))?;
                Ok(exit::HEALTHY)
            }
            None => {
                eprintln!(
                    "gpudoctor: no check has the code `{}`",
                    gpudoctor::text::sanitize::text(&code)
                );
                let near = explain::nearest_codes(&code);
                if !near.is_empty() {
                    eprintln!("  did you mean: {}", near.join(", "));
                }
                eprintln!("  `gpudoctor list-checks` lists every code");
                Ok(exit::USAGE)
            }
        },
        Command::Profiles { format } => {
            let text = match format {
                ListFormat::Table => profile::list_table(),
                ListFormat::Json => profile::list_json(),
            };
            emit(&text)?;
            Ok(exit::HEALTHY)
        }
        Command::Render(args) => render_saved(&args),
        Command::Schema => {
            emit(&gpudoctor::report::json_schema())?;
            Ok(exit::HEALTHY)
        }
        Command::Diff(args) => diff(&args),
        Command::Fleet(args) => fleet(&args),
        Command::Pairs(args) => pairs(&args),
        Command::CudaProbe { request } => Ok(source::cuda::helper_main(&request)),
    }
}

/// `gpudoctor diff A B`.
fn diff(args: &DiffArgs) -> anyhow::Result<i32> {
    use gpudoctor::diff;
    let mut options = diff::DiffOptions {
        keep_going: args.keep_going,
        profile: None,
        source: args.source_options(),
    };
    if let Some(arg) = &args.profile {
        match profile::load_noting(arg) {
            Ok((p, notes)) => {
                for note in notes {
                    eprintln!(
                        "gpudoctor: warning: {}",
                        gpudoctor::text::sanitize::text(&note)
                    );
                }
                options.profile = Some(p);
            }
            Err(err) => {
                eprintln!(
                    "gpudoctor: --profile {}",
                    gpudoctor::text::sanitize::text(&format!("{arg}: {err}"))
                );
                return Ok(exit::USAGE);
            }
        }
    }
    let mut sides = Vec::new();
    for path in [&args.a, &args.b] {
        match diff::open(path, &options) {
            Ok(side) => sides.push(side),
            Err(err) => {
                eprintln!(
                    "gpudoctor: {}",
                    gpudoctor::text::sanitize::text(&err.to_string())
                );
                return Ok(exit::USAGE);
            }
        }
    }
    let result = diff::compare::compare(&sides[0], &sides[1]);
    let text = match args.format {
        TriageFormat::Table => diff::render::table(&result, args.all),
        TriageFormat::Markdown => diff::render::markdown(&result, args.all),
        TriageFormat::Json => diff::render::json(&result),
    };
    emit(&text).context("writing the diff")?;
    Ok(result.exit_code)
}

/// `gpudoctor pairs`: options checked (a usage error says what to give), rounds run, the
/// report printed; the exit code is the report's.
fn pairs(args: &gpudoctor::cli::PairsArgs) -> anyhow::Result<i32> {
    let env: Vec<(String, String)> = std::env::vars().collect();
    let usage = |why: &str| {
        eprintln!("gpudoctor: pairs: {}", gpudoctor::text::sanitize::text(why));
        Ok(exit::USAGE)
    };
    let mut options = match args.options(&env) {
        Ok(o) => o,
        Err(why) => return usage(&why),
    };
    // An mpirun that is not Open MPI's would fail every pair: said before any runs.
    match gpudoctor::pairs::check_launcher(&options.plan) {
        Ok(note) => options.notes.extend(note),
        Err(why) => return usage(&why),
    }
    let report = gpudoctor::pairs::run(&options);
    match args.format {
        ListFormat::Table => print!("{}", gpudoctor::pairs::render::table(&report)),
        ListFormat::Json => println!("{}", gpudoctor::pairs::render::json(&report)),
    }
    Ok(report.exit_code)
}

/// `gpudoctor fleet DIR|FILES...`.
fn fleet(args: &FleetArgs) -> anyhow::Result<i32> {
    use gpudoctor::fleet;
    use std::time::Duration;
    let loaded = match &args.prometheus {
        Some(url) => match fleet::prometheus::load_url(url, Duration::from_secs(args.timeout)) {
            Ok(loaded) => loaded,
            Err((code, why)) => {
                let why = gpudoctor::text::sanitize::text(&why);
                eprintln!("gpudoctor: fleet --prometheus: {why}");
                return Ok(code);
            }
        },
        None => fleet::load(&args.inputs),
    };
    for skipped in &loaded.skipped {
        eprintln!(
            "gpudoctor: warning: skipped {}: {}",
            gpudoctor::text::sanitize::text(&skipped.file),
            gpudoctor::text::sanitize::text(&skipped.why)
        );
    }
    if loaded.nodes.is_empty() {
        eprintln!(
            "gpudoctor: no readable report among the inputs; pass the JSON files saved by `gpudoctor check --save-report` or directories holding them"
        );
        return Ok(exit::USAGE);
    }
    let summary = fleet::summarise_at(
        &loaded,
        std::time::SystemTime::now(),
        args.stale.unwrap_or(fleet::triage::DEFAULT_STALE),
    );
    let text = match args.format {
        TriageFormat::Table => fleet::render::table(&summary, args.all),
        TriageFormat::Markdown => fleet::render::markdown(&summary, args.all),
        TriageFormat::Json => fleet::render::json(&summary),
    };
    emit(&text).context("writing the fleet summary")?;
    // The process ends next: freeing 10,000 reports one allocation at a time would add a tenth
    // of the run for nothing the kernel does not do at exit anyway.
    std::mem::forget(loaded);
    Ok(summary.exit_code)
}

fn record(args: &RecordArgs) -> anyhow::Result<i32> {
    if let Some(code) = check_kernel_log(args.probes.kernel_log.as_deref()) {
        return Ok(code);
    }
    // A packed capture given as --root is unpacked (bounded) and re-recorded like a directory.
    let (unpacked, root) = match open_root(&args.root, &args.unpack.limits()) {
        Ok(pair) => pair,
        Err(code) => return Ok(code),
    };
    // An archive given as --root is a capture here (open_root refused anything else).
    let capture = source::is_capture(&root);
    let mut refused = args.probes.inapplicable(capture);
    refused.extend(gpudoctor::cli::sample_inapplicable(args.sample, capture));
    if let Some(code) = refuse(&refused, &args.root, capture) {
        return Ok(code);
    }
    let options = record::RecordOptions {
        root,
        root_given: unpacked.is_some().then(|| args.root.clone()),
        out: args.out.clone(),
        redact: !args.no_redact,
        redact_hostname_anyway: args.redact_hostname_anyway,
        force: args.force,
        source: args.source_options(),
        command_line: std::env::args().collect(),
        sample: args.sample,
    };
    if capture {
        eprintln!(
            "gpudoctor: re-recording the capture {} (its recorded NVML, kubelet, environment, kernel-log and NCCL answers are carried over{}) ...",
            shown(&args.root),
            if args.no_redact {
                ""
            } else {
                "; redaction applied again"
            }
        );
    } else {
        eprintln!("gpudoctor: recording {} ...", shown(&args.root));
    }
    match record::record(&options) {
        Ok(summary) => {
            for note in &summary.redaction_notes {
                eprintln!(
                    "gpudoctor: redaction: {}",
                    gpudoctor::text::sanitize::text(note)
                );
            }
            let redacted: Vec<String> = summary
                .redacted
                .iter()
                .map(|(k, n)| format!("{n} {k}"))
                .collect();
            eprintln!(
                "gpudoctor: wrote {} ({} files, {} links, {} KiB); {} unreadable path(s) listed in the manifest; redacted: {}",
                shown(&summary.out),
                summary.files,
                summary.links,
                summary.bytes / 1024,
                summary.unreadable,
                if args.no_redact {
                    "nothing (--no-redact)".to_string()
                } else if redacted.is_empty() {
                    "nothing found".to_string()
                } else {
                    redacted.join(", ")
                }
            );
            if let Some(reason) = &summary.node_changed {
                eprintln!(
                    "gpudoctor: warning: the node changed while it was recorded ({}): the capture may hold only part of it; record again once the node is settled",
                    gpudoctor::text::sanitize::text(reason)
                );
            }
            if summary.rerecorded {
                eprintln!(
                    "gpudoctor: re-recorded the capture {} into {}",
                    shown(&args.root),
                    shown(&summary.out)
                );
            }
            eprintln!(
                "gpudoctor: the capture replays with `gpudoctor check --root {}` (verdict: exit {})",
                shown(&summary.out),
                summary.report.exit_code
            );
            emit(&format!("{}\n", shown(&summary.out)))?;
            Ok(exit::HEALTHY)
        }
        // Said here, once; nothing is left at --out or beside it (record/out.rs).
        Err(err) if err.is_usage() => {
            // It may name a file of the node (the one a full disk stopped).
            eprintln!(
                "gpudoctor: {}",
                gpudoctor::text::sanitize::text(&err.to_string())
            );
            Ok(exit::USAGE)
        }
        Err(err) => Err(err.into()),
    }
}

fn check(args: &CheckArgs) -> anyhow::Result<i32> {
    if let Some(code) = check_outputs(args.textfile_dir.as_deref(), args.save_report.as_deref()) {
        return Ok(code);
    }
    let (unpacked, root) = match open_root(&args.root, &args.unpack.limits()) {
        Ok(pair) => pair,
        Err(code) => return Ok(code),
    };
    if !root.is_dir() {
        let why = if args.root.exists() {
            "is not a directory"
        } else {
            "does not exist"
        };
        eprintln!(
            "gpudoctor: --root {} {why}; pass the node's root directory (`/`, the host mount such as /host), a recorded fixture directory or a .tar.gz capture",
            shown(&args.root)
        );
        return Ok(exit::USAGE);
    }
    if let Some(code) = check_kernel_log(args.probes.kernel_log.as_deref()) {
        return Ok(code);
    }
    let mut options = args.run_options();
    if let Some(arg) = &args.profile {
        match profile::load_noting(arg) {
            Ok((p, notes)) => {
                for note in notes {
                    eprintln!(
                        "gpudoctor: warning: {}",
                        gpudoctor::text::sanitize::text(&note)
                    );
                }
                options.profile = Some(p);
            }
            Err(err) => {
                // A TOML error quotes the offending line of the file.
                eprintln!(
                    "gpudoctor: --profile {}",
                    gpudoctor::text::sanitize::text(&format!("{arg}: {err}"))
                );
                return Ok(exit::USAGE);
            }
        }
    }
    if args.with_facts && args.format != ReportFormat::Json && args.save_report.is_none() {
        eprintln!(
            "gpudoctor: --with-facts adds facts to the JSON report: use it with --format json or --save-report"
        );
        return Ok(exit::USAGE);
    }
    // One set of options for the run: its clones share one NVML session (the --sample
    // window's first reading and the check's own).
    let source_options = args.source_options();
    let source = match source::open(&root, source_options.clone()) {
        Ok(source) => source,
        Err(err) => return Ok(not_a_capture(&args.root, &err)),
    };
    let capture = source.kind() == gpudoctor::report::SourceKind::Replay;
    let mut refused = args.probes.inapplicable(capture);
    refused.extend(gpudoctor::cli::sample_inapplicable(args.sample, capture));
    if let Some(code) = refuse(&refused, &args.root, capture) {
        return Ok(code);
    }
    if let Some(secs) = args.sample {
        options.sample = Some(gpudoctor::sample::first_reading(
            &root,
            &source_options,
            secs,
        ));
    }
    let ctx = engine::context(source.as_ref(), &options);
    let mut report = engine::run_in(&ctx, &checks::registry(), &options);
    if args.with_facts {
        report.facts = Some(gpudoctor::snapshot::take(&ctx));
    }
    if unpacked.is_some() {
        report.source.root = args.root.display().to_string();
    }
    let delivered = deliver(report, args);
    // The process ends next: its facts go with it, not one allocation at a time (issue 41, as
    // `fleet`). The source ends NVML and removes an overlay's composed tree.
    std::mem::forget(ctx);
    source.release_at_exit();
    delivered
}

/// `--kernel-log` names what the source reads without blocking (`source::rooted::
/// read_named_file`): a saved file, a character device read to its current end (`/dev/kmsg`), or
/// a pipe or FIFO read until its writer closes it, at most `--timeout` (`<(journalctl -k)`).
/// Anything else, or nothing at that path, is a usage error said before the run. Only the
/// file's type is looked at here; opening it is the probe's (a FIFO's writer may come later).
fn check_kernel_log(path: Option<&std::path::Path>) -> Option<i32> {
    use std::os::unix::fs::FileTypeExt as _;
    let path = path?;
    let why = match std::fs::metadata(path) {
        Ok(meta) => {
            let kind = meta.file_type();
            if kind.is_file() || kind.is_fifo() || kind.is_char_device() {
                return None;
            }
            if kind.is_dir() {
                "is a directory".to_string()
            } else {
                "is a socket or block device".to_string()
            }
        }
        Err(err) => format!("cannot be read: {err}"),
    };
    eprintln!(
        "gpudoctor: --kernel-log {} {why}; pass a saved kernel log (`dmesg > kmsg.txt`), /dev/kmsg or a pipe such as <(journalctl -k)",
        gpudoctor::text::sanitize::text(&path.display().to_string())
    );
    Some(exit::USAGE)
}

/// `--textfile-dir` must name an existing directory and `--save-report` a file in one: say so
/// before a run that may take minutes, as a usage error.
fn check_outputs(
    textfile_dir: Option<&std::path::Path>,
    save_report: Option<&std::path::Path>,
) -> Option<i32> {
    if let Some(dir) = textfile_dir
        && !dir.is_dir()
    {
        eprintln!(
            "gpudoctor: --textfile-dir {} is not a directory; pass node_exporter's --collector.textfile.directory",
            shown(dir)
        );
        return Some(exit::USAGE);
    }
    if let Some(file) = save_report {
        let parent = file
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(std::path::Path::new("."));
        if !parent.is_dir() || file.is_dir() {
            eprintln!(
                "gpudoctor: --save-report {}: not a file in an existing directory",
                shown(file)
            );
            return Some(exit::USAGE);
        }
    }
    None
}

/// The report in one of the `--format`s (`verbose`: the table's `--verbose`).
fn render_as(report: &gpudoctor::report::Report, format: ReportFormat, verbose: bool) -> String {
    gpudoctor::cli::judge::render_verbose(report, format, verbose)
}

/// Write the files asked for (Prometheus textfile, saved JSON report), then print the report —
/// or, with `--npd`, the one-line message. A file that cannot be written is said on stderr, once,
/// and makes the run an internal error (exit 4) everywhere at once: the process, the report on
/// stdout and the files that were written carry the same exit code. Under `--npd` the node's
/// verdict stays what every output says: it is what NPD needs.
fn deliver(mut report: gpudoctor::report::Report, args: &CheckArgs) -> anyhow::Result<i32> {
    write_outputs(
        &mut report,
        args.textfile_dir.as_deref(),
        args.save_report.as_deref(),
        args.npd,
    );
    if let Some(condition) = args.npd_condition {
        let (code, line) = render::npd_conditions::answer(&report, condition);
        emit(&format!("{line}\n")).context("writing the report")?;
        return Ok(code);
    }
    let text = if args.npd {
        format!("{}\n", render::npd::message(&report))
    } else {
        render_as(&report, args.format, args.verbose)
    };
    emit(&text).context("writing the report")?;
    let code = report.exit_code;
    std::mem::forget(report); // as the run's facts (`check`): the process ends next
    Ok(code)
}

/// A file written beside stdout.
#[derive(Debug, Clone, Copy)]
enum Extra<'a> {
    /// `--textfile-dir`: the Prometheus text as DIR/gpudoctor.prom.
    Textfile(&'a std::path::Path),
    /// `--save-report`: the JSON report.
    Saved(&'a std::path::Path),
}

impl Extra<'_> {
    fn write(self, report: &gpudoctor::report::Report) -> Result<(), String> {
        let (path, result) = match self {
            Extra::Textfile(dir) => (
                dir.join(gpudoctor::output::TEXTFILE_NAME),
                gpudoctor::output::write_textfile(dir, &render::prometheus::render(report))
                    .map(|_| ()),
            ),
            Extra::Saved(file) => (
                file.to_path_buf(),
                gpudoctor::output::write_atomically(file, render::json::render(report).as_bytes()),
            ),
        };
        result.map_err(|err| format!("cannot write {}: {err}", shown(&path)))
    }
}

/// Write the extra files; `false` when one could not be written (said on stderr). Unless
/// `keep_verdict`, a failure turns the report's exit code into 4 and rewrites the files already
/// written, so that no file says another exit code than the process ends with.
fn write_outputs(
    report: &mut gpudoctor::report::Report,
    textfile_dir: Option<&std::path::Path>,
    save_report: Option<&std::path::Path>,
    keep_verdict: bool,
) -> bool {
    let extras: Vec<Extra> = textfile_dir
        .map(Extra::Textfile)
        .into_iter()
        .chain(save_report.map(Extra::Saved))
        .collect();
    let mut written = Vec::new();
    let mut all = true;
    for extra in extras {
        match extra.write(report) {
            Ok(()) => written.push(extra),
            Err(why) => {
                eprintln!("gpudoctor: {}", gpudoctor::text::sanitize::text(&why));
                all = false;
                if !keep_verdict && report.exit_code != exit::INTERNAL {
                    report.exit_code = exit::INTERNAL;
                    for done in &written {
                        if let Err(why) = done.write(report) {
                            eprintln!("gpudoctor: {}", gpudoctor::text::sanitize::text(&why));
                        }
                    }
                }
            }
        }
    }
    all
}

/// Longest saved report `render` reads: far above any real one (a few hundred KiB).
const MAX_REPORT_BYTES: u64 = 64 << 20;

/// `gpudoctor render REPORT.json`: a saved report in another format. A named file is read the
/// way `--kernel-log` is (`source::rooted::read_named_file`): opened without blocking, a FIFO or
/// pipe read until its writer closes it but at most `--timeout`, so a FIFO nobody writes cannot
/// hang it. `-` is the shell's own pipe and is read to its end, as `cat -` would.
fn render_saved(args: &gpudoctor::cli::RenderArgs) -> anyhow::Result<i32> {
    use std::io::Read as _;
    if let Some(code) = check_outputs(args.textfile_dir.as_deref(), None) {
        return Ok(code);
    }
    let name = gpudoctor::text::sanitize::text(&args.report.display().to_string()).into_owned();
    let read = if args.report.as_os_str() == "-" {
        let mut bytes = Vec::new();
        io::stdin()
            .lock()
            .take(MAX_REPORT_BYTES)
            .read_to_end(&mut bytes)
            .map(|_| String::from_utf8_lossy(&bytes).into_owned())
            .map_err(|err| err.to_string())
    } else {
        source::rooted::read_named_file(
            &args.report,
            &name,
            MAX_REPORT_BYTES,
            std::time::Duration::from_secs(args.timeout),
        )
        .map_err(|err| err.to_string())
    };
    let text = match read {
        Ok(text) => text,
        Err(err) => {
            eprintln!(
                "gpudoctor: cannot read {}",
                gpudoctor::text::sanitize::text(&err)
            );
            return Ok(exit::USAGE);
        }
    };
    let report: gpudoctor::report::Report = match serde_json::from_str(&text) {
        Ok(r) => r,
        Err(err) => {
            // serde quotes the offending value (`unknown variant ...`): text from the file.
            eprintln!(
                "gpudoctor: {name} is not a gpudoctor JSON report ({}); save one with `gpudoctor check --format json` or --save-report",
                gpudoctor::text::sanitize::text(&err.to_string())
            );
            return Ok(exit::USAGE);
        }
    };
    if report.schema_version > gpudoctor::report::SCHEMA_VERSION {
        eprintln!(
            "gpudoctor: {name} has report schema {}, this gpudoctor knows {}: fields it does not know are left out",
            report.schema_version,
            gpudoctor::report::SCHEMA_VERSION
        );
    }
    // `render`'s own exit code says whether it rendered; the report keeps the exit code it was
    // saved with, in the textfile too.
    let mut report = report;
    let written = write_outputs(&mut report, args.textfile_dir.as_deref(), None, true);
    if let Some(condition) = args.npd_condition {
        let (code, line) = render::npd_conditions::answer_saved(&report, condition, args.max_age);
        emit(&format!("{line}\n")).context("writing the report")?;
        return Ok(if written { code } else { exit::INTERNAL });
    }
    emit(&render_as(&report, args.format, args.verbose)).context("writing the report")?;
    Ok(if written {
        exit::HEALTHY
    } else {
        exit::INTERNAL
    })
}

/// `gpudoctor topo`: the relationship matrix from sysfs (NVLink from NVML when it answers).
/// `--root` as a directory to read: a packed capture (`.tar.gz`) is unpacked into a temporary
/// directory that lives as long as the returned guard. `Err` is the exit code after a message.
fn open_root(
    root: &std::path::Path,
    limits: &record::UnpackLimits,
) -> Result<(Option<record::Unpacked>, std::path::PathBuf), i32> {
    if root.is_file() && record::is_packed(root) {
        // Only a capture: an archive's tree is never judged as a live node (nothing in it is
        // loaded, issue 30).
        return match record::unpack::unpack_capture(root, limits) {
            Ok(dir) => {
                let path = dir.path().to_path_buf();
                Ok((Some(dir), path))
            }
            Err(err) => {
                let err = match err {
                    record::UnpackError::NotACapture(why) => {
                        format!("--root {} is not a capture: {why}", root.display())
                    }
                    // An entry's name comes from the archive.
                    err => format!("--root {}: cannot unpack: {err}", root.display()),
                };
                eprintln!("gpudoctor: {}", gpudoctor::text::sanitize::text(&err));
                Err(exit::USAGE)
            }
        };
    }
    Ok((None, root.to_path_buf()))
}

fn topo(args: &TopoArgs) -> anyhow::Result<i32> {
    let (_unpacked, root) = match open_root(&args.root, &args.unpack.limits()) {
        Ok(pair) => pair,
        Err(code) => return Ok(code),
    };
    if !root.is_dir() {
        eprintln!(
            "gpudoctor: --root {} is not a directory; pass the node's root directory, a recorded fixture directory or a .tar.gz capture",
            shown(&args.root)
        );
        return Ok(exit::USAGE);
    }
    let source = match source::open(&root, args.source_options()) {
        Ok(source) => source,
        Err(err) => return Ok(not_a_capture(&args.root, &err)),
    };
    let capture = source.kind() == gpudoctor::report::SourceKind::Replay;
    if let Some(code) = refuse(&args.inapplicable(capture), &args.root, capture) {
        return Ok(code);
    }
    let topology = match gpudoctor::facts::topology::gather(source.as_ref()) {
        Ok(t) => t,
        Err(err) => {
            eprintln!(
                "gpudoctor: cannot read the pci tree: {}",
                gpudoctor::text::sanitize::text(&err.to_string())
            );
            return Ok(exit::INCONCLUSIVE);
        }
    };
    let nvml = (!args.no_nvml).then(|| source.nvml());
    let matrix = gpudoctor::facts::topology::Matrix::build(&topology, nvml.as_ref());
    let text = match args.format {
        TopoFormat::Json => {
            render::topo::render_json(&topology, &matrix, &args.root.display().to_string())
        }
        TopoFormat::Table => {
            let terminal = io::stdout().is_terminal();
            let style = Style::for_stdout(terminal, std::env::var_os("NO_COLOR").as_deref());
            render::topo::render_table_at(
                &topology,
                &matrix,
                style.color,
                gpudoctor::text::wrap::stdout_width(terminal),
            )
        }
    };
    let pasted = match &args.matrix {
        Some(file) => match gpudoctor::cli::judge::read_matrix(file) {
            Ok(text) => format!("\n{text}"),
            Err(code) => return Ok(code),
        },
        None => String::new(),
    };
    emit(&format!("{text}{pasted}")).context("writing the topology")?;
    Ok(exit::HEALTHY)
}

/// Probe options given where they cannot apply (cli.rs `inapplicable`): each said on stderr,
/// naming the option and why, and the run refused as a usage error before anything is read.
fn refuse(
    refused: &[gpudoctor::cli::Inapplicable],
    root: &std::path::Path,
    capture: bool,
) -> Option<i32> {
    if refused.is_empty() {
        return None;
    }
    for option in refused {
        if capture {
            eprintln!(
                "gpudoctor: {option}; --root {} is a capture",
                gpudoctor::text::sanitize::text(&root.display().to_string())
            );
        } else {
            eprintln!("gpudoctor: {option}");
        }
    }
    Some(exit::USAGE)
}

/// A `--root` with the shape of a capture that is not a complete one: a usage error, never read
/// as a live node. A packed capture is named as given, not by its temporary directory.
fn not_a_capture(given: &std::path::Path, err: &source::NotACapture) -> i32 {
    let err = source::NotACapture {
        root: format!("--root {}", given.display()),
        why: err.why.clone(),
    };
    eprintln!(
        "gpudoctor: {}",
        gpudoctor::text::sanitize::text(&err.to_string())
    );
    exit::USAGE
}

/// A path the user gave (or gpudoctor made from one), as stderr shows it: escaped like node
/// text, since a file name can hold an escape sequence too.
fn shown(path: &std::path::Path) -> String {
    gpudoctor::text::sanitize::text(&path.display().to_string()).into_owned()
}

/// Write to stdout; a reader that went away (`| head`) ends the output quietly.
fn emit(text: &str) -> anyhow::Result<()> {
    // A run stopped by a signal has no report worth printing: what it started was killed.
    if gpudoctor::process::signals::interrupted().is_some() {
        return Ok(());
    }
    let mut out = io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|_| out.flush()) {
        Err(err) if err.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        other => other.map_err(Into::into),
    }
}
