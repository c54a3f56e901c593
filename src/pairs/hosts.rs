//! The hosts of a `gpudoctor pairs` run: a comma list (`--hosts a,b,c`), an Open MPI hostfile
//! (`--hostfile FILE`: `host slots=8 max_slots=8` lines, `#` comments), or Slurm's compressed
//! node list (`SLURM_JOB_NODELIST=gpu[01-04,07],login1`, as `scontrol show hostnames` expands
//! it: ranges keep their zero padding, several bracket groups in one name multiply).

/// More hosts than this is a typo in a range (`gpu[1-100000]`), not a cluster to pair.
pub const MAX_HOSTS: usize = 4096;

/// `a,b, c` → [a, b, c]; empty items dropped.
pub fn from_list(list: &str) -> Vec<String> {
    list.split(',')
        .map(str::trim)
        .filter(|h| !h.is_empty())
        .map(str::to_string)
        .collect()
}

/// An Open MPI hostfile: the first word of each line that is not blank or a comment
/// (`node01 slots=8`, `node02 slots=8 max_slots=8`, `# rack 1`). Open MPI's own parser also
/// accepts `node01:8`; the count is dropped here too (GPUs per node come from
/// `--gpus-per-node`).
pub fn from_hostfile(text: &str) -> Vec<String> {
    text.lines()
        .map(|l| l.split('#').next().unwrap_or(""))
        .filter_map(|l| l.split_whitespace().next())
        .map(|h| h.split(':').next().unwrap_or(h).to_string())
        .filter(|h| !h.is_empty())
        .collect()
}

/// Expand a Slurm compressed node list. Errors name what could not be read.
pub fn from_slurm_nodelist(list: &str) -> Result<Vec<String>, String> {
    let mut hosts = Vec::new();
    for item in split_top_level(list)? {
        let mut expanded = vec![String::new()];
        let mut rest = item.as_str();
        while !rest.is_empty() {
            let (literal, after) = match rest.find('[') {
                Some(open) => (&rest[..open], Some(&rest[open + 1..])),
                None => (rest, None),
            };
            for name in &mut expanded {
                name.push_str(literal);
            }
            let Some(after) = after else { break };
            let close = after
                .find(']')
                .ok_or_else(|| format!("`{item}`: `[` without `]`"))?;
            let choices = expand_ranges(&after[..close]).map_err(|e| format!("`{item}`: {e}"))?;
            if expanded.len().saturating_mul(choices.len()) > MAX_HOSTS {
                return Err(format!("`{item}` expands to more than {MAX_HOSTS} hosts"));
            }
            expanded = expanded
                .iter()
                .flat_map(|prefix| choices.iter().map(move |c| format!("{prefix}{c}")))
                .collect();
            rest = &after[close + 1..];
        }
        hosts.extend(expanded.into_iter().filter(|h| !h.is_empty()));
        if hosts.len() > MAX_HOSTS {
            return Err(format!("more than {MAX_HOSTS} hosts"));
        }
    }
    Ok(hosts)
}

/// Split at commas outside brackets.
fn split_top_level(list: &str) -> Result<Vec<String>, String> {
    let mut items = Vec::new();
    let mut depth = 0i32;
    let mut item = String::new();
    for c in list.trim().chars() {
        match c {
            '[' => depth += 1,
            ']' => depth -= 1,
            _ => {}
        }
        if !(0..=1).contains(&depth) {
            return Err(format!("unbalanced brackets in `{list}`"));
        }
        if c == ',' && depth == 0 {
            items.push(std::mem::take(&mut item));
        } else {
            item.push(c);
        }
    }
    if depth != 0 {
        return Err(format!("unbalanced brackets in `{list}`"));
    }
    items.push(item);
    Ok(items
        .into_iter()
        .map(|i| i.trim().to_string())
        .filter(|i| !i.is_empty())
        .collect())
}

