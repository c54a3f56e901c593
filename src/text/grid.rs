//! Column grids — the `topo` matrix, `list-checks`, `profiles` — laid out by comfy-table: no
//! borders, two spaces between columns, the last column not padded, trailing blanks trimmed, so
//! a paste keeps its shape (spaces, never tabs: reference/topology.md §2 hazards). Widths are
//! display widths of what is shown: a cell may carry ANSI colour (the caller's `Style` in
//! `render/table.rs` decides, `NO_COLOR` and pipes included) and comfy-table measures it
//! without the escapes (its `custom_styling`). It never wraps a cell: a grid wider than the
//! terminal stays one line per row here, and `render/topo.rs` splits it into blocks of columns.
//! Node text must be sanitised by the caller before it gets here (an escape is wider than what
//! it stands for).

use comfy_table::{Cell, ContentArrangement, Table, presets};

/// Spaces between two columns.
const GAP: u16 = 2;

/// The header line and one line per row, each without trailing blanks.
pub fn lines(header: &[String], rows: &[Vec<String>]) -> Vec<String> {
    let mut table = Table::new();
    table
        .load_preset(presets::NOTHING)
        .set_content_arrangement(ContentArrangement::Disabled)
        // Styling is the caller's (raw escapes in the cells); comfy-table adds none of its own.
        .force_no_tty();
    table.set_header(header.iter().map(Cell::new));
    for row in rows {
        table.add_row(row.iter().map(Cell::new));
    }
    let columns = table.column_count();
    for (i, column) in table.column_iter_mut().enumerate() {
        let right = if i + 1 == columns { 0 } else { GAP };
        column.set_padding((0, right));
    }
    table.lines().map(|l| l.trim_end().to_string()).collect()
}

/// [`lines`] joined, each ending in a newline.
pub fn text(header: &[String], rows: &[Vec<String>]) -> String {
    let mut out = String::new();
    for line in lines(header, rows) {
        out.push_str(&line);
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(cells: &[&str]) -> Vec<String> {
        cells.iter().map(|c| c.to_string()).collect()
    }

    #[test]
    fn columns_are_padded_to_the_widest_cell_with_two_spaces() {
        let text = text(
            &strings(&["CODE", "LAYER", "TITLE"]),
            &[
                strings(&["driver.gpu_on_pci", "driver", "a title"]),
                strings(&["x.y", "rdma", "another"]),
            ],
        );
        assert_eq!(
            text,
            "CODE               LAYER   TITLE\ndriver.gpu_on_pci  driver  a title\nx.y                rdma    another\n"
        );
    }

    #[test]
    fn coloured_cells_are_measured_without_their_escapes() {
        let header = strings(&["", "GPU0", "GPU1"]);
        let plain = text(
            &header,
            &[
                strings(&["GPU0", "X", "NV18"]),
                strings(&["GPU1", "NV18", "X"]),
            ],
        );
        let green = |t: &str| format!("\x1b[32m{t}\x1b[0m");
        let coloured = text(
            &header,
            &[
                vec!["GPU0".into(), "X".into(), green("NV18")],
                vec!["GPU1".into(), green("NV18"), "X".into()],
            ],
        );
        assert!(coloured.contains("\x1b[32mNV18\x1b[0m"), "{coloured:?}");
        let stripped = coloured.replace("\x1b[32m", "").replace("\x1b[0m", "");
        assert_eq!(stripped, plain);
    }
}
