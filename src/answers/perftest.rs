//! The output of perftest's bandwidth tests (`ib_write_bw`, used here for GPUDirect RDMA
//! loopbacks): the result table, whatever its unit and columns, and the lines that say how a
//! run failed. Pure: text in, [`PerftestOutput`] out; no I/O, no policy.
//!
//! Formats (perftest `src/perftest_parameters.h`, and real outputs in tests/data/perftest/):
//! - the header ` #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]`
//!   (`RESULT_FMT`), `[Gb/sec]` with `--report_gbits` (`RESULT_FMT_G`), `[MiB/sec]` in perftest
//!   releases that renamed perftest's MB (it always was 2^20 bytes: `MB/sec` and `MiB/sec` are
//!   the same number), a `#sl` column with `--sl` QoS runs (`RESULT_FMT_QOS`), per-port columns
//!   after MsgRate with `--report-per-port`;
//! - one row per size (`-a` sweeps every power of two), `REPORT_FMT` `" %-7lu    %-10lu
//!   %-7.2lf ..."`; tabs inside rows (perftest#273); a peak of `0.00` with `-D` or
//!   `--run_infinitely` (no per-iteration peak: read the average, perftest#234);
//! - lines perftest interleaves: `Conflicting CPU frequency values detected ...` between the
//!   header and the row, the CUDA set-up lines (`initializing CUDA`, `Picking device No. 0`),
//!   a repeated header;
//! - failures: `Couldn't ...`, `Failed to ...`, `Unable to ...` lines, ` Parser function exited
//!   with Error`, `Completion with error`, and a run cut short before its row (a hang).

use serde::Serialize;

/// The unit of a table's bandwidth columns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BwUnit {
    /// perftest's MB/sec: 2^20 bytes per second (perftest_parameters.c divides by 0x100000).
    MebibytesPerSec,
    /// `--report_gbits`: 10^9 bits per second.
    GigabitsPerSec,
}

impl BwUnit {
    /// One unit in bits per second.
    pub fn bits_per_sec(self) -> f64 {
        match self {
            BwUnit::MebibytesPerSec => 8.0 * 1_048_576.0,
            BwUnit::GigabitsPerSec => 1e9,
        }
    }
}

/// One result row.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BwRow {
    pub bytes: u64,
    pub iterations: u64,
    /// `BW peak` in Gb/s (0 when perftest did not measure it).
    pub peak_gbits: f64,
    /// `BW average` in Gb/s: the figure judged.
    pub average_gbits: f64,
    pub msg_rate_mpps: Option<f64>,
}

/// What one perftest output says.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct PerftestOutput {
    /// The unit of the last table header seen.
    pub unit: Option<BwUnit>,
    pub rows: Vec<BwRow>,
    /// `RDMA_Write BW Test` and the like.
    pub test: Option<String>,
    /// ` Device         : mlx5_0`.
    pub device: Option<String>,
    /// ` Link type       : IB`.
    pub link_type: Option<String>,
    /// The GPU perftest says it picked: `[pid = 3669, dev = 0] device name = [NVIDIA A30]`, or
    /// `Using ROCm Device with ID: 0, Name: ...`.
    pub gpu_name: Option<String>,
    /// perftest used GPU memory (`allocated GPU buffer`, `Use CUDA memory : ON`, ...).
    pub gpu_memory: bool,
    /// Lines that say the run failed, in order (at most [`MAX_ERRORS`]).
    pub errors: Vec<String>,
    /// A header was seen but a row after it is cut or unreadable.
    pub malformed_rows: Vec<String>,
    /// perftest's server banner was printed: this is the listening side's output (one-sided
    /// tests, `ib_write_bw` and `ib_read_bw`, print their results on the client only).
    pub server: bool,
    pub lines: u64,
}

/// Most error lines kept.
pub const MAX_ERRORS: usize = 16;

impl PerftestOutput {
    /// The row for the largest message size: the figure a loopback is judged by (an `-a` sweep
    /// climbs to its plateau at the largest sizes, reference/profiles.md: AzNHC reads 8 MiB).
    pub fn largest(&self) -> Option<&BwRow> {
        self.rows.iter().max_by_key(|r| r.bytes)
    }

