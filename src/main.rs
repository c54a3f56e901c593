//! The `gpudoctor` binary: parse the command line, run, render, exit with the documented code.
//! stdout carries only the report; everything else goes to stderr. A closed pipe is not a crash.

use std::io::{self, IsTerminal, Write};
use std::process::ExitCode;

use anyhow::Context as _;
use clap::Parser;

use gpudoctor::cli::{
    CatalogueFormat, CheckArgs, Cli, Command, ListFormat, RecordArgs, ReportFormat, TopoArgs,
    TopoFormat,
};
use gpudoctor::render::table::Style;
use gpudoctor::report::exit;
use gpudoctor::{checks, engine, explain, profile, record, render, source};

fn main() -> ExitCode {
    let cli = Cli::parse();
    let npd = matches!(&cli.command, Command::Check(args) if args.npd);
    let mut code = match run(cli) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("gpudoctor: internal error: {err:#}");
            if npd {
                let line = render::npd::fit(
                    &format!("gpudoctor: internal error: {err:#}"),
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
    ExitCode::from(u8::try_from(code).unwrap_or(4))
}

fn run(cli: Cli) -> anyhow::Result<i32> {
    match cli.command {
        Command::Check(args) => check(&args),
        Command::Topo(args) => topo(&args),
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
                eprintln!("gpudoctor: no check has the code `{code}`");
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
    }
}

fn record(args: &RecordArgs) -> anyhow::Result<i32> {
    let options = record::RecordOptions {
        root: args.root.clone(),
        out: args.out.clone(),
        redact: !args.no_redact,
        force: args.force,
        source: args.source_options(),
        command_line: std::env::args().collect(),
    };
    eprintln!("gpudoctor: recording {} ...", args.root.display());
    match record::record(&options) {
        Ok(summary) => {
            let redacted: Vec<String> = summary
                .redacted
                .iter()
                .map(|(k, n)| format!("{n} {k}"))
                .collect();
            eprintln!(
                "gpudoctor: wrote {} ({} files, {} links, {} KiB); {} unreadable path(s) listed in the manifest; redacted: {}",
                summary.out.display(),
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
            eprintln!(
                "gpudoctor: the capture replays with `gpudoctor check --root {}` (verdict: exit {})",
                summary.out.display(),
                summary.report.exit_code
            );
            emit(&format!("{}\n", summary.out.display()))?;
            Ok(exit::HEALTHY)
        }
        Err(
            err @ (record::RecordError::OutputExists(_)
            | record::RecordError::OutputIsRoot(_)
            | record::RecordError::RootNotDirectory(_)),
        ) => {
            eprintln!("gpudoctor: {err}");
            Ok(exit::USAGE)
        }
        Err(err) => Err(err.into()),
    }
}

fn check(args: &CheckArgs) -> anyhow::Result<i32> {
    if let Some(code) = check_outputs(args.textfile_dir.as_deref(), args.save_report.as_deref()) {
        return Ok(code);
    }
    let (unpacked, root) = match open_root(&args.root) {
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
            args.root.display()
        );
        return Ok(exit::USAGE);
    }
    if let Some(path) = &args.probes.kernel_log
        && !path.is_file()
    {
        eprintln!(
            "gpudoctor: --kernel-log {} is not a readable file",
            path.display()
        );
        return Ok(exit::USAGE);
    }
    let mut options = args.run_options();
    if let Some(arg) = &args.profile {
        match profile::load(arg) {
            Ok(p) => options.profile = Some(p),
            Err(err) => {
                eprintln!("gpudoctor: --profile {arg}: {err}");
                return Ok(exit::USAGE);
            }
        }
    }
    let source = source::open(&root, args.source_options());
    let mut report = engine::run(source.as_ref(), &options);
    if unpacked.is_some() {
        report.source.root = args.root.display().to_string();
    }
    deliver(&report, args)
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
            dir.display()
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
                file.display()
            );
            return Some(exit::USAGE);
        }
    }
    None
}

/// The report in one of the `--format`s.
fn render_as(report: &gpudoctor::report::Report, format: ReportFormat) -> String {
    match format {
        ReportFormat::Json => render::json::render(report),
        ReportFormat::Markdown => render::markdown::render(report),
        ReportFormat::Prometheus => render::prometheus::render(report),
        ReportFormat::Table => {
            let style = Style::for_stdout(
                io::stdout().is_terminal(),
                std::env::var_os("NO_COLOR").as_deref(),
            );
            render::table::render(report, style)
        }
    }
}

/// Write the files asked for (Prometheus textfile, saved JSON report), then print the report —
/// or, with `--npd`, the one-line message. A file that cannot be written is said on stderr; it
/// makes the exit code 4, except under `--npd`, where the node's verdict is what NPD needs.
fn deliver(report: &gpudoctor::report::Report, args: &CheckArgs) -> anyhow::Result<i32> {
    let written = write_outputs(
        report,
        args.textfile_dir.as_deref(),
        args.save_report.as_deref(),
    );
    let text = if args.npd {
        format!("{}\n", render::npd::message(report))
    } else {
        render_as(report, args.format)
    };
    emit(&text).context("writing the report")?;
    match written {
        Err(err) if !args.npd => Err(err),
        _ => Ok(report.exit_code),
    }
}

