//! Pieces of one kernel-log line: the kmsg/dmesg/syslog prefix, PCI addresses, numbers and
//! `key=value` fields. Pure string work; every function is total (junk gives `None`).

/// The `(PCI:0000:2b:00)` field, from just after `(` through `)`. A field that is not an address
/// but looks like a field (short, no spaces or parentheses) gives `None` for the bus id; anything
/// else is not a record.
pub(super) fn take_bus_field(text: &str) -> Option<(Option<String>, &str)> {
    let close = text.find(')')?;
    let field = &text[..close];
    if field.is_empty()
        || field.len() > 32
        || field.contains(|c: char| c.is_whitespace() || c == '(')
    {
        return None;
    }
    let bus_id = take_bdf(field).and_then(|(b, rest)| rest.is_empty().then_some(b));
    Some((bus_id, &text[close + 1..]))
}

/// A PCI address at the start of `text` (optional `PCI:`; `dddd:bb:dd[.f]` or `bb:dd[.f]`),
/// normalised to "0000:2b:00.0", and the text after it (a trailing `:` is left in the rest).
pub(super) fn take_bdf(text: &str) -> Option<(String, &str)> {
    let text = text
        .strip_prefix("PCI:")
        .or_else(|| text.strip_prefix("pci:"))
        .unwrap_or(text);
    let end = text
        .find(|c: char| !(c.is_ascii_hexdigit() || c == ':' || c == '.'))
        .unwrap_or(text.len());
    let (mut token, mut rest) = text.split_at(end);
    if let Some(t) = token.strip_suffix(':') {
        token = t;
        rest = &text[end - 1..];
    }
    if rest.starts_with(|c: char| c.is_alphanumeric() || c == '_') {
        return None;
    }
    normalize_bdf(token).map(|b| (b, rest))
}

pub(super) fn normalize_bdf(token: &str) -> Option<String> {
    let hex = |s: &str, max: usize| -> Option<u32> {
        if s.is_empty() || s.len() > max || !s.chars().all(|c| c.is_ascii_hexdigit()) {
            return None;
        }
        u32::from_str_radix(s, 16).ok()
    };
    let (head, function) = match token.split_once('.') {
        Some((head, f)) if f.len() == 1 => (head, f.parse::<u8>().ok().filter(|f| *f <= 7)?),
        Some(_) => return None,
        None => (token, 0),
    };
    let parts: Vec<&str> = head.split(':').collect();
    let (domain, bus, device) = match parts.as_slice() {
        [d, b, v] if d.len() >= 4 => (hex(d, 8)?, hex(b, 2)?, hex(v, 2)?),
        [b, v] => (0, hex(b, 2)?, hex(v, 2)?),
        _ => return None,
    };
    if device > 0x1f {
        return None;
    }
    Some(format!("{domain:04x}:{bus:02x}:{device:02x}.{function}"))
}

/// Leading decimal digits (at most 10) as a `u32`, and the rest.
pub(super) fn take_number(text: &str) -> Option<(u32, &str)> {
    let end = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    if end == 0 || end > 10 {
        return None;
    }
    let value = text[..end].parse().ok()?;
    Some((value, &text[end..]))
}

/// `key=value, rest` at the start of `text`: the value (single quotes removed; `None` when
/// absent or empty) and the rest.
pub(super) fn take_field<'a>(text: &'a str, key: &str) -> (Option<String>, &'a str) {
    let Some(after) = text.strip_prefix(key) else {
        return (None, text);
    };
    let (value, rest) = match after.split_once(", ") {
        Some((v, r)) => (v, r.trim_start()),
        None => (after.trim_end().trim_end_matches(','), ""),
    };
    let value = value
        .strip_prefix('\'')
        .and_then(|v| v.strip_suffix('\''))
        .unwrap_or(value)
        .trim();
    ((!value.is_empty()).then(|| value.to_string()), rest)
}

/// `GPU 0000:2b:00.0: GPU has fallen off the bus.`, `GPU at 0000:01:00.0 has fallen off the
/// bus.`, or the three-line `The NVIDIA GPU <bdf> ... fallen off the bus` form when the record
/// arrives as one line (`/dev/kmsg` escapes the embedded newlines as `\x0a`).
pub(super) fn fallen_off_bus_id(text: &str) -> Option<String> {
    if !text.contains("fallen off the bus") {
        return None;
    }
    let rest = text
        .strip_prefix("GPU at ")
        .or_else(|| text.strip_prefix("GPU "))
        .or_else(|| text.strip_prefix("The NVIDIA GPU "))?;
    take_bdf(rest).map(|(bus_id, _)| bus_id)
}

/// `GPU at PCI:0000:2b:00: GPU-<uuid>` -> ("0000:2b:00.0", "GPU-<uuid>").
pub(super) fn parse_uuid_line(text: &str) -> Option<(String, String)> {
    let rest = text.strip_prefix("GPU at ")?;
    let (bus_id, rest) = take_bdf(rest)?;
    let uuid = rest.strip_prefix(':')?.split_whitespace().next()?;
    let id = uuid.strip_prefix("GPU-")?;
    let valid = !id.is_empty()
        && id.contains(|c: char| c.is_ascii_hexdigit())
        && id.chars().all(|c| c.is_ascii_hexdigit() || c == '-');
    valid.then(|| (bus_id, uuid.to_string()))
}

