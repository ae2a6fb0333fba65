//! The page templates (minijinja, embedded with `include_str!` from
//! `crates/report/templates/`) and the small view models they are fed with.
//! Figures are formatted in Rust (`crate::fmt`) before they reach a template;
//! the templates hold the page structure only. The SVG charts are ours
//! (`crate::svg`) and enter the templates as safe strings (`|safe`).

use crate::svg::esc;
use minijinja::syntax::SyntaxConfig;
use minijinja::value::Serde;
use minijinja::{AutoEscape, Environment, Error, ErrorKind, Value};
use serde::Serialize;
use std::borrow::Cow;
use std::sync::OnceLock;

/// The templates by name; `.html` ones are escaped on output.
const TEMPLATES: [(&str, &str); 8] = [
    ("page.html", include_str!("../../templates/page.html")),
    ("widgets.html", include_str!("../../templates/widgets.html")),
    (
        "mail_run.html",
        include_str!("../../templates/mail_run.html"),
    ),
    (
        "mail_sweep.html",
        include_str!("../../templates/mail_sweep.html"),
    ),
    ("storage.html", include_str!("../../templates/storage.html")),
    ("other.html", include_str!("../../templates/other.html")),
    ("suite.html", include_str!("../../templates/suite.html")),
    (
        "mail_sections.html",
        include_str!("../../templates/mail_sections.html"),
    ),
];

fn env() -> &'static Result<Environment<'static>, String> {
    static ENV: OnceLock<Result<Environment<'static>, String>> = OnceLock::new();
    ENV.get_or_init(|| {
        let mut env = Environment::new();
        // The page ends with a line break, as an HTML file does.
        let syntax = SyntaxConfig::builder()
            .keep_trailing_newline(true)
            .build()
            .map_err(|e| format!("{e:#}"))?;
        env.set_syntax(syntax);
        // The report's own escaping (`svg::esc`: & < > " '), the same as
        // the SVG charts use; minijinja's default also escapes `/`.
        env.set_formatter(|out, state, value| {
            if *state.auto_escape() == AutoEscape::Html
                && !value.is_safe()
                && let Some(s) = value.as_str()
            {
                return out.write_str(&esc(s)).map_err(Error::from);
            }
            minijinja::escape_formatter(out, state, value)
        });
        env.add_global("version", env!("CARGO_PKG_VERSION"));
        for (name, source) in TEMPLATES {
            env.add_template(name, source)
                .map_err(|e| format!("{e:#}"))?;
        }
        Ok(env)
    })
}

/// Renders the template `name` with the view model `ctx`.
pub fn render(name: &str, ctx: &impl Serialize) -> Result<String, Error> {
    let env = (env().as_ref()).map_err(|e| Error::new(ErrorKind::InvalidOperation, e.clone()))?;
    env.get_template(name)?.render(Value::from(Serde(ctx)))
}

/// The result JSON for the page's inert `<script type="application/json">`
/// (`<` and `>` escaped so that no text in it can close the element).
pub fn page_data(raw: &serde_json::Value) -> String {
    serde_json::to_string(raw)
        .unwrap_or_default()
        .replace('<', "\\u003c")
        .replace('>', "\\u003e")
}

/// A table cell; `class` is "" (a number, right-aligned), "t" (text) or
/// "bad" (a figure that fails its criterion).
#[derive(Debug, Clone, Serialize)]
pub struct Cell {
    pub text: String,
    pub class: &'static str,
    /// A relative link the text leads to (another report beside this one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub href: Option<String>,
}

/// A text cell linking to `href` (relative to the page).
pub fn td_link(text: &str, href: &str) -> Cell {
    Cell {
        text: text.to_string(),
        class: "t",
        href: Some(href.to_string()),
    }
}

pub type Row = Vec<Cell>;

/// A number cell.
pub fn td(text: &str) -> Cell {
    Cell {
        text: text.to_string(),
        class: "",
        href: None,
    }
}

/// A text cell (left-aligned, wraps).
pub fn td_t(text: &str) -> Cell {
    Cell {
        text: text.to_string(),
        class: "t",
        href: None,
    }
}

/// A cell of the given class ("ok": a criterion met).
pub fn td_class(text: &str, class: &'static str) -> Cell {
    Cell {
        text: text.to_string(),
        class,
        href: None,
    }
}

/// A number cell marked bad when `bad`.
pub fn td_judged(text: &str, bad: bool) -> Cell {
    Cell {
        text: text.to_string(),
        class: if bad { "bad" } else { "" },
        href: None,
    }
}

#[derive(Debug, Serialize)]
pub struct Group {
    pub label: String,
    pub span: usize,
}

#[derive(Debug, Serialize)]
pub struct Head {
    pub text: String,
    /// Left-aligned: the first column and the columns of text cells.
    pub left: bool,
}

/// A table: `groups` is an optional header row of (label, colspan).
#[derive(Debug, Serialize)]
pub struct Table {
    pub id: String,
    pub groups: Vec<Group>,
    pub head: Vec<Head>,
    pub rows: Vec<Row>,
}

