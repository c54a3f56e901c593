//! Which table a row or footer belongs to, and the cap on tables kept ([`MAX_TABLES`]).
//!
//! Every test of a log is a table of its own, and a log of repeated sweeps holds as many tables
//! as it has tests (issue 28: 100 000 at 256 MiB). Keeping them all made memory grow with the
//! log, and the checks that walk them and name every test (`nccl.run_completed`) with it. So
//! only the first [`MAX_TABLES`] are kept in [`NcclLog::tables`]; a later table is counted in
//! [`NcclLog::dropped_tables`], and only the latest one is held, as [`NcclLog::last_dropped`],
//! for what the end of the log says (did the last test print its footer). What the checks judge
//! past the cap:
//! - rows of a table past the cap are not kept (counted in [`NcclLog::dropped_rows`], like rows
//!   past [`MAX_ROWS`](super::MAX_ROWS)): a table not kept has no rows to point at;
//! - its `Out of bounds values` footer is not lost: the first one that counted failures (else
//!   the first one) is kept as [`NcclLog::dropped_out_of_bounds`], so `nccl.wrong_results`
//!   still fails a log whose corruption shows only in a late test;
//! - `nccl.run_completed` says how many tables were not kept.
//!
//! [`NcclLog`]: super::NcclLog
//! [`NcclLog::tables`]: super::NcclLog::tables
//! [`NcclLog::dropped_tables`]: super::NcclLog::dropped_tables
//! [`NcclLog::last_dropped`]: super::NcclLog::last_dropped
//! [`NcclLog::dropped_rows`]: super::NcclLog::dropped_rows
//! [`NcclLog::dropped_out_of_bounds`]: super::NcclLog::dropped_out_of_bounds

use super::NcclLogParser;
use super::model::{Quoted, Table};

/// Tables kept. A long sweep of every collective at every data type is a few dozen tests; with
/// [`MAX_ROWS`](super::MAX_ROWS) rows kept, 1024 tables leaves four rows to each before this cap
/// drops any row the row cap would have kept (a real sweep prints 10 to 35).
pub const MAX_TABLES: usize = 1024;

/// The index rows and footers of a table past the cap go to: [`NcclLog::last_dropped`](super::NcclLog::last_dropped).
const DROPPED: usize = MAX_TABLES;

impl NcclLogParser {
    /// The table rows go to, made when a row or footer comes without a header (an excerpt).
    pub(super) fn table(&mut self) -> usize {
        match self.current_table {
            Some(t) => t,
            None => self.new_table(),
        }
    }

    pub(super) fn new_table(&mut self) -> usize {
        let table = Table {
            collective: self.next_collective.take(),
            config: self.next_config.take(),
            ..Table::default()
        };
        let index = if self.log.tables.len() < MAX_TABLES {
            self.log.tables.push(table);
            self.log.tables.len() - 1
        } else {
            self.log.dropped_tables += 1;
            self.log.last_dropped = Some(table);
            DROPPED
        };
        self.current_table = Some(index);
        index
    }

    /// Table `index` (a kept one, or the latest past the cap).
    pub(super) fn table_at(&self, index: usize) -> Option<&Table> {
        if index == DROPPED {
            self.log.last_dropped.as_ref()
        } else {
            self.log.tables.get(index)
        }
    }

    pub(super) fn table_at_mut(&mut self, index: usize) -> Option<&mut Table> {
        if index == DROPPED {
            self.log.last_dropped.as_mut()
        } else {
            self.log.tables.get_mut(index)
        }
    }

    /// Whether table `index` is kept (its rows can be).
    pub(super) fn is_kept(index: usize) -> bool {
        index != DROPPED
    }

    /// An `Out of bounds values` footer of table `index`.
    pub(super) fn set_out_of_bounds(&mut self, index: usize, n: u64, quote: &Quoted) {
        if index == DROPPED {
            let failed_kept = self
                .log
                .dropped_out_of_bounds
                .as_ref()
                .is_some_and(|(m, _)| *m > 0);
            if !failed_kept && (n > 0 || self.log.dropped_out_of_bounds.is_none()) {
                self.log.dropped_out_of_bounds = Some((n, quote.clone()));
            }
        }
        if let Some(t) = self.table_at_mut(index) {
            t.out_of_bounds = Some((n, quote.clone()));
        }
    }
}