    /// The row for exactly this size, else the largest.
    pub fn at_size(&self, bytes: u64) -> Option<&BwRow> {
        self.rows
            .iter()
            .rev()
            .find(|r| r.bytes == bytes)
            .or_else(|| self.largest())
    }
}

/// The unit of a result header line, `None` when the line is not one.
fn header_unit(line: &str) -> Option<(BwUnit, bool)> {
    let t = line.trim();
    if !t.starts_with("#bytes") || !t.contains("BW average[") {
        return None;
    }
    let unit = if t.contains("BW average[Gb/sec]") {
        BwUnit::GigabitsPerSec
    } else if t.contains("BW average[MB/sec]") || t.contains("BW average[MiB/sec]") {
        BwUnit::MebibytesPerSec
    } else {
        return None;
    };
    Some((unit, t.contains("#sl")))
}

/// `Conflicting CPU frequency ...`, `perftest_parameters ...`: a failure when it says so.
fn is_error_line(t: &str) -> bool {
    let lower = t.to_ascii_lowercase();
    const STARTS: &[&str] = &[
        "couldn't",
        "could not",
        "failed",
        "unable to",
        "error",
        "cannot",
        "can't",
        "no ib devices found",
        "ib device",
        "completion with error",
        "parser function exited with error",
        "cuda error",
        "cuinit",
        "assertion",
        "segmentation fault",
    ];
    STARTS.iter().any(|s| lower.starts_with(s))
        || lower.contains("failed to")
        // getopt_long (glibc posix/getopt.c): `ib_write_bw: unrecognized option '--use_cuda=0'`
        // from a build without CUDA, `option '--use_cuda' doesn't allow an argument` from one
        // older than 4.4-0.29; perftest's own `Unsupported memory type`.
        || lower.contains("unrecognized option")
        || lower.contains("doesn't allow an argument")
        || lower.contains("unsupported memory type")
        // The dynamic loader (glibc elf/dl-load.c, via `_dl_signal_error`): `ib_write_bw: error
        // while loading shared libraries: libcuda.so.1: cannot open shared object file: ...`,
        // exit 127, from a perftest linked to libcuda where none is on the loader's path;
        // perftest ≥ 25.07 `dlopen`s `libcuda.so` itself (src/cuda_loader.c) and prints
        // `dlerror: ...` before `Failed to load CUDA library dynamically`.
        || lower.contains("error while loading shared libraries")
        || lower.starts_with("dlerror:")
        // perftest_parameters.c, cuda_memory.c: dma-buf asked of a build or GPU without it.
        || lower.contains("cannot be used without cuda")
        || lower.contains("dma-buf is not supported")
        || lower.contains("completion with error")
        || (lower.contains("not found") && lower.contains("device"))
}

/// Parse a numeric row of a table with `sl` (QoS) or not. `None` when it is not a full row.
fn parse_row(t: &str, unit: BwUnit, qos: bool) -> Option<BwRow> {
    let fields: Vec<&str> = t.split_whitespace().collect();
    let skip = usize::from(qos);
    if fields.len() < 4 + skip {
        return None;
    }
    let bytes: u64 = fields[0].parse().ok()?;
    let iterations: u64 = fields[1 + skip].parse().ok()?;
    let peak: f64 = fields[2 + skip].parse().ok()?;
    let average: f64 = fields[3 + skip].parse().ok()?;
    if !peak.is_finite() || !average.is_finite() || peak < 0.0 || average < 0.0 {
        return None;
    }
    let msg_rate = fields.get(4 + skip).and_then(|f| f.parse::<f64>().ok());
    let scale = unit.bits_per_sec() / 1e9;
    Some(BwRow {
        bytes,
        iterations,
        peak_gbits: peak * scale,
        average_gbits: average * scale,
        msg_rate_mpps: msg_rate,
    })
}

/// Value after ` Name : ` in the parameter block (two columns per line: `A : x\t\tB : y`).
fn param<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    let at = line.find(key)?;
    let rest = line[at + key.len()..].trim_start();
    let rest = rest.strip_prefix(':')?.trim_start();
    let end = rest.find(['\t', ' ']).unwrap_or(rest.len());
    let value = &rest[..end];
    (!value.is_empty()).then_some(value)
}