pub fn table(id: &str, groups: &[(&str, usize)], head: &[&str], rows: Vec<Row>) -> Table {
    let first = rows.first();
    Table {
        id: id.to_string(),
        groups: (groups.iter())
            .map(|(label, span)| Group {
                label: label.to_string(),
                span: *span,
            })
            .collect(),
        head: (head.iter().enumerate())
            .map(|(i, h)| Head {
                text: h.to_string(),
                left: i == 0 || first.and_then(|r| r.get(i)).is_some_and(|c| c.class == "t"),
            })
            .collect(),
        rows,
    }
}

/// A two-column key/value table.
#[derive(Debug, Serialize)]
pub struct Kv {
    pub id: &'static str,
    pub rows: Vec<(Cow<'static, str>, String)>,
}

pub fn kv(id: &'static str, rows: Vec<(&'static str, String)>) -> Kv {
    let rows = rows
        .into_iter()
        .map(|(k, v)| (Cow::Borrowed(k), v))
        .collect();
    Kv { id, rows }
}

/// What was tested (the `[disclosure]` rows, then the detected facts), when
/// the result holds it.
pub fn tested_configuration(h: &mailbench_results::RunHeader) -> Option<Kv> {
    let d = h.disclosure.as_ref()?;
    let rows = (d.rows().into_iter())
        .map(|(k, v)| (Cow::Owned(k), v))
        .collect();
    Some(Kv {
        id: "tested-configuration-table",
        rows,
    })
}

/// A figure tile; `class` says whether it is judged and how.
#[derive(Debug, Serialize)]
pub struct Tile {
    pub id: &'static str,
    pub key: &'static str,
    pub value: String,
    pub sub: String,
    pub class: &'static str,
}

/// A figure tile; `bad` None = not judged.
pub fn tile(
    id: &'static str,
    key: &'static str,
    value: impl Into<String>,
    sub: impl Into<String>,
    bad: Option<bool>,
) -> Tile {
    let class = match bad {
        Some(true) => "tile bad",
        Some(false) => "tile",
        None => "tile na",
    };
    Tile {
        id,
        key,
        value: value.into(),
        sub: sub.into(),
        class,
    }
}

/// A chart (our SVG) with its caption.
#[derive(Debug, Serialize)]
pub struct Figure {
    pub svg: String,
    pub caption: String,
}

pub fn figure(svg: String, caption: &str) -> Figure {
    Figure {
        svg,
        caption: caption.to_string(),
    }
}

/// One line of the identity block; `wide` spans the whole row.
#[derive(Debug, Serialize)]
pub struct Ident {
    pub k: &'static str,
    pub v: String,
    pub wide: bool,
}

pub fn identity(items: Vec<(&'static str, String)>) -> Vec<Ident> {
    (items.into_iter())
        .map(|(k, v)| Ident {
            k,
            wide: v.chars().count() > 40,
            v,
        })
        .collect()
}

/// The verdict banner.
#[derive(Debug, Serialize)]
pub struct VerdictView {
    pub class: &'static str,
    pub label: &'static str,
    pub what: String,
    pub reasons: Vec<String>,
}

pub fn verdict_view(v: &mailbench_results::Verdict, what: &str) -> VerdictView {
    use mailbench_results::Status;
    let (class, label) = match v.status {
        Status::Pass => ("pass", "PASS"),
        Status::Fail => ("fail", "FAIL"),
        Status::Interrupted => ("interrupted", "INTERRUPTED"),
        Status::Error => ("error", "ERROR"),
    };
    VerdictView {
        class,
        label,
        what: what.to_string(),
        reasons: v.reasons.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::html::mail_sections::{ServerView, SteadyServer};

    #[test]
    fn tables_are_drawn_and_text_is_escaped_as_the_svg_charts_are() {
        let t = table(
            "t<1>",
            &[("g/h", 2)],
            &["a", "b"],
            vec![
                vec![td("1 & 2"), td_t("it's \"/x\"")],
                vec![td_judged("3", true), td("4")],
            ],
        );
        let ctx = SteadyServer {
            steady: None,
            server: Some(ServerView {
                from: "1".into(),
                to: "2".into(),
                table: t,
                per_mailbox: Some(kv("kv", vec![("k", "v</td>".into())])),
            }),
        };
        let html = render("mail_sections.html", &ctx).unwrap_or_else(|e| format!("{e:#}"));
        assert_eq!(
            html,
            concat!(
                r#"<h2 id="server">Server Host</h2><p class="note">The server host's own counters, 1–2 s of the run.</p>"#,
                r#"<div class="tablewrap"><table id="t&lt;1&gt;"><thead><tr class="group"><th colspan="2">g/h</th></tr>"#,
                r#"<tr><th class="t">a</th><th class="t">b</th></tr></thead><tbody>"#,
                r#"<tr><td>1 &amp; 2</td><td class="t">it&#39;s &quot;/x&quot;</td></tr>"#,
                r#"<tr><td class="bad">3</td><td>4</td></tr></tbody></table></div>"#,
                r#"<div class="tablewrap"><table class="kv" id="kv"><tbody><tr><td>k</td><td>v&lt;/td&gt;</td></tr></tbody></table></div>"#,
            )
        );
        assert_eq!(
            render("mail_sections.html", &SteadyServer::default())
                .ok()
                .as_deref(),
            Some("")
        );
    }
}
