//! A JSON writer, field by field: the reports need no more than this (no serde).

use std::fmt::Write as _;

/// A JSON object, written one field at a time in the order the calls come.
#[derive(Debug, Default)]
pub struct JsonObject {
    body: String,
}

impl JsonObject {
    pub fn new() -> JsonObject {
        JsonObject::default()
    }

    pub fn raw(&mut self, key: &str, json: &str) -> &mut Self {
        if !self.body.is_empty() {
            self.body.push(',');
        }
        self.body.push_str(&json_string(key));
        self.body.push(':');
        self.body.push_str(json);
        self
    }

    pub fn str(&mut self, key: &str, value: &str) -> &mut Self {
        self.raw(key, &json_string(value))
    }

    /// A string, or `null` when there is none (an error that did not happen).
    pub fn str_or_null(&mut self, key: &str, value: Option<&str>) -> &mut Self {
        match value {
            Some(value) => self.str(key, value),
            None => self.raw(key, "null"),
        }
    }

    pub fn num(&mut self, key: &str, value: u64) -> &mut Self {
        self.raw(key, &value.to_string())
    }

    pub fn float(&mut self, key: &str, value: f64) -> &mut Self {
        self.raw(key, &format!("{value:.6}"))
    }

    pub fn bool(&mut self, key: &str, value: bool) -> &mut Self {
        self.raw(key, if value { "true" } else { "false" })
    }

    pub fn finish(&self) -> String {
        format!("{{{}}}", self.body)
    }
}

/// `[a,b]` of items already written as JSON.
pub fn json_array(items: &[String]) -> String {
    format!("[{}]", items.join(","))
}

/// A JSON string literal, quoted and escaped.
pub fn json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_strings_are_escaped() {
        assert_eq!(json_string("a\"b\\c\n\u{1}"), r#""a\"b\\c\n\u0001""#);
    }
}
