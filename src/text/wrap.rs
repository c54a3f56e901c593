//! Fitting the human formats (the check table, `topo`) to the terminal: how wide it is, and
//! word wrapping that keeps a line's indentation.
//!
//! Width: the terminal's own (`TIOCGWINSZ` on stdout, tty_ioctl(4)) when stdout is one, else
//! `COLUMNS` (POSIX: "the user's preferred width in column positions", set by shells and by
//! whoever pipes into `less` or a CI log), else none: output to a pipe or a file stays one line
//! per item, as paste-ready as before.
//!
//! Wrapping: at spaces; a continuation line starts at the indent the caller gives (the text
//! column of what it continues). A word longer than the room left — a long path, a kernel-log
//! line without spaces — is broken after its last `/`, `,`, `;` or `=` that fits, else at the
//! width: every line fits, and `--format json` or `markdown` keep such a word whole for
//! pasting. Widths count characters (`char`s), not bytes; gpudoctor's own colour escapes
//! (`ESC [ ... m`) count zero and are never split. Node text reaches here sanitised (escaped),
//! so no other escape is in it.

use std::ffi::OsStr;

/// Fewest characters a continuation line keeps for its text: on a very narrow terminal the
/// indent gives way rather than leaving one character a line.
const MIN_TEXT: usize = 16;

/// The width to wrap at: the terminal's columns (`tty_columns`, from the ioctl, 0 = unknown),
/// else a positive `COLUMNS`, else `None` (do not wrap).
pub fn width_from(tty_columns: Option<u16>, columns: Option<&OsStr>) -> Option<usize> {
    if let Some(cols) = tty_columns.filter(|c| *c > 0) {
        return Some(usize::from(cols));
    }
    columns
        .and_then(OsStr::to_str)
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|c| *c > 0)
}

/// The width for stdout: [`width_from`] with the terminal's size when stdout is a terminal and
/// the process's `COLUMNS`.
pub fn stdout_width(terminal: bool) -> Option<usize> {
    let tty = if terminal { tty_columns(1) } else { None };
    width_from(tty, std::env::var_os("COLUMNS").as_deref())
}

/// `TIOCGWINSZ` on `fd`: the columns, or `None` when it is not a terminal or says 0.
fn tty_columns(fd: libc::c_int) -> Option<u16> {
    let mut size = libc::winsize {
        ws_row: 0,
        ws_col: 0,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCGWINSZ writes one `struct winsize` through the pointer, which points at a
    // live, properly aligned `winsize` owned by this frame; the fd is only read.
    let rc = unsafe { libc::ioctl(fd, libc::TIOCGWINSZ, &mut size as *mut libc::winsize) };
    (rc == 0 && size.ws_col > 0).then_some(size.ws_col)
}

/// Display width: characters, less gpudoctor's colour escapes.
pub fn width_of(text: &str) -> usize {
    let mut n = 0;
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            // ESC [ params m: skip to the final byte.
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            n += 1;
        }
    }
    n
}

/// `line` wrapped at `width` (a `None` width leaves it whole); continuation lines start with
/// `indent` spaces (less on a very narrow terminal, see [`MIN_TEXT`]). Trailing blanks dropped.
pub fn lines(line: &str, width: Option<usize>, indent: usize) -> Vec<String> {
    let Some(width) = width else {
        return vec![line.to_string()];
    };
    if width_of(line) <= width {
        return vec![line.to_string()];
    }
    let indent = indent.min(width.saturating_sub(MIN_TEXT));
    // The line's own leading blanks stay on its first line.
    let lead_len = line.len() - line.trim_start_matches(' ').len();
    let (lead, body) = line.split_at(lead_len);
    let mut out = Vec::new();
    let mut current = lead.to_string();
    let mut used = width_of(lead);
    let mut at_start = true;
    for word in body.split(' ') {
        let w = width_of(word);
        if word.is_empty() {
            // Two spaces in a row (column gaps): keep them while they fit.
            if !at_start && used < width {
                current.push(' ');
                used += 1;
            }
            continue;
        }
        let sep = usize::from(!at_start);
        if used + sep + w <= width {
            if sep == 1 {
                current.push(' ');
            }
            current.push_str(word);
            used += sep + w;
            at_start = false;
            continue;
        }
        // Does not fit: a new line, unless this one holds nothing yet.
        if !at_start {
            out.push(current.trim_end().to_string());
            current = " ".repeat(indent);
            used = indent;
        }
        let mut rest = word.to_string();
        while used + width_of(&rest) > width {
            let room = width.saturating_sub(used).max(1);
            let (head, tail) = split_word(&rest, room);
            current.push_str(&head);
            out.push(current.trim_end().to_string());
            current = " ".repeat(indent);
            used = indent;
            rest = tail;
        }
        used += width_of(&rest);
        current.push_str(&rest);
        at_start = false;
    }
    let last = current.trim_end();
    if !last.trim().is_empty() {
        out.push(last.to_string());
    }
    out
}

/// [`lines`], each with a newline, appended to `out`.
pub fn push(out: &mut String, line: &str, width: Option<usize>, indent: usize) {
    for l in lines(line, width, indent) {
        out.push_str(&l);
        out.push('\n');
    }
}

