//! One table's sweep as figures: bus bandwidth by message size, its peak and where, nccl-tests'
//! own average, and where the bandwidth falls away from its peak. Arithmetic only; the share
//! that makes a fall a finding is the checks' (`checks/nccl.rs`).

use super::model::{NcclLog, Row};

/// One message size of a sweep: the best busbw printed for it (both blocks, every repeat of
/// the size — `-N` cycles print each size again).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Point {
    pub size: u64,
    /// GB/s.
    pub busbw: f64,
    /// Index of the row in [`NcclLog::rows`].
    pub row: usize,
}

/// The sizes of one table, smallest first.
#[derive(Debug, Clone, PartialEq)]
pub struct Sweep {
    pub table: usize,
    pub points: Vec<Point>,
    /// The sweep average: the footer's `Avg bus bandwidth` when printed, else computed the way
    /// nccl-tests computes it — the mean busbw of every out-of-place and in-place measure (the
    /// footers of `NVIDIA/nccl-tests#290` are exactly that mean: 439.369 over 12 measures,
    /// 142.735 over 22).
    pub average: Option<f64>,
    pub average_printed: bool,
}

/// Bus bandwidth at the larger sizes staying below a share of the sweep's own peak.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Collapse {
    pub peak: Point,
    /// The first size of the fallen tail, and the largest size.
    pub from: Point,
    pub to: Point,
    /// The best busbw anywhere in the tail.
    pub best_after: f64,
    /// Sizes in the tail.
    pub sizes: usize,
}

impl Sweep {
    /// The sweep of table `table` (a walk over every kept row: for one table).
    pub fn of(log: &NcclLog, table: usize) -> Sweep {
        let rows = log
            .rows
            .iter()
            .enumerate()
            .filter(|(_, r)| r.table == table);
        Sweep::from_rows(log, table, rows)
    }

    /// The sweeps of every table with rows, in the order of the tables: the rows are walked
    /// once. `of` for each table walked every kept row for each (4 096 rows × 1 024 tables on
    /// a long log: 14 M instructions after the parse, whatever the log's size; issue 41).
    pub fn each(log: &NcclLog) -> Vec<Sweep> {
        let mut by_table: Vec<Vec<usize>> = vec![Vec::new(); log.tables.len()];
        for (i, row) in log.rows.iter().enumerate() {
            if let Some(rows) = by_table.get_mut(row.table) {
                rows.push(i);
            }
        }
        by_table
            .iter()
            .enumerate()
            .filter(|(_, rows)| !rows.is_empty())
            .map(|(table, rows)| {
                Sweep::from_rows(log, table, rows.iter().map(|&i| (i, &log.rows[i])))
            })
            .collect()
    }

    /// The sweep of `table` from its rows (with their indices in [`NcclLog::rows`]), in order.
    fn from_rows<'l>(
        log: &NcclLog,
        table: usize,
        rows: impl Iterator<Item = (usize, &'l Row)>,
    ) -> Sweep {
        let mut points: Vec<Point> = Vec::new();
        let mut sum = 0.0;
        let mut measures = 0usize;
        for (i, row) in rows {
            for m in row.measures() {
                sum += m.busbw;
                measures += 1;
            }
            let busbw = row.peak_busbw();
            match points.iter_mut().find(|p| p.size == row.size) {
                Some(p) if busbw > p.busbw => {
                    p.busbw = busbw;
                    p.row = i;
                }
                Some(_) => {}
                None => points.push(Point {
                    size: row.size,
                    busbw,
                    row: i,
                }),
            }
        }
        points.sort_by_key(|p| p.size);
        let printed = log
            .tables
            .get(table)
            .and_then(|t| t.avg_busbw.as_ref())
            .map(|(x, _)| *x);
        let computed = (measures > 0).then(|| sum / measures as f64);
        Sweep {
            table,
            points,
            average: printed.or(computed),
            average_printed: printed.is_some(),
        }
    }

    /// The highest busbw of the sweep (the smallest size reaching it).
    pub fn peak(&self) -> Option<Point> {
        self.points
            .iter()
            .copied()
            .reduce(|best, p| if p.busbw > best.busbw { p } else { best })
    }

    pub fn largest(&self) -> Option<Point> {
        self.points.last().copied()
    }

    /// The highest busbw among sizes of at least `min_size` bytes.
    pub fn peak_from(&self, min_size: u64) -> Option<Point> {
        self.points
            .iter()
            .copied()
            .filter(|p| p.size >= min_size)
            .reduce(|best, p| if p.busbw > best.busbw { p } else { best })
    }

