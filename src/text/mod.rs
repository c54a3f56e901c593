//! Text helpers used on more than one floor: node text made safe for a terminal
//! ([`sanitize`]), word wrapping to the terminal's width ([`wrap`]), and column grids
//! ([`grid`]). Plain functions of strings; nothing here knows a report, a source or a check.

pub mod grid;
pub mod sanitize;
pub mod wrap;
