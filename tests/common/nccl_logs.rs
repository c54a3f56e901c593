//! nccl-tests output for stand-in benchmarks: the real two-node table
//! (tests/data/nccl/real/nccl-tests-290-slurm-label-two-node.log) with its result rows scaled,
//! as tests/pairs.rs and tests/pairs_real.rs print it for a pair of a chosen speed.

pub fn data(rel: &str) -> String {
    std::fs::read_to_string(super::repo().join("tests/data/nccl").join(rel)).unwrap()
}

/// The real two-node table with every result row's algbw and busbw scaled by `factor`.
pub fn scaled_log(factor: f64) -> String {
    let mut out = String::new();
    for line in data("real/nccl-tests-290-slurm-label-two-node.log").lines() {
        let (label, body) = line.split_at(line.find(':').map_or(0, |i| i + 1));
        let fields: Vec<&str> = body.split_whitespace().collect();
        let is_row = fields.len() == 13 && fields[0].parse::<u64>().is_ok();
        if !is_row {
            out.push_str(line);
            out.push('\n');
            continue;
        }
        let scale = |i: usize| {
            fields[i]
                .parse::<f64>()
                .map(|x| format!("{:.2}", x * factor))
                .unwrap_or(fields[i].to_string())
        };
        // The parser checks a row's arithmetic (algbw = size / time): the times grow as the
        // bandwidths shrink.
        let slower = |i: usize| {
            fields[i]
                .parse::<f64>()
                .map(|x| format!("{:.1}", x / factor))
                .unwrap_or(fields[i].to_string())
        };
        let mut cells: Vec<String> = fields.iter().map(|s| s.to_string()).collect();
        for i in [6, 7, 10, 11] {
            cells[i] = scale(i);
        }
        for i in [5, 9] {
            cells[i] = slower(i);
        }
        out.push_str(&format!("{label} {}\n", cells.join("  ")));
    }
    out
}