/// Every line of `text` wrapped with [`lines`], its continuation lines indented to the line's
/// own leading blanks plus `hang`.
pub fn text(text: &str, width: Option<usize>, hang: usize) -> String {
    let mut out = String::new();
    for line in text.lines() {
        let lead = line.len() - line.trim_start_matches(' ').len();
        push(&mut out, line, width, lead + hang);
    }
    out
}

/// A word split so its head is at most `room` wide: after the last `/ , ; =` that fits, else
/// at `room`. Never inside a colour escape.
fn split_word(word: &str, room: usize) -> (String, String) {
    let mut cut = None; // byte index after the last break character within room
    let mut hard = word.len();
    let mut n = 0;
    let mut in_escape = false;
    for (i, c) in word.char_indices() {
        if in_escape {
            if c.is_ascii_alphabetic() {
                in_escape = false;
            }
            continue;
        }
        if c == '\x1b' {
            in_escape = true;
            continue;
        }
        if n == room {
            hard = i;
            break;
        }
        n += 1;
        if matches!(c, '/' | ',' | ';' | '=') {
            cut = Some(i + c.len_utf8());
        }
    }
    let at = match cut {
        // Only a break character in the second half is worth the shorter line.
        Some(at) if width_of(&word[..at]) * 2 >= room => at,
        _ => hard,
    };
    (word[..at].to_string(), word[at..].to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fits(lines: &[String], width: usize) {
        for l in lines {
            assert!(width_of(l) <= width, "{l:?} is wider than {width}");
        }
    }

    #[test]
    fn the_width_comes_from_the_terminal_then_columns_then_nowhere() {
        let cols = |v: &str| Some(OsStr::new(v).to_owned());
        assert_eq!(width_from(Some(120), cols("80").as_deref()), Some(120));
        assert_eq!(width_from(Some(0), cols("80").as_deref()), Some(80));
        assert_eq!(width_from(None, cols("80").as_deref()), Some(80));
        assert_eq!(width_from(None, cols(" 100\n").as_deref()), Some(100));
        assert_eq!(width_from(None, None), None, "piped: one line per item");
        assert_eq!(width_from(None, cols("").as_deref()), None);
        assert_eq!(width_from(None, cols("0").as_deref()), None);
        assert_eq!(width_from(None, cols("wide").as_deref()), None);
        assert_eq!(width_from(None, cols("-5").as_deref()), None);
    }

    #[test]
    fn wraps_at_spaces_with_the_indent_kept() {
        let line =
            "              hint: run `modprobe nvidia` and read `dmesg | grep -i nvrm` if it fails";
        let out = lines(line, Some(40), 16);
        fits(&out, 40);
        assert_eq!(
            out,
            vec![
                "              hint: run `modprobe",
                "                nvidia` and read `dmesg",
                "                | grep -i nvrm` if it",
                "                fails",
            ]
        );
        // Nothing lost but the spaces it broke at.
        let joined: Vec<&str> = out.iter().flat_map(|l| l.split_whitespace()).collect();
        let words: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(joined, words);
    }

    #[test]
    fn no_width_or_a_short_line_is_left_alone() {
        let long = "x ".repeat(200);
        assert_eq!(lines(&long, None, 4), vec![long.clone()]);
        assert_eq!(lines("short  line", Some(80), 4), vec!["short  line"]);
    }

    #[test]
    fn a_long_path_breaks_after_a_slash() {
        let line = "    evidence: sys/bus/pci/devices/0000:18:00.0/max_link_speed: 16.0 GT/s";
        let out = lines(line, Some(40), 6);
        fits(&out, 40);
        assert_eq!(out[0], "    evidence:");
        assert!(out[1].ends_with('/'), "{out:?}");
        assert_eq!(out.concat().replace(' ', ""), line.replace(' ', ""));
    }

    #[test]
    fn a_word_without_break_characters_is_cut_at_the_width() {
        let word = "a".repeat(100);
        let out = lines(&word, Some(30), 2);
        fits(&out, 30);
        assert_eq!(out[0].len(), 30);
        assert_eq!(out.concat().replace(' ', ""), word);
    }

    #[test]
    fn colour_escapes_count_nothing_and_stay_whole() {
        let red = |t: &str| format!("\x1b[1;31m{t}\x1b[0m");
        let line = format!(
            "{} driver.nvidia_module  the nvidia kernel module",
            red("[FAIL]")
        );
        assert_eq!(width_of(&line), line.len() - "\x1b[1;31m\x1b[0m".len());
        let out = lines(&line, Some(30), 7);
        fits(&out, 30);
        assert!(out[0].starts_with(&red("[FAIL]")), "{out:?}");
        let long = red(&"b".repeat(50));
        let out = lines(&long, Some(20), 0);
        fits(&out, 20);
        for l in &out {
            assert!(!l.ends_with('\x1b') && !l.ends_with('['), "{l:?}");
        }
    }

    #[test]
    fn characters_not_bytes() {
        let line = "gpudoctor 0.1.0 · node h · kernel k · driver d — and more words here";
        let out = lines(line, Some(20), 2);
        fits(&out, 20);
        assert!(out.iter().any(|l| l.contains('·')));
    }

    #[test]
    fn a_very_narrow_terminal_keeps_room_for_text() {
        let out = lines("aaaa bbbb cccc dddd eeee", Some(18), 30);
        fits(&out, 18);
        assert_eq!(out, vec!["aaaa bbbb cccc", "  dddd eeee"]);
    }
}
