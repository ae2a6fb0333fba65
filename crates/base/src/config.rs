//! The TOML config file (`--config FILE.toml`). One file may hold the settings of
//! several commands, each in its own section; every flag has a key of the same name
//! (with `_` for `-`) in its command's section, and flags override the file.
//!
//! ```toml
//! output = "./mailbench-results"   # common keys at the top
//! [storage]                         # storage init|run|backup|recover|verify
//! [storage.profile]                 # profile value overrides
//! [storage.thresholds]              # verdict thresholds
//! [plan]                            # mailbench plan
//! [mail]                            # mail setup|run
//! ```

use crate::error::{Error, Result};
use serde::de::DeserializeOwned;
use std::path::{Path, PathBuf};

/// The top level of a config file. Unknown sections are refused by name.
#[derive(Debug, Default, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigFile {
    /// Results folder (`--output`).
    pub output: Option<PathBuf>,
    pub storage: Option<toml::Table>,
    pub plan: Option<toml::Table>,
    pub mail: Option<toml::Table>,
    pub report: Option<toml::Table>,
    pub suite: Option<toml::Table>,
    pub disclosure: Option<toml::Table>,
    #[serde(skip)]
    pub path: Option<PathBuf>,
}

impl ConfigFile {
    /// Reads and parses `path`; errors name the file and the line.
    pub fn load(path: &Path) -> Result<ConfigFile> {
        let text = crate::limits::read_text_capped(
            path,
            crate::limits::MAX_CONFIG_FILE_BYTES,
            "config file",
        )?;
        Self::parse(&text, path)
    }

    pub fn parse(text: &str, path: &Path) -> Result<ConfigFile> {
        let mut cfg: ConfigFile = toml::from_str(text).map_err(|e| {
            Error::usage(format!(
                "config file {}: {}",
                path.display(),
                e.message_with_span(text)
            ))
        })?;
        cfg.path = Some(path.to_path_buf());
        Ok(cfg)
    }

    /// Loads `path` when given, else an empty config.
    pub fn load_optional(path: Option<&Path>) -> Result<ConfigFile> {
        match path {
            Some(p) => Self::load(p),
            None => Ok(ConfigFile::default()),
        }
    }

    /// Deserializes one section (`[storage]`, `[plan]`, ...) into `T`, which should
    /// use `#[serde(deny_unknown_fields)]` so that unknown keys are refused by name.
    pub fn section<T: DeserializeOwned + Default>(&self, name: &str) -> Result<T> {
        let table = match name {
            "storage" => &self.storage,
            "plan" => &self.plan,
            "mail" => &self.mail,
            "report" => &self.report,
            "suite" => &self.suite,
            "disclosure" => &self.disclosure,
            _ => return Err(Error::usage(format!("no config section [{name}]"))),
        };
        let Some(table) = table else {
            return Ok(T::default());
        };
        let file = self
            .path
            .as_ref()
            .map(|p| p.display().to_string())
            .unwrap_or_else(|| "config".into());
        // Read back from text, so that an error names the line of its key
        // (a value's error alone does not say which key it is).
        let text = toml::to_string(table)
            .map_err(|e| Error::usage(format!("config file {file}, section [{name}]: {e}")))?;
        toml::from_str::<T>(&text).map_err(|e| {
            Error::usage(format!(
                "config file {file}, section [{name}]: {}",
                toml_error(&e, &text)
            ))
        })
    }
}

trait MessageWithSpan {
    fn message_with_span(&self, text: &str) -> String;
}

/// A TOML error of `text` as a usage message: the line, the line itself (so
/// the key is named) and what is wrong.
pub fn toml_error(e: &toml::de::Error, text: &str) -> String {
    match e.span() {
        Some(span) => {
            let start = span.start.min(text.len());
            let line_no = text[..start].matches('\n').count() + 1;
            let line = text.lines().nth(line_no - 1).unwrap_or("").trim();
            let shown: String = line.chars().take(80).collect();
            format!("line {line_no} (`{shown}`): {}", e.message())
        }
        None => e.message().to_string(),
    }
}

