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
//!   gpudoctor's;
//! - every other invisible character: the format characters of Unicode category Cf (zero-width
//!   space, joiners, word joiner, BOM, soft hyphen, the Mongolian vowel separator, invisible
//!   operators, interlinear annotation marks, tags; `DerivedGeneralCategory.txt`) and the rest of
//!   the `Default_Ignorable_Code_Point`s (`DerivedCoreProperties.txt`: the combining grapheme
//!   joiner, the Hangul fillers, variation selectors): a host name `gpu\u{200b}01` looks like
//!   `gpu01` and is not, so a suspect or a verdict could be pinned on the wrong node.
//!
//! Invalid UTF-8 never reaches here as such: readers decode lossily (U+FFFD) or refuse the file
//! as not text. JSON keeps its own escaping: [`json`] adds `\uXXXX` for the characters above
//! that serde_json writes raw (it escapes only C0). Prometheus label values use [`text`], then
//! the exposition format's escaping.

use std::borrow::Cow;

/// Should `c` be shown escaped?
fn unsafe_char(c: char) -> bool {
    // Printable ASCII and tab, nearly every character: answered before the tables (issue 41).
    if matches!(c, ' '..='~' | '\t') {
        return false;
    }
    matches!(c,
        '\u{0}'..='\u{8}' | '\u{a}'..='\u{1f}' | '\u{7f}'..='\u{9f}'
        | '\u{61c}' | '\u{200e}' | '\u{200f}' | '\u{2028}' | '\u{2029}'
        | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
        || invisible(c)
}

/// Unicode's invisible characters: general category Cf (Unicode 15.1,
/// `extracted/DerivedGeneralCategory.txt`) and the other `Default_Ignorable_Code_Point`s
/// (`DerivedCoreProperties.txt`), which render as nothing (or as a blank filler) and so make
/// two different strings look alike. The bidi controls among them are listed above too.
fn invisible(c: char) -> bool {
    matches!(c,
        // Cf (and U+2065 inside U+2060–U+206F: reserved, default-ignorable)
        '\u{ad}' | '\u{600}'..='\u{605}' | '\u{6dd}' | '\u{70f}' | '\u{890}'..='\u{891}'
        | '\u{8e2}' | '\u{180e}' | '\u{200b}'..='\u{200f}' | '\u{2060}'..='\u{206f}'
        | '\u{feff}' | '\u{fff9}'..='\u{fffb}' | '\u{110bd}'
        | '\u{110cd}' | '\u{13430}'..='\u{1343f}' | '\u{1bca0}'..='\u{1bca3}'
        | '\u{1d173}'..='\u{1d17a}' | '\u{e0001}' | '\u{e0020}'..='\u{e007f}'
        // Default_Ignorable_Code_Point beyond Cf: combining grapheme joiner, Hangul fillers,
        // Khmer inherent vowels, Mongolian free variation selectors, variation selectors,
        // the reserved U+FFF0–U+FFF8 and U+E0000–U+E0FFF (variation selectors supplement).
        | '\u{34f}' | '\u{115f}'..='\u{1160}' | '\u{17b4}'..='\u{17b5}'
        | '\u{180b}'..='\u{180f}' | '\u{3164}' | '\u{fe00}'..='\u{fe0f}' | '\u{ffa0}'
        | '\u{fff0}'..='\u{fff8}' | '\u{e0000}'..='\u{e0fff}')
}

/// Should `c` be written `\uXXXX` in JSON? The unsafe characters serde_json leaves raw: it
/// escapes C0 itself (RFC 8259 §7 requires no more), so DEL, C1, the bidi controls, the line
/// separators and the invisible characters would reach whoever `cat`s or `jq -r`s the file.
fn json_unsafe(c: char) -> bool {
    c >= '\u{7f}' && unsafe_char(c)
}

/// JSON text (serde_json's output) with every character of [`json_unsafe`] written as a
/// `\uXXXX` escape. Lossless and still valid JSON: these characters can only stand inside
/// strings (JSON's structure and whitespace are ASCII), where `\uXXXX` means the same character
/// to every reader; one beyond the Basic Multilingual Plane (a tag character, U+E0001) is
/// written as its UTF-16 surrogate pair, `\udb40\udc01` (RFC 8259 §7).
pub fn json(text: String) -> String {
    if !text.chars().any(json_unsafe) {
        return text;
    }
    let mut out = String::with_capacity(text.len() + 16);
    let mut units = [0u16; 2];
    for c in text.chars() {
        if json_unsafe(c) {
            for unit in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{:04x}", *unit));
            }
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
        // Invisible characters (issue 41): zero-width space, joiners, word joiner, BOM, soft
        // hyphen, Mongolian vowel separator, a variation selector, a tag character.
        assert_eq!(
            text("gpu\u{200b}0\u{200c}1\u{200d}\u{2060}\u{feff}\u{ad}\u{180e}\u{fe0f}\u{e0041}"),
            "gpu\\u{200b}0\\u{200c}1\\u{200d}\\u{2060}\\u{feff}\\u{ad}\\u{180e}\\u{fe0f}\\u{e0041}"
        );
        // Neighbours of the ranges stay: NBSP, U+2030, U+205F (a visible space), U+FFFD,
        // non-ASCII letters and scripts, an emoji.
        assert_eq!(
            text("\u{a0}\u{2030}\u{61b}\u{205f}\u{fffd}é مرحبا 🚀"),
            "\u{a0}\u{2030}\u{61b}\u{205f}\u{fffd}é مرحبا 🚀"
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
        // Invisible characters too, one beyond the BMP as its surrogate pair.
        let value = "gpu\u{200b}01\u{feff}\u{e0001}";
        let written = json(serde_json::to_string(&value).unwrap());
        assert_eq!(written, r#""gpu\u200b01\ufeff\udb40\udc01""#);
        assert_eq!(serde_json::from_str::<String>(&written).unwrap(), value);
        // Nothing to escape: the same text back.
        assert_eq!(json("{\"a\": \"é\"}".into()), "{\"a\": \"é\"}");
    }
}