/// The tag a test harness puts before every line of perftest's output, ending where perftest's
/// own text begins: the last word before the result header's `#bytes` (avocado-misc-tests'
/// `2019-07-16 03:43:24,134 process L0458 DEBUG| [stdout]  #bytes …` gives `[stdout]`). `None`
/// when the header starts its line (after blanks), or there is no header.
fn harness_tag(text: &str) -> Option<&str> {
    let header = text.lines().find(|l| l.contains("#bytes"))?;
    let before = header[..header.find("#bytes")?].trim_end();
    let tag = before.rsplit([' ', '\t']).next()?;
    (!tag.is_empty()).then_some(tag)
}

/// Parse perftest output (stdout and stderr interleaved is fine).
pub fn parse(text: &str) -> PerftestOutput {
    let mut out = PerftestOutput::default();
    let mut table: Option<(BwUnit, bool)> = None;
    let tag = harness_tag(text);
    for raw in text.lines() {
        out.lines += 1;
        let raw = match tag {
            // The harness's own lines (no tag) are not perftest's.
            Some(tag) => match raw.find(tag) {
                Some(at) => &raw[at + tag.len()..],
                None => continue,
            },
            None => raw,
        };
        let t = raw.trim().trim_end_matches('\r');
        if t.is_empty() {
            continue;
        }
        if let Some(found) = header_unit(t) {
            table = Some(found);
            out.unit = Some(found.0);
            continue;
        }
        if t.starts_with("----") {
            continue;
        }
        if let Some((unit, qos)) = table
            && t.starts_with(|c: char| c.is_ascii_digit())
        {
            match parse_row(t, unit, qos) {
                Some(row) => out.rows.push(row),
                None => out.malformed_rows.push(t.chars().take(200).collect()),
            }
            continue;
        }
        if t.ends_with(" BW Test") || t.ends_with(" Bidirectional BW Test") {
            out.test = Some(t.to_string());
        }
        if out.device.is_none()
            && let Some(v) = param(t, "Device")
        {
            out.device = Some(v.to_string());
        }
        if out.link_type.is_none()
            && let Some(v) = param(t, "Link type")
        {
            out.link_type = Some(v.to_string());
        }
        if let Some(at) = t.find("device name = [") {
            let name = &t[at + "device name = [".len()..];
            out.gpu_name = Some(name.trim_end_matches(']').to_string());
            out.gpu_memory = true;
        }
        if let Some(rest) = t.strip_prefix("Using ROCm Device with ID:")
            && let Some(name) = rest.split(", Name: ").nth(1)
        {
            out.gpu_name = name.split(',').next().map(str::to_string);
            out.gpu_memory = true;
        }
        if t.contains("GPU buffer") || t.starts_with("Use CUDA memory") {
            out.gpu_memory = true;
        }
        if is_waiting_banner(t) {
            out.server = true;
        }
        if is_error_line(t) && out.errors.len() < MAX_ERRORS {
            out.errors.push(t.chars().take(200).collect());
        }
    }
    out
}

/// The GID lines perftest prints (` GID: 00:00:...:255:255:10:00:21:03`): on RoCE they spell
/// the interface's IP address, byte by byte in decimal, which shape-based redaction cannot see.
/// A capture keeps them as ` GID: <gid>`; nothing judged reads them.
pub fn mask_gids(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        match line.find("GID: ") {
            Some(at) if line[..at].trim().is_empty() => {
                out.push_str(&line[..at + 5]);
                out.push_str("<gid>");
                if line.ends_with('\n') {
                    out.push('\n');
                }
            }
            _ => out.push_str(line),
        }
    }
    out
}