/// `01-04,07` → 01 02 03 04 07 (the padding of the range's first bound kept).
fn expand_ranges(ranges: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    for part in ranges.split(',').map(str::trim) {
        let (lo, hi) = part.split_once('-').unwrap_or((part, part));
        let width = lo.len();
        let (a, b): (u64, u64) = match (lo.parse(), hi.parse()) {
            (Ok(a), Ok(b)) if a <= b => (a, b),
            _ => return Err(format!("`{part}` is not a range of numbers")),
        };
        if b - a >= MAX_HOSTS as u64 || out.len() + (b - a) as usize >= MAX_HOSTS {
            return Err(format!("`{part}` is more than {MAX_HOSTS} hosts"));
        }
        out.extend((a..=b).map(|n| format!("{n:0width$}")));
    }
    Ok(out)
}

/// The GPUs per node a hostfile states, when every line states the same (`slots=8`, `:8`).
pub fn hostfile_slots(text: &str) -> Option<u32> {
    let mut slots = text
        .lines()
        .map(|l| l.split('#').next().unwrap_or(""))
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let mut words = l.split_whitespace();
            let host = words.next().unwrap_or("");
            let from_word = words
                .find_map(|w| w.strip_prefix("slots="))
                .and_then(|n| n.parse::<u32>().ok());
            from_word.or_else(|| host.split_once(':').and_then(|(_, n)| n.parse().ok()))
        });
    let first = slots.next()??;
    slots.all(|s| s == Some(first)).then_some(first)
}

/// Duplicates removed (the first kept), in order; the removed names are returned too.
pub fn dedup(hosts: Vec<String>) -> (Vec<String>, Vec<String>) {
    let mut seen = std::collections::BTreeSet::new();
    let mut kept = Vec::new();
    let mut dropped = Vec::new();
    for h in hosts {
        if seen.insert(h.clone()) {
            kept.push(h);
        } else {
            dropped.push(h);
        }
    }
    (kept, dropped)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expands_slurm_node_lists_as_scontrol_does() {
        assert_eq!(
            from_slurm_nodelist("gpu[01-04,07]").unwrap(),
            ["gpu01", "gpu02", "gpu03", "gpu04", "gpu07"]
        );
        assert_eq!(
            from_slurm_nodelist("a[1-2]-b[3-4],login1").unwrap(),
            ["a1-b3", "a1-b4", "a2-b3", "a2-b4", "login1"]
        );
        assert_eq!(
            from_slurm_nodelist("cnode2-[001-002]").unwrap(),
            ["cnode2-001", "cnode2-002"]
        );
        assert_eq!(from_slurm_nodelist("node7").unwrap(), ["node7"]);
        assert_eq!(
            from_slurm_nodelist("gpu[8-11]").unwrap(),
            ["gpu8", "gpu9", "gpu10", "gpu11"]
        );
        for bad in ["gpu[01-04", "gpu01]", "gpu[a-b]", "gpu[4-1]", "gpu[[1-2]]"] {
            assert!(from_slurm_nodelist(bad).is_err(), "{bad}");
        }
        assert!(from_slurm_nodelist("g[1-99999]").is_err());
        assert!(from_slurm_nodelist("a[1-100]b[1-100]").is_err());
        assert!(from_slurm_nodelist("").unwrap().is_empty());
    }

    #[test]
    fn reads_open_mpi_hostfiles() {
        let text = "# rack 1\nnode01 slots=8\n\n  node02 slots=8 max_slots=8 # spare\nnode03:8\n";
        assert_eq!(from_hostfile(text), ["node01", "node02", "node03"]);
        assert_eq!(hostfile_slots(text), Some(8));
        assert_eq!(hostfile_slots("a slots=4\nb slots=8\n"), None);
        assert_eq!(hostfile_slots("a\nb\n"), None);
        assert_eq!(from_list(" a, b,,c "), ["a", "b", "c"]);
        let (kept, dropped) = dedup(from_list("a,b,a"));
        assert_eq!(
            (kept, dropped),
            (vec!["a".into(), "b".into()], vec!["a".into()])
        );
    }
}
