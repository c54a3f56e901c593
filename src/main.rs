//! The `gpudoctor` binary: parse the command line, run, render, exit with the documented code.
//! stdout carries only the report; everything else goes to stderr. A closed pipe is not a crash.

use std::io::{self, IsTerminal, Write};
use std::process::ExitCode;

use anyhow::Context as _;
use clap::Parser;

use gpudoctor::cli::{
    CatalogueFormat, CheckArgs, Cli, Command, ListFormat, RecordArgs, ReportFormat,
};
use gpudoctor::render::table::Style;
use gpudoctor::report::exit;
use gpudoctor::{checks, engine, explain, profile, record, render, source};

fn main() -> ExitCode {
    let cli = Cli::parse();
    let code = match run(cli) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("gpudoctor: internal error: {err:#}");
            exit::INTERNAL
        }
    };
    ExitCode::from(u8::try_from(code).unwrap_or(4))
}

fn run(cli: Cli) -> anyhow::Result<i32> {
    match cli.command {
        Command::Check(args) => check(&args),
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
    // A packed capture: unpack into a temporary directory that lives until the report is out.
    let unpacked = if args.root.is_file() && record::is_packed(&args.root) {
        match record::unpack(&args.root) {
            Ok(dir) => Some(dir),
            Err(err) => {
                eprintln!(
                    "gpudoctor: --root {}: cannot unpack: {err}",
                    args.root.display()
                );
                return Ok(exit::USAGE);
            }
        }
    } else {
        None
    };
    let root = unpacked
        .as_ref()
        .map_or(args.root.clone(), |d| d.path().to_path_buf());
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
    if let Some(path) = &args.kernel_log
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
    let text = match args.format {
        ReportFormat::Json => render::json::render(&report),
        ReportFormat::Table => {
            let color = io::stdout().is_terminal()
                && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
            render::table::render(&report, Style { color })
        }
    };
    emit(&text).context("writing the report")?;
    Ok(report.exit_code)
}

/// Write to stdout; a reader that went away (`| head`) ends the output quietly.
fn emit(text: &str) -> anyhow::Result<()> {
    let mut out = io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|_| out.flush()) {
        Err(err) if err.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        other => other.map_err(Into::into),
    }
}