/// perftest's server banner: the server is listening and the client may start.
pub fn is_waiting_banner(line: &str) -> bool {
    line.contains("Waiting for client to connect")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gid_lines_are_masked_and_nothing_else() {
        let text = " local address: LID 0000 QPN 0x00e2 PSN 0x7f3b1d\n GID: 00:00:00:00:00:00:00:00:00:00:255:255:10:00:21:03\n #bytes\n";
        let masked = mask_gids(text);
        assert_eq!(
            masked,
            " local address: LID 0000 QPN 0x00e2 PSN 0x7f3b1d\n GID: <gid>\n #bytes\n"
        );
        assert_eq!(mask_gids("no gid here"), "no gid here");
    }

    /// avocado-misc-tests#1196: every line behind the harness's `… DEBUG| [stdout] ` tag
    /// (tests/data/judge/SOURCES.md).
    #[test]
    fn a_harness_tag_before_every_line() {
        let text = include_str!(
            "../../tests/data/judge/perftest_ib_send_bw_avocado-harness-prefix-every-line_multicast_avocado-misc-tests-1196.log"
        );
        let out = parse(text);
        assert_eq!(out.unit, Some(BwUnit::MebibytesPerSec));
        assert_eq!(out.rows.len(), 1);
        assert_eq!(out.rows[0].bytes, 1024);
        // Lines of the harness without the tag are left as they are, and judged as before.
        assert_eq!(harness_tag(" #bytes     #iterations\n"), None);
        assert_eq!(harness_tag("no header\n"), None);
    }

    #[test]
    fn gbits_row_with_tabs_and_zero_peak() {
        // perftest#273 (the row as printed, tabs included).
        let text = " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]\n 8          224958464        0.00               0.48   \t\t   7.498617\n";
        let out = parse(text);
        assert_eq!(out.unit, Some(BwUnit::GigabitsPerSec));
        let row = out.largest().unwrap();
        assert_eq!(row.bytes, 8);
        assert_eq!(row.peak_gbits, 0.0);
        assert_eq!(row.average_gbits, 0.48);
        assert_eq!(row.msg_rate_mpps, Some(7.498617));
    }

    #[test]
    fn mebibytes_convert_to_gigabits() {
        let text = " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]\n 65536      5000             11030.78            11030.45\t\t     0.176487\n";
        let row = parse(text).rows[0].clone();
        // 11030.45 MiB/s = 11030.45 * 8 * 1048576 / 1e9 Gb/s.
        assert!((row.average_gbits - 92.53).abs() < 0.01, "{row:?}");
        let mib = text.replace("MB/sec", "MiB/sec");
        assert_eq!(parse(&mib).rows[0], row);
    }

    #[test]
    fn qos_and_per_port_columns() {
        let qos = " #bytes    #sl      #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]\n 65536    3           5000           96.10            95.90                  0.182900\n";
        let row = &parse(qos).rows[0];
        assert_eq!((row.bytes, row.iterations), (65536, 5000));
        assert_eq!(row.average_gbits, 95.9);
        let per_port = " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]   BW Port1[Gb/sec]   MsgRate Port1[Mpps]   BW Port2[Gb/sec]   MsgRate Port2[Mpps]\n 65536      5000           190.10            189.90\t\t   0.362000        95.00            0.181000              94.90            0.181000\n";
        assert_eq!(parse(per_port).rows[0].average_gbits, 189.9);
    }

    #[test]
    fn cut_rows_and_error_lines_are_kept_apart() {
        let text = "Couldn't connect to localhost:18515\n #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]\n 65536      664644";
        let out = parse(text);
        assert!(out.rows.is_empty());
        assert_eq!(out.malformed_rows, vec!["65536      664644"]);
        assert_eq!(out.errors, vec!["Couldn't connect to localhost:18515"]);
        assert!(parse("").rows.is_empty());
    }

    #[test]
    fn picks_the_row_for_a_size_and_reads_the_cuda_lines() {
        let text = "initializing CUDA\n[pid = 3669, dev = 0] device name = [NVIDIA A30]\n Dual-port       : OFF\t\tDevice         : mlx5_0\n Link type       : IB\n #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]\n 4194304    5000             380.1              379.9              0.011\n 8388608    5000             381.2              380.7              0.005\n";
        let out = parse(text);
        assert_eq!(out.gpu_name.as_deref(), Some("NVIDIA A30"));
        assert!(out.gpu_memory);
        assert_eq!(out.device.as_deref(), Some("mlx5_0"));
        assert_eq!(out.link_type.as_deref(), Some("IB"));
        assert_eq!(out.at_size(8388608).unwrap().average_gbits, 380.7);
        assert_eq!(out.at_size(1).unwrap().bytes, 8388608);
    }
}