impl MessageWithSpan for toml::de::Error {
    fn message_with_span(&self, text: &str) -> String {
        match self.span() {
            Some(span) => {
                let line = text[..span.start.min(text.len())].matches('\n').count() + 1;
                format!("line {line}: {}", self.message())
            }
            None => self.message().to_string(),
        }
    }
}

/// The keys a section type accepts (one with `deny_unknown_fields`), taken
/// from serde's own error for an unknown key ("expected one of `a`, `b`"):
/// the single list tests compare the flags, the docs and the fuzzers with.
/// Empty for a type that accepts any key.
pub fn accepted_keys<T: DeserializeOwned>() -> Vec<String> {
    let Err(e) = serde_json::from_str::<T>(r#"{"zz_not_a_key": 1}"#) else {
        return Vec::new();
    };
    let e = e.to_string();
    let Some(list) = e.split("expected one of").nth(1) else {
        return Vec::new();
    };
    list.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

/// Defines an options struct, every field an `Option`, written once with its
/// derives and attributes (serde keys, clap flags, doc lines as help), and
/// adds what every such struct needs from the same field list:
/// `overlay(&mut self, top)` (each field `top` gives replaces `self`'s: flags
/// over the file, a host's values over the section's) and `given(&self)` (the
/// names of the fields set, in declaration order).
#[macro_export]
macro_rules! options_struct {
    ($(#[$meta:meta])* pub struct $name:ident {
        $($(#[$fmeta:meta])* pub $field:ident: $ty:ty,)*
    }) => {
        $(#[$meta])*
        pub struct $name {
            $($(#[$fmeta])* pub $field: $ty,)*
        }

        impl $name {
            /// `self` with every field `top` gives replaced by `top`'s.
            pub fn overlay(&mut self, top: $name) {
                $(if top.$field.is_some() {
                    self.$field = top.$field;
                })*
            }

            /// The names of the fields that are set.
            pub fn given(&self) -> Vec<&'static str> {
                let mut names = Vec::new();
                $(if self.$field.is_some() {
                    names.push(stringify!($field));
                })*
                names
            }
        }
    };
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_keys_of_a_section_come_from_its_type() {
        assert_eq!(
            super::accepted_keys::<super::ConfigFile>(),
            [
                "output",
                "storage",
                "plan",
                "mail",
                "report",
                "suite",
                "disclosure"
            ]
        );
        assert!(super::accepted_keys::<toml::Table>().is_empty());
    }

    use super::*;

    #[derive(Debug, Default, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Demo {
        threads: Option<u32>,
    }

    crate::options_struct! {
        #[derive(Debug, Default, PartialEq)]
        pub struct Layered {
            pub a: Option<u32>,
            pub b: Option<String>,
            pub c: Option<Vec<u8>>,
        }
    }

    #[test]
    fn an_overlay_replaces_only_the_given_fields() {
        let mut base = Layered {
            a: Some(1),
            b: Some("file".into()),
            c: None,
        };
        base.overlay(Layered {
            b: Some("flag".into()),
            c: Some(vec![7]),
            ..Default::default()
        });
        assert_eq!(
            base,
            Layered {
                a: Some(1),
                b: Some("flag".into()),
                c: Some(vec![7]),
            }
        );
        assert_eq!(base.given(), ["a", "b", "c"]);
        assert!(Layered::default().given().is_empty());
    }

    #[test]
    fn sections_parse_and_unknown_keys_are_named() {
        let cfg = ConfigFile::parse("[storage]\nthreads = 4\n", Path::new("a.toml")).unwrap();
        let d: Demo = cfg.section("storage").unwrap();
        assert_eq!(d.threads, Some(4));

        let cfg = ConfigFile::parse("[storage]\nthredas = 4\n", Path::new("a.toml")).unwrap();
        let err = cfg.section::<Demo>("storage").unwrap_err().to_string();
        assert!(err.contains("thredas"), "{err}");
        assert!(err.contains("a.toml"), "{err}");

        let err = ConfigFile::parse("[strage]\n", Path::new("b.toml"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("strage") && err.contains("b.toml"), "{err}");

        let err = ConfigFile::parse("[storage\n", Path::new("c.toml")).unwrap_err();
        assert_eq!(err.exit_status().code(), 2);
        assert!(err.to_string().contains("line 1"), "{err}");
    }
}