    /// Every size after the peak, to the largest, under `share` × the peak — when at least
    /// `min_sizes` sizes fell. A dip that recovers (`aws/aws-ofi-nccl#65`: 19 GB/s at 64 MiB
    /// between 32.6 and 42.6) is not a collapse: the largest sizes are what training sees.
    pub fn collapse(&self, share: f64, min_sizes: usize) -> Option<Collapse> {
        let peak = self.peak()?;
        if peak.busbw <= 0.0 {
            return None;
        }
        let limit = peak.busbw * share;
        let after: Vec<Point> = self
            .points
            .iter()
            .copied()
            .filter(|p| p.size > peak.size)
            .collect();
        // The fallen tail: from the last size at or above the limit (or the peak) to the end.
        let start = after
            .iter()
            .rposition(|p| p.busbw >= limit)
            .map_or(0, |i| i + 1);
        let tail = &after[start..];
        if tail.len() < min_sizes.max(1) {
            return None;
        }
        Some(Collapse {
            peak,
            from: tail[0],
            to: tail[tail.len() - 1],
            best_after: tail.iter().map(|p| p.busbw).fold(0.0, f64::max),
            sizes: tail.len(),
        })
    }

    pub fn row<'l>(&self, log: &'l NcclLog, point: Point) -> Option<&'l Row> {
        log.rows.get(point.row)
    }
}

#[cfg(test)]
mod tests {
    use super::super::parse_log;
    use super::*;

    fn sweep(rows: &[(u64, f64)]) -> Sweep {
        let text: String = rows
            .iter()
            .map(|(size, busbw)| {
                // One rank pair of numbers nccl-tests could print: time from size and algbw.
                let algbw = busbw / 1.75;
                let time = if algbw > 0.0 { *size as f64 / algbw / 1e3 } else { 10.0 };
                format!(
                    "{size} {} float sum -1 {time:.1} {algbw:.2} {busbw:.2} 0 {time:.1} {algbw:.2} {busbw:.2} 0\n",
                    size / 4
                )
            })
            .collect();
        let log = parse_log(&text);
        assert_eq!(log.rows.len(), rows.len(), "{text}");
        Sweep::of(&log, 0)
    }

    /// `each` walks the rows once; it must give `of` of every table with rows, in order, on
    /// every real log (several tables, duplicate headers, excerpts without headers).
    #[test]
    fn each_is_of_for_every_table_with_rows() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/nccl/real");
        let mut logs = 0;
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_none_or(|e| e != "log") {
                continue;
            }
            let log = parse_log(&std::fs::read_to_string(&path).unwrap());
            let want: Vec<Sweep> = (0..log.tables.len())
                .filter(|&t| log.tables[t].rows > 0)
                .map(|t| Sweep::of(&log, t))
                .collect();
            assert_eq!(Sweep::each(&log), want, "{}", path.display());
            logs += usize::from(want.len() > 1);
        }
        assert!(logs > 0, "no real log with several tables in {dir}");
    }

    #[test]
    fn peak_average_and_collapse() {
        // NVIDIA/nccl#1453's shape: 29.5 at 32 MiB, then about 5 from 64 MiB on.
        let s = sweep(&[
            (16 << 20, 24.09),
            (32 << 20, 29.50),
            (64 << 20, 5.27),
            (128 << 20, 5.30),
            (256 << 20, 4.23),
        ]);
        let peak = s.peak().unwrap();
        assert_eq!((peak.size, peak.busbw), (32 << 20, 29.50));
        assert!(
            (s.average.unwrap() - 13.678).abs() < 1e-3,
            "{:?}",
            s.average
        );
        assert!(!s.average_printed);
        let c = s.collapse(0.5, 2).unwrap();
        assert_eq!((c.from.size, c.to.size, c.sizes), (64 << 20, 256 << 20, 3));
        assert_eq!(c.best_after, 5.30);
        // A dip that recovers is not a collapse (aws/aws-ofi-nccl#65).
        let dip = sweep(&[
            (32 << 20, 32.57),
            (64 << 20, 19.10),
            (128 << 20, 30.73),
            (256 << 20, 42.61),
        ]);
        assert_eq!(dip.collapse(0.5, 2), None);
        // The tail is what falls after the last size that held up.
        let late = sweep(&[
            (1 << 30, 400.0),
            (2 << 30, 390.0),
            (4 << 30, 150.0),
            (8 << 30, 140.0),
        ]);
        let c = late.collapse(0.5, 2).unwrap();
        assert_eq!(c.from.size, 4 << 30);
        // One fallen size is not enough for min_sizes 2.
        let one = sweep(&[(1 << 30, 400.0), (2 << 30, 390.0), (4 << 30, 150.0)]);
        assert_eq!(one.collapse(0.5, 2), None);
        // A flat or rising sweep never collapses, nor an all-zero one (one rank).
        assert_eq!(sweep(&[(8, 0.0), (16, 0.0)]).collapse(0.5, 1), None);
    }
}
