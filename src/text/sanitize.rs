//! Text from the node, made safe for a terminal. Everything a human format prints that came
//! from the node or from a saved report — host names, kernel-log lines, NVML strings, device
//! and file names, profile names, NCCL lines — passes through [`text`] once, where it enters the
//! renderer (`render::sanitize::report` for the report formats, the topology renderer for its
//! entries), so an escape sequence planted in a file cannot recolour, retitle (OSC 0) or
//! rewrite (CR, bidi overrides) what the operator reads.
//!
//! What is escaped, visibly and reversibly for a reader:
//! - C0 controls (U+0000–U+001F) except tab, and DEL (U+007F): `\x1b`, `\r`, `\n`, `\x07`;
//! - C1 controls (U+0080–U+009F), which terminals in 8-bit mode read as CSI/OSC: `\u{9b}`;
//! - the bidirectional overrides and isolates of Unicode TR9 (U+202A–U+202E, U+2066–U+2069),
//!   the "Trojan Source" characters (CVE-2021-42574): `\u{202e}`;
//! - the implicit directional marks U+061C (Arabic letter mark), U+200E and U+200F (LRM, RLM),
//!   which reorder neutral characters around them just as invisibly (TR9 §2.6);
//! - the line and paragraph separators U+2028 and U+2029, which some terminals and most editors
//!   and browsers break a line at: a value could start a line of its own that looks like
//!   gpudoctor's.
//!
//! Invalid UTF-8 never reaches here as such: readers decode lossily (U+FFFD) or refuse the file
//! as not text. JSON keeps its own escaping: [`json`] adds `\uXXXX` for the characters above
//! that serde_json writes raw (it escapes only C0). Prometheus label values use [`text`], then
//! the exposition format's escaping.

use std::borrow::Cow;

/// Should `c` be shown escaped?
fn unsafe_char(c: char) -> bool {
    matches!(c,
        '\u{0}'..='\u{8}' | '\u{a}'..='\u{1f}' | '\u{7f}'..='\u{9f}'
        | '\u{61c}' | '\u{200e}' | '\u{200f}' | '\u{2028}' | '\u{2029}'
        | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// Should `c` be written `\uXXXX` in JSON? The unsafe characters serde_json leaves raw: it
/// escapes C0 itself (RFC 8259 §7 requires no more), so DEL, C1, the bidi controls and the line
/// separators would reach whoever `cat`s or `jq -r`s the file.
fn json_unsafe(c: char) -> bool {
    c >= '\u{7f}' && unsafe_char(c)
}

/// JSON text (serde_json's output) with every character of [`json_unsafe`] written as a
/// `\uXXXX` escape. Lossless and still valid JSON: these characters can only stand inside
/// strings (JSON's structure and whitespace are ASCII), where `\uXXXX` means the same character
/// to every reader; all of them are in the Basic Multilingual Plane, so one escape each.
pub fn json(text: String) -> String {
    if !text.chars().any(json_unsafe) {
        return text;
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if json_unsafe(c) {
            out.push_str(&format!("\\u{:04x}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

/// `text` with every control and bidi-override character shown as an escape; borrowed when
/// there is none (the common case costs one scan).
pub fn text(text: &str) -> Cow<'_, str> {
    if !text.chars().any(unsafe_char) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if !unsafe_char(c) {
            out.push(c);
            continue;
        }
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x80 => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
        }
    }
    Cow::Owned(out)
}

/// Bytes from the node shown as text: invalid UTF-8 lossily (U+FFFD), then [`text`].
pub fn bytes(bytes: &[u8]) -> String {
    text(&String::from_utf8_lossy(bytes)).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_controls_c1_and_bidi_and_keeps_the_rest() {
        assert_eq!(text("plain gpu 0 · ×3 °C\ttab"), "plain gpu 0 · ×3 °C\ttab");
        assert!(matches!(text("plain"), Cow::Borrowed(_)));
        assert_eq!(text("\x1b[31mred\x1b[0m"), "\\x1b[31mred\\x1b[0m");
        assert_eq!(text("\x1b]0;title\x07"), "\\x1b]0;title\\x07");
        assert_eq!(text("a\rb\nc"), "a\\rb\\nc");
        assert_eq!(text("\u{9b}31m"), "\\u{9b}31m");
        assert_eq!(text("\u{7f}\u{0}"), "\\x7f\\x00");
        assert_eq!(text("abc\u{202e}fed"), "abc\\u{202e}fed");
        assert_eq!(text("\u{2066}x\u{2069}"), "\\u{2066}x\\u{2069}");
        // Implicit marks and line separators (issue 30).
        assert_eq!(
            text("a\u{61c}\u{200e}\u{200f}b\u{2028}c\u{2029}"),
            "a\\u{61c}\\u{200e}\\u{200f}b\\u{2028}c\\u{2029}"
        );
        // Neighbours of the ranges stay: NBSP, ZWJ, U+2030, non-ASCII letters and scripts.
        assert_eq!(
            text("\u{a0}\u{200d}\u{2030}\u{61b}\u{2065}é مرحبا"),
            "\u{a0}\u{200d}\u{2030}\u{61b}\u{2065}é مرحبا"
        );
        // Escaping is idempotent: an escaped text has nothing left to escape.
        let once = text("\x1b]0;t\x07\u{9b}\u{202e}\u{2028}").into_owned();
        assert!(matches!(text(&once), Cow::Borrowed(_)));
        assert_eq!(bytes(b"host\x9b31m\xff"), "host\u{fffd}31m\u{fffd}");
    }

    #[test]
    fn json_escapes_what_serde_json_leaves_raw_and_stays_lossless() {
        let value = "e\x1b \u{7f}\u{85}\u{9b} \u{61c}\u{200e}\u{200f} \u{2028}\u{2029} \u{202a}\u{202e}\u{2066}\u{2069} é·×";
        let written =
            json(serde_json::to_string(&serde_json::json!({ "k\u{202e}": value })).unwrap());
        assert_eq!(
            written,
            r#"{"k\u202e":"e\u001b \u007f\u0085\u009b \u061c\u200e\u200f \u2028\u2029 \u202a\u202e\u2066\u2069 é·×"}"#
        );
        assert!(written.chars().all(|c| !unsafe_char(c)), "{written}");
        let back: serde_json::Value = serde_json::from_str(&written).unwrap();
        assert_eq!(back["k\u{202e}"], value);
        // Nothing to escape: the same text back.
        assert_eq!(json("{\"a\": \"é\"}".into()), "{\"a\": \"é\"}");
    }
}