/// Whether an `NVRM:` line (text after `NVRM:`) continues the previous XID record: the rows of
/// the GSP RPC history table (indented), its `GPU<n> ... RPC ...` headers, and the closing
/// all-asterisk banner.
pub(super) fn is_continuation(after: &str) -> bool {
    let body = after.strip_prefix(' ').unwrap_or(after);
    if body.starts_with(char::is_whitespace) && !body.trim().is_empty() {
        return true;
    }
    let text = after.trim();
    let (instance, text) = match strip_gpu_instance(text) {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    if instance && text.contains("RPC") {
        return true;
    }
    let banner = match text.split_once(": ") {
        Some((ident, rest))
            if !ident.is_empty()
                && ident.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') =>
        {
            rest.trim()
        }
        _ => text,
    };
    !banner.is_empty() && banner.chars().all(|c| c == '*')
}

/// `GPU4 rest` -> `rest` (the driver's GPU instance prefix; `GPU 0000:..` does not match).
pub(super) fn strip_gpu_instance(text: &str) -> Option<&str> {
    let rest = text.strip_prefix("GPU")?;
    let digits = rest.find(|c: char| !c.is_ascii_digit())?;
    if digits == 0 {
        return None;
    }
    rest[digits..].strip_prefix(' ')
}

/// A raw `/dev/kmsg` record `<prio>,<seq>,<usec>,<flags>[,...];<text>` -> (usec, text).
pub(super) fn split_kmsg(line: &str) -> Option<(&str, &str)> {
    let semi = line.find(';')?;
    let head = &line[..semi];
    if head.len() > 128 || head.contains(char::is_whitespace) {
        return None;
    }
    let mut fields = head.split(',');
    let prio = fields.next()?;
    let seq = fields.next()?;
    let usec = fields.next()?;
    fields.next()?;
    let digits = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_digit());
    (digits(prio) && digits(seq) && digits(usec)).then(|| (usec, &line[semi + 1..]))
}

/// A kmsg dictionary continuation line: ` KEY=value` (leading space, upper-case key).
pub(super) fn is_kmsg_dictionary(line: &str) -> bool {
    let Some(rest) = line.strip_prefix(' ') else {
        return false;
    };
    let rest = rest.trim_start();
    match rest.split_once('=') {
        Some((key, _)) => {
            !key.is_empty()
                && key
                    .chars()
                    .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
        }
        None => false,
    }
}

/// Split any kernel-log line into its stamp text (as [`prefix_timestamp`] and the kmsg
/// `<usec>` give it) and the message after every prefix: a raw kmsg record, `<4>` priorities,
/// a dmesg `[...]` stamp, or a syslog/journal `<date> <host> kernel: ` head with or without the
/// kernel's own `[...]` after it. A line with none of them is all message.
pub(super) fn split_prefix(line: &str) -> (Option<&str>, &str) {
    if let Some((usec, text)) = split_kmsg(line) {
        return (Some(usec), text.trim_start());
    }
    let mut text = line.trim_start();
    if let Some(rest) = text.strip_prefix('<')
        && let Some((prio, after)) = rest.split_once('>')
        && !prio.is_empty()
        && prio.len() <= 3
        && prio.bytes().all(|b| b.is_ascii_digit())
    {
        text = after;
    }
    if let Some(stamped) = bracket(text) {
        return stamped;
    }
    // `pdsh -w nodes dmesg` / `clush`: `b1360: [14280.445220] mlx5_core …`, the host's name
    // before each line of its kernel log (the stamp must follow, or it is a message).
    if let Some((host, _)) = text.split_once(": [")
        && !host.is_empty()
        && host.len() <= 64
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_'))
        && let Some(stamped) = bracket(&text[host.len() + 2..])
        && stamped
            .0
            .is_some_and(|st| st[1..st.len() - 1].trim().parse::<f64>().is_ok())
    {
        return stamped;
    }
    // Syslog / journal: the head before ` kernel: ` is short and starts with a date.
    if let Some(at) = text
        .get(..text.len().min(96))
        .and_then(|h| h.find(" kernel: "))
    {
        let head = text[..at].trim();
        let rest = text[at + " kernel: ".len()..].trim_start();
        if let Some(stamped) = bracket(rest) {
            return stamped;
        }
        let date = head.rsplit_once(' ').map(|(d, _host)| d.trim());
        return (date.filter(|d| !d.is_empty()), rest);
    }
    (None, text)
}

/// `[...] rest` -> (`[...]`, `rest`), for a short bracket at the start of `text`.
fn bracket(text: &str) -> Option<(Option<&str>, &str)> {
    if !text.starts_with('[') {
        return None;
    }
    let close = text.get(..text.len().min(48))?.find(']')?;
    Some((Some(&text[..=close]), text[close + 1..].trim_start()))
}

/// The timestamp in the text before the message: the first `[...]` (dmesg, dmesg -T, or the
/// kernel's own stamp inside syslog), else the syslog date before `<host> kernel:`.
pub(super) fn prefix_timestamp(prefix: &str) -> Option<String> {
    if let Some(open) = prefix.find('[')
        && let Some(len) = prefix[open..].find(']')
    {
        return Some(prefix[open..=open + len].to_string());
    }
    let (head, _) = prefix.split_once(" kernel:")?;
    let (date, _host) = head.trim().rsplit_once(' ')?;
    let date = date.trim();
    (!date.is_empty()).then(|| date.to_string())
}

/// `Xid` or `SXid` as a word (not `_kgspLogXid119`, not `Xidfoo`).
pub(super) fn mentions_xid(text: &str) -> bool {
    let bytes = text.as_bytes();
    let boundary =
        |i: usize| i == 0 || !(bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_');
    let mut from = 0;
    while let Some(found) = text.get(from..).and_then(|t| t.find("Xid")) {
        let at = from + found;
        let word_end = bytes.get(at + 3).is_none_or(|c| !c.is_ascii_alphabetic());
        if word_end && (boundary(at) || (bytes[at - 1] == b'S' && boundary(at - 1))) {
            return true;
        }
        from = at + 3;
    }
    false
}

/// `text` cut to at most `max` bytes on a char boundary.
pub(super) fn clip(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}