fn write_outputs(
    report: &gpudoctor::report::Report,
    textfile_dir: Option<&std::path::Path>,
    save_report: Option<&std::path::Path>,
) -> anyhow::Result<()> {
    let mut failed = None;
    if let Some(dir) = textfile_dir
        && let Err(err) =
            gpudoctor::output::write_textfile(dir, &render::prometheus::render(report))
    {
        eprintln!(
            "gpudoctor: cannot write {}: {err}",
            dir.join(gpudoctor::output::TEXTFILE_NAME).display()
        );
        failed = Some(anyhow::anyhow!("writing the prometheus textfile: {err}"));
    }
    if let Some(file) = save_report
        && let Err(err) =
            gpudoctor::output::write_atomically(file, render::json::render(report).as_bytes())
    {
        eprintln!("gpudoctor: cannot write {}: {err}", file.display());
        failed = Some(anyhow::anyhow!("saving the report: {err}"));
    }
    match failed {
        Some(err) => Err(err),
        None => Ok(()),
    }
}

/// Longest saved report `render` reads: far above any real one (a few hundred KiB).
const MAX_REPORT_BYTES: u64 = 64 << 20;

/// `gpudoctor render REPORT.json`: a saved report in another format.
fn render_saved(args: &gpudoctor::cli::RenderArgs) -> anyhow::Result<i32> {
    use std::io::Read as _;
    if let Some(code) = check_outputs(args.textfile_dir.as_deref(), None) {
        return Ok(code);
    }
    let name = args.report.display().to_string();
    let mut text = String::new();
    let read = if name == "-" {
        io::stdin()
            .lock()
            .take(MAX_REPORT_BYTES)
            .read_to_string(&mut text)
    } else {
        std::fs::File::open(&args.report)
            .and_then(|f| f.take(MAX_REPORT_BYTES).read_to_string(&mut text))
    };
    if let Err(err) = read {
        eprintln!("gpudoctor: cannot read {name}: {err}");
        return Ok(exit::USAGE);
    }
    let report: gpudoctor::report::Report = match serde_json::from_str(&text) {
        Ok(r) => r,
        Err(err) => {
            eprintln!(
                "gpudoctor: {name} is not a gpudoctor JSON report ({err}); save one with `gpudoctor check --format json` or --save-report"
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
    write_outputs(&report, args.textfile_dir.as_deref(), None)?;
    emit(&render_as(&report, args.format)).context("writing the report")?;
    Ok(exit::HEALTHY)
}

/// `gpudoctor topo`: the relationship matrix from sysfs (NVLink from NVML when it answers).
/// `--root` as a directory to read: a packed capture (`.tar.gz`) is unpacked into a temporary
/// directory that lives as long as the returned guard. `Err` is the exit code after a message.
fn open_root(
    root: &std::path::Path,
) -> Result<(Option<tempfile::TempDir>, std::path::PathBuf), i32> {
    if root.is_file() && record::is_packed(root) {
        return match record::unpack(root) {
            Ok(dir) => {
                let path = dir.path().to_path_buf();
                Ok((Some(dir), path))
            }
            Err(err) => {
                eprintln!("gpudoctor: --root {}: cannot unpack: {err}", root.display());
                Err(exit::USAGE)
            }
        };
    }
    Ok((None, root.to_path_buf()))
}

fn topo(args: &TopoArgs) -> anyhow::Result<i32> {
    let (_unpacked, root) = match open_root(&args.root) {
        Ok(pair) => pair,
        Err(code) => return Ok(code),
    };
    if !root.is_dir() {
        eprintln!(
            "gpudoctor: --root {} is not a directory; pass the node's root directory, a recorded fixture directory or a .tar.gz capture",
            args.root.display()
        );
        return Ok(exit::USAGE);
    }
    let source = source::open(&root, args.source_options());
    let topology = match gpudoctor::facts::topology::gather(source.as_ref()) {
        Ok(t) => t,
        Err(err) => {
            eprintln!("gpudoctor: cannot read the pci tree: {err}");
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
            let style = Style::for_stdout(
                io::stdout().is_terminal(),
                std::env::var_os("NO_COLOR").as_deref(),
            );
            render::topo::render_table(&topology, &matrix, style.color)
        }
    };
    emit(&text).context("writing the topology")?;
    Ok(exit::HEALTHY)
}

/// Write to stdout; a reader that went away (`| head`) ends the output quietly.
fn emit(text: &str) -> anyhow::Result<()> {
    let mut out = io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|_| out.flush()) {
        Err(err) if err.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        other => other.map_err(Into::into),
    }
}
