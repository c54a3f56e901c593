//! YAML (and JSON, which is YAML too) from files an untrusted node or archive supplies: CDI
//! specs, the kubelet's config. libyaml has no bound on two things a hostile file can use to
//! hang or exhaust the run, so both are measured before parsing (found by
//! tests/parser_properties.rs).

use crate::answers::ParseError;

/// Deepest `[`/`{` (flow) nesting a file may have. libyaml keeps a possible simple key per flow
/// level and revisits them on every token, so its time grows with depth times length: 100 000
/// levels took 36 s (found by tests/parser_properties.rs); serde_yaml_ng refuses more than 128
/// levels, but only after that scan. A real spec or config nests a handful of levels.
pub const MAX_FLOW_DEPTH: usize = 128;

/// Most alias uses (`*name`) times spec bytes. serde_yaml_ng bounds nested alias bombs, but every
/// alias copies its anchor again: 50 000 aliases of a 10 000-item list (440 KB of text) expand to
/// 500 million values and exhaust memory. The budget allows ~800 aliases in a 20 KB spec (
/// `nvidia-ctk` writes none) and bounds the expansion to a few times this many bytes.
pub const ALIAS_BUDGET: usize = 16 << 20;

/// `text` parsed as YAML after the depth and alias guards; `what` names the expected document
/// in errors ("cdi spec"). Errors carry the line where libyaml gives one.
pub fn parse_guarded(text: &str, what: &str) -> Result<serde_yaml_ng::Value, ParseError> {
    let shape = scan(text);
    if let Some(line) = shape.too_deep_at {
        return Err(ParseError::new(format!(
            "line {line}: more than {MAX_FLOW_DEPTH} nested `[`/`{{`; not a {what}"
        )));
    }
    if shape.aliases.saturating_mul(text.len()) > ALIAS_BUDGET {
        return Err(ParseError::new(format!(
            "{} yaml aliases in {} bytes would expand past {} bytes; not a {what}",
            shape.aliases,
            text.len(),
            ALIAS_BUDGET
        )));
    }
    serde_yaml_ng::from_str(text).map_err(|e| match e.location() {
        Some(at) => ParseError::new(format!("line {}, column {}: {e}", at.line(), at.column())),
        None => ParseError::new(e.to_string()),
    })
}

/// What [`scan`] saw before any YAML parsing.
struct Shape {
    /// The line where `[`/`{` nesting first exceeds [`MAX_FLOW_DEPTH`].
    too_deep_at: Option<usize>,
    /// Alias uses (`*name`).
    aliases: usize,
}

/// One pass over the text outside quoted scalars and comments: flow nesting depth and alias
/// uses. A quote or `*` starts something only where YAML allows a scalar to start (after a space,
/// `[`, `{`, `,`, `:`, `-`, `?`, or at the start of a line), so a `"` in the middle of a plain
/// scalar cannot hide brackets from this scan that libyaml would still see.
fn scan(text: &str) -> Shape {
    #[derive(PartialEq)]
    enum In {
        Plain,
        Double,
        Single,
        Comment,
    }
    let mut state = In::Plain;
    let mut shape = Shape {
        too_deep_at: None,
        aliases: 0,
    };
    let mut depth = 0usize;
    let mut line = 1usize;
    let mut prev = b'\n';
    let mut bytes = text.bytes().peekable();
    while let Some(b) = bytes.next() {
        if b == b'\n' {
            line += 1;
        }
        let at_start = matches!(
            prev,
            b' ' | b'\t' | b'\n' | b'\r' | b'[' | b'{' | b',' | b':' | b'-' | b'?'
        );
        match state {
            In::Plain => match b {
                b'[' | b'{' => {
                    depth += 1;
                    if depth > MAX_FLOW_DEPTH {
                        shape.too_deep_at = Some(line);
                        return shape;
                    }
                }
                b']' | b'}' => depth = depth.saturating_sub(1),
                b'#' if prev.is_ascii_whitespace() => state = In::Comment,
                b'"' if at_start => state = In::Double,
                b'\'' if at_start => state = In::Single,
                b'*' if at_start => shape.aliases += 1,
                _ => {}
            },
            In::Double => match b {
                b'\\' => {
                    bytes.next();
                }
                b'"' => state = In::Plain,
                _ => {}
            },
            In::Single => {
                if b == b'\'' {
                    if bytes.peek() == Some(&b'\'') {
                        bytes.next();
                    } else {
                        state = In::Plain;
                    }
                }
            }
            In::Comment => {
                if b == b'\n' {
                    state = In::Plain;
                }
            }
        }
        prev = b;
    }
    shape
}
