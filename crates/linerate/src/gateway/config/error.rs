//! One configuration error, `FILE:LINE: KEY: message`, and how a byte offset or a
//! serde error from the toml crate becomes one.

use std::fmt;
use std::ops::Range;
use toml::Spanned;
use toml::de::DeValue;

/// One thing wrong with a configuration file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    /// The file as it was named on the command line.
    pub file: String,
    /// 1-based; `None` when the error is not about a place in the file (it cannot be
    /// read at all).
    pub line: Option<usize>,
    /// The dotted path as an operator writes it: `port[1].addresses[0]`; empty for an
    /// error about the whole file.
    pub key: String,
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:", self.file)?;
        if let Some(line) = self.line {
            write!(f, "{line}:")?;
        }
        if !self.key.is_empty() {
            write!(f, " {}:", self.key)?;
        }
        write!(f, " {}", self.message)
    }
}

/// Every error found in one file, in file order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigErrors(pub Vec<ConfigError>);

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigErrors {}

/// Collects errors against one file's text; byte offsets become line numbers.
pub(crate) struct Sink<'t> {
    file: String,
    text: &'t str,
    errors: Vec<ConfigError>,
}

impl<'t> Sink<'t> {
    pub(crate) fn new(file: String, text: &'t str) -> Self {
        Sink {
            file,
            text,
            errors: Vec::new(),
        }
    }

    /// The 1-based line of byte `offset`.
    fn line_of(&self, offset: usize) -> usize {
        let end = offset.min(self.text.len());
        1 + self.text.as_bytes()[..end]
            .iter()
            .filter(|&&b| b == b'\n')
            .count()
    }

    /// An error at the line where `span` starts.
    pub(crate) fn at(
        &mut self,
        span: Range<usize>,
        key: impl Into<String>,
        message: impl Into<String>,
    ) {
        let line = Some(self.line_of(span.start));
        self.errors.push(ConfigError {
            file: self.file.clone(),
            line,
            key: key.into(),
            message: message.into(),
        });
    }

    /// A toml syntax error: one error at the line the parser reports.
    pub(crate) fn syntax(&mut self, e: &toml::de::Error) {
        let span = e.span().unwrap_or(0..0);
        self.at(span, "", format!("TOML syntax: {}", e.message().trim_end()));
    }

    /// A serde error from deserializing `item` (the value at `path`): the key it is
    /// about is found from the error's span, the message reworded for an operator.
    /// `allowed` lists the item's keys, for an unknown one (items hold no tables).
    pub(crate) fn serde(
        &mut self,
        e: &toml::de::Error,
        item: &Spanned<DeValue<'_>>,
        path: &str,
        allowed: &[&str],
    ) {
        let span = e.span().unwrap_or_else(|| item.span());
        let mut key = path.to_string();
        locate(item, &span, &mut key);
        let msg = e.message();
        let message = if msg.starts_with("unknown field `") {
            unknown_key(allowed)
        } else if msg.starts_with("missing field `") {
            // Reported already, with every other missing key (raw::Keys).
            return;
        } else if let Some(rest) = msg.strip_prefix("invalid type: ") {
            match rest.rsplit_once(", expected ") {
                // An integer wider than 64 bits comes as an i128 of the wrong type.
                Some((found, _)) if found.starts_with("integer `") => {
                    let n = found.split('`').nth(1).unwrap_or(found);
                    format!("{n} is too large")
                }
                Some((found, expected)) => {
                    format!("expected {}, found {}", expected_word(expected), found)
                }
                None => msg.to_string(),
            }
        } else {
            msg.to_string()
        };
        self.at(span, key, message);
    }

    /// The errors in file order (by line; those on one line in the order found).
    pub(crate) fn finish(mut self) -> Vec<ConfigError> {
        self.errors.sort_by_key(|e| e.line);
        self.errors
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.errors.is_empty()
    }
}

/// The message for a required key that is not there.
pub(crate) const MISSING: &str = "missing (this key is required)";

/// The message for a key the table does not have.
pub(crate) fn unknown_key(allowed: &[&str]) -> String {
    format!("unknown key (allowed: {})", allowed.join(", "))
}

/// `path.name`, or `name` at the top.
pub(crate) fn join(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_string()
    } else {
        format!("{path}.{name}")
    }
}

/// Extends `path` down to the innermost key or array element whose span holds `span`.
fn locate(value: &Spanned<DeValue<'_>>, span: &Range<usize>, path: &mut String) {
    let inside = |r: Range<usize>| r.start <= span.start && span.end <= r.end;
    match value.get_ref() {
        DeValue::Table(t) => {
            for (k, v) in t.iter() {
                if inside(k.span()) {
                    *path = join(path, k.get_ref());
                    return;
                }
                if inside(v.span()) {
                    *path = join(path, k.get_ref());
                    return locate(v, span, path);
                }
            }
        }
        DeValue::Array(a) => {
            for (i, v) in a.iter().enumerate() {
                if inside(v.span()) {
                    path.push_str(&format!("[{i}]"));
                    return locate(v, span, path);
                }
            }
        }
        _ => {}
    }
}

/// serde's name for what it expected, in the file's own words.
fn expected_word(expected: &str) -> &str {
    match expected {
        "i64" | "u64" | "i32" | "u32" | "u16" | "u8" | "usize" => "an integer",
        "a boolean" => "true or false",
        "a sequence" => "an array",
        "a string" => "a string",
        e if e.starts_with("struct ") || e == "a map" => "a table",
        e => e,
    }
}
