//! `gpudoctor judge FILE…`: the files read (a path, or `-` for standard input), handed to
//! `judge::judge`, and the report rendered as `check` renders its own. Reading is bounded as
//! `--kernel-log` is (`source::rooted::read_named_file`: a FIFO nobody writes ends at the
//! timeout, a file over the cap is refused, not judged on its beginning).

use std::io::{IsTerminal as _, Read as _};
use std::time::Duration;

use super::*;
use crate::judge::{Pasted, Unjudgeable};
use crate::render::{self, table::Style};
use crate::report::{Report, exit};

/// Most bytes read of one file: a day of a busy node's kernel log, or an NCCL log of a large
/// job with `NCCL_DEBUG=INFO`, fits; larger is cut with `tail`/`grep` first.
pub const JUDGE_CAP: u64 = 256 << 20;

#[derive(Debug, Args)]
pub struct JudgeArgs {
    /// Files pasted into a ticket, in any order and mix; `-` reads standard input.
    #[arg(value_name = "FILE", required = true)]
    pub files: Vec<PathBuf>,

    /// Output format.
    #[arg(long, value_enum, default_value_t = ReportFormat::Table)]
    pub format: ReportFormat,

    /// Warnings make the exit code 1.
    #[arg(long)]
    pub strict: bool,

    /// Longest to wait for a pipe or FIFO to be written and closed, in seconds.
    #[arg(long, value_name = "SECS", default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..=86400))]
    pub timeout: u64,
}

/// The report in one of the `--format`s (the table coloured on a terminal unless `NO_COLOR`).
pub fn render_as(report: &Report, format: ReportFormat) -> String {
    render_verbose(report, format, false)
}

/// [`render_as`], the table with `--verbose`: passing checks and their figures too.
pub fn render_verbose(report: &Report, format: ReportFormat, verbose: bool) -> String {
    match format {
        ReportFormat::Json => render::json::render(report),
        ReportFormat::Markdown => render::markdown::render(report),
        ReportFormat::Prometheus => render::prometheus::render(report),
        ReportFormat::Junit => render::junit::render(report),
        ReportFormat::Table => {
            let terminal = std::io::stdout().is_terminal();
            let style = Style::for_stdout(terminal, std::env::var_os("NO_COLOR").as_deref())
                .with_width(crate::text::wrap::stdout_width(terminal))
                .verbose(verbose);
            render::table::render(report, style)
        }
    }
}

fn read(path: &std::path::Path, wait: Duration) -> Result<Pasted, String> {
    if path == std::path::Path::new("-") {
        let mut bytes = Vec::new();
        std::io::stdin()
            .lock()
            .take(JUDGE_CAP + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| format!("standard input: {e}"))?;
        if bytes.len() as u64 > JUDGE_CAP {
            return Err(format!("standard input: over {} MiB", JUDGE_CAP >> 20));
        }
        return Ok(Pasted {
            name: "-".to_string(),
            text: String::from_utf8_lossy(&bytes).into_owned(),
        });
    }
    let shown = path.display().to_string();
    if path.is_dir() {
        return Err(format!("{shown}: is a directory; pass the files in it"));
    }
    let text = crate::source::rooted::read_named_file(path, &shown, JUDGE_CAP, wait)
        .map_err(|e| e.to_string())?;
    Ok(Pasted { name: shown, text })
}

/// Run `judge`: the report's text and exit code, or the exit code of a usage error said on
/// stderr.
pub fn run(args: &JudgeArgs) -> Result<(String, i32), i32> {
    let usage = |why: &str| {
        eprintln!("gpudoctor: judge: {}", crate::text::sanitize::text(why));
        exit::USAGE
    };
    if args.files.iter().filter(|f| f.as_os_str() == "-").count() > 1 {
        return Err(usage("`-` (standard input) can be given once"));
    }
    let wait = Duration::from_secs(args.timeout);
    let mut files = Vec::new();
    for path in &args.files {
        files.push(read(path, wait).map_err(|why| usage(&why))?);
    }
    match crate::judge::judge(&files, args.strict) {
        Ok(report) => Ok((render_as(&report, args.format), report.exit_code)),
        Err(Unjudgeable(why)) => Err(usage(&why)),
    }
}

/// `topo --matrix FILE`: the pasted matrix read and rendered, or the exit code of a usage
/// error said on stderr (unreadable, or no matrix in it).
pub fn read_matrix(path: &std::path::Path) -> Result<String, i32> {
    let usage = |why: &str| {
        eprintln!(
            "gpudoctor: topo --matrix {}",
            crate::text::sanitize::text(why)
        );
        exit::USAGE
    };
    let file = read(path, Duration::from_secs(60)).map_err(|why| usage(&why))?;
    match crate::facts::smi_topo::parse(&file.text) {
        Ok(m) => Ok(render::topo::render_pasted(&m, &file.name)),
        Err(err) => Err(usage(&format!("{}: {err}", file.name))),
    }
}
