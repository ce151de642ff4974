//! The command-line grammar nc, tee and pv are built on: glibc's `getopt_long` (short
//! flags clustered, `-w5` and `-w 5`, `--name=value` and `--name value`, unambiguous
//! prefixes of long names, operands anywhere unless `POSIXLY_CORRECT` is set or `--`
//! ends the options). Small enough to own; clap's rules and messages are not those tools'.

use std::ffi::OsString;

/// One option a tool takes.
#[derive(Debug, Clone, Copy)]
pub struct Spec {
    /// Its short letter, if any.
    pub short: Option<char>,
    /// Its long name, if any.
    pub long: Option<&'static str>,
    pub arg: Arg,
    /// The key the tool's parser matches on (its short letter, or a word for long-only).
    pub key: &'static str,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arg {
    None,
    Required,
    /// `--name[=VALUE]` only (GNU's optional_argument).
    Optional,
}

/// What the command line holds, in order.
#[derive(Debug, PartialEq, Eq)]
pub enum Item {
    Opt {
        key: &'static str,
        value: Option<String>,
    },
    Operand(String),
}

/// Why a command line does not parse, in the words glibc's getopt prints
/// (`invalid option -- 'x'`).
#[derive(Debug, PartialEq, Eq)]
pub enum Error {
    Unknown(String),
    MissingValue(String),
    UnexpectedValue(String),
    Ambiguous(String),
    NotUtf8,
}

impl Error {
    /// The line after `PROG: ` as glibc says it.
    pub fn glibc_words(&self) -> String {
        match self {
            Error::Unknown(o) if o.starts_with("--") => format!("unrecognized option '{o}'"),
            Error::Unknown(o) => format!("invalid option -- '{}'", o.trim_start_matches('-')),
            Error::MissingValue(o) if o.starts_with("--") => {
                format!("option '{o}' requires an argument")
            }
            Error::MissingValue(o) => {
                format!(
                    "option requires an argument -- '{}'",
                    o.trim_start_matches('-')
                )
            }
            Error::UnexpectedValue(o) => format!("option '{o}' doesn't allow an argument"),
            Error::Ambiguous(o) => format!("option '{o}' is ambiguous"),
            Error::NotUtf8 => "an argument is not valid UTF-8".to_string(),
        }
    }
}

/// Parses `args` (without the program name) against `specs`.
pub fn parse(args: &[OsString], specs: &[Spec]) -> Result<Vec<Item>, Error> {
    let permute = std::env::var_os("POSIXLY_CORRECT").is_none();
    let mut items = Vec::new();
    let mut args = args.iter();
    let mut operands_only = false;
    while let Some(arg) = args.next() {
        let arg = arg.to_str().ok_or(Error::NotUtf8)?;
        if operands_only || arg == "-" || !arg.starts_with('-') {
            items.push(Item::Operand(arg.to_string()));
            if !permute {
                operands_only = true;
            }
            continue;
        }
        if arg == "--" {
            operands_only = true;
            continue;
        }
        if let Some(long) = arg.strip_prefix("--") {
            let (name, inline) = match long.split_once('=') {
                Some((n, v)) => (n, Some(v.to_string())),
                None => (long, None),
            };
            let spec = find_long(specs, name).map_err(|e| match e {
                LongMiss::Unknown => Error::Unknown(format!("--{name}")),
                LongMiss::Ambiguous => Error::Ambiguous(format!("--{name}")),
            })?;
            let shown = format!("--{}", spec.long.unwrap_or(name));
            let value = match (spec.arg, inline) {
                (Arg::None, Some(_)) => return Err(Error::UnexpectedValue(shown)),
                (Arg::None, None) | (Arg::Optional, None) => None,
                (_, Some(v)) => Some(v),
                (Arg::Required, None) => Some(
                    args.next()
                        .ok_or_else(|| Error::MissingValue(shown.clone()))?
                        .to_str()
                        .ok_or(Error::NotUtf8)?
                        .to_string(),
                ),
            };
            items.push(Item::Opt {
                key: spec.key,
                value,
            });
            continue;
        }
        // A cluster of short flags: the first that takes a value takes the rest of the
        // word, or the next word.
        let letters: Vec<char> = arg[1..].chars().collect();
        let mut i = 0;
        while i < letters.len() {
            let letter = letters[i];
            let spec = specs
                .iter()
                .find(|s| s.short == Some(letter))
                .ok_or_else(|| Error::Unknown(format!("-{letter}")))?;
            if spec.arg == Arg::Required {
                let rest: String = letters[i + 1..].iter().collect();
                let value = if !rest.is_empty() {
                    rest
                } else {
                    args.next()
                        .ok_or_else(|| Error::MissingValue(format!("-{letter}")))?
                        .to_str()
                        .ok_or(Error::NotUtf8)?
                        .to_string()
                };
                items.push(Item::Opt {
                    key: spec.key,
                    value: Some(value),
                });
                break;
            }
            items.push(Item::Opt {
                key: spec.key,
                value: None,
            });
            i += 1;
        }
    }
    Ok(items)
}

enum LongMiss {
    Unknown,
    Ambiguous,
}

/// An exact long name, or the one long name `name` is a prefix of.
fn find_long<'a>(specs: &'a [Spec], name: &str) -> Result<&'a Spec, LongMiss> {
    if let Some(spec) = specs.iter().find(|s| s.long == Some(name)) {
        return Ok(spec);
    }
    let mut matches = specs.iter().filter(|s| {
        s.long
            .is_some_and(|l| !name.is_empty() && l.starts_with(name))
    });
    match (matches.next(), matches.next()) {
        (Some(spec), None) => Ok(spec),
        (Some(_), Some(_)) => Err(LongMiss::Ambiguous),
        _ => Err(LongMiss::Unknown),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SPECS: &[Spec] = &[
        Spec {
            short: Some('l'),
            long: None,
            arg: Arg::None,
            key: "l",
        },
        Spec {
            short: Some('w'),
            long: Some("wait"),
            arg: Arg::Required,
            key: "w",
        },
        Spec {
            short: Some('p'),
            long: Some("output-error"),
            arg: Arg::Optional,
            key: "p",
        },
        Spec {
            short: None,
            long: Some("output-buffer"),
            arg: Arg::None,
            key: "ob",
        },
    ];

    fn args(words: &[&str]) -> Vec<OsString> {
        words.iter().map(OsString::from).collect()
    }

    fn opt(key: &'static str, value: Option<&str>) -> Item {
        Item::Opt {
            key,
            value: value.map(str::to_string),
        }
    }

    #[test]
    fn clusters_attached_values_and_operands_anywhere() {
        let items = parse(&args(&["-lw5", "host", "-w", "7", "--", "-l"]), SPECS).unwrap();
        assert_eq!(
            items,
            vec![
                opt("l", None),
                opt("w", Some("5")),
                Item::Operand("host".into()),
                opt("w", Some("7")),
                Item::Operand("-l".into()),
            ]
        );
    }

    #[test]
    fn long_names_prefixes_and_optional_values() {
        let items = parse(
            &args(&["--output-error", "--output-e=warn", "--wa=3"]),
            SPECS,
        );
        assert_eq!(
            items.unwrap(),
            vec![opt("p", None), opt("p", Some("warn")), opt("w", Some("3"))]
        );
        assert_eq!(
            parse(&args(&["--output"]), SPECS),
            Err(Error::Ambiguous("--output".into()))
        );
    }

    #[test]
    fn errors_in_glibcs_words() {
        let e = parse(&args(&["-x"]), SPECS).unwrap_err();
        assert_eq!(e.glibc_words(), "invalid option -- 'x'");
        let e = parse(&args(&["-w"]), SPECS).unwrap_err();
        assert_eq!(e.glibc_words(), "option requires an argument -- 'w'");
        let e = parse(&args(&["--bogus"]), SPECS).unwrap_err();
        assert_eq!(e.glibc_words(), "unrecognized option '--bogus'");
        let e = parse(&args(&["--output-buffer=1"]), SPECS).unwrap_err();
        assert_eq!(
            e.glibc_words(),
            "option '--output-buffer' doesn't allow an argument"
        );
    }
}
