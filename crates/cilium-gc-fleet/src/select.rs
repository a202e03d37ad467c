//! Which kubeconfig contexts a fleet run covers: `--context` repeated (a
//! name, or a glob such as `prod-*`), `--all-contexts`, `--context-regex`.
//! Pure: the kubeconfig's context names come in, the selection goes out.

use regex::Regex;

/// What the flags ask for.
#[derive(Debug, Clone, Default)]
pub struct ContextFilter {
    /// `--context` values, in the order given: names, or globs (`*`, `?`).
    pub contexts: Vec<String>,
    /// `--all-contexts`.
    pub all: bool,
    /// `--context-regex`: keeps only contexts it matches (anywhere in the
    /// name; anchor it with `^…$` for the whole name).
    pub regex: Option<Regex>,
}

/// Why no selection could be made: a usage error (exit 2).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectError {
    /// A `--context` name the kubeconfig does not have.
    #[error("context {0:?} not found in the kubeconfig")]
    NotFound(String),
    /// A `--context` glob that matches no context.
    #[error("--context {0:?} matches no context of the kubeconfig")]
    GlobMatchesNothing(String),
    /// Nothing is left to run on.
    #[error("no context of the kubeconfig is selected{0}")]
    Empty(String),
}

impl ContextFilter {
    /// Whether these flags ask for a fleet run: more than one `--context`,
    /// a glob, `--all-contexts` or `--context-regex`. The kind of document
    /// depends on the flags, never on how many contexts matched, so a
    /// script reading the fleet report does not break when a kubeconfig
    /// shrinks to one context.
    pub fn is_fleet(&self) -> bool {
        self.all
            || self.regex.is_some()
            || self.contexts.len() > 1
            || self.contexts.iter().any(|c| is_glob(c))
    }

    /// The contexts to run on, from the kubeconfig's `available` (in its
    /// order): every `--context` name or glob match (names in the order
    /// given), or every context with `--all-contexts` or a lone
    /// `--context-regex`; then only those the regex matches. No duplicates.
    pub fn select(&self, available: &[String]) -> Result<Vec<String>, SelectError> {
        let mut chosen: Vec<String> = Vec::new();
        let push = |c: &String, chosen: &mut Vec<String>| {
            if !chosen.contains(c) {
                chosen.push(c.clone());
            }
        };
        if self.all || self.contexts.is_empty() {
            for c in available {
                push(c, &mut chosen);
            }
        } else {
            for wanted in &self.contexts {
                if is_glob(wanted) {
                    let re = glob_regex(wanted);
                    let matched: Vec<&String> =
                        available.iter().filter(|c| re.is_match(c)).collect();
                    if matched.is_empty() {
                        return Err(SelectError::GlobMatchesNothing(wanted.clone()));
                    }
                    for c in matched {
                        push(c, &mut chosen);
                    }
                } else if available.contains(wanted) {
                    push(wanted, &mut chosen);
                } else {
                    return Err(SelectError::NotFound(wanted.clone()));
                }
            }
        }
        if let Some(re) = &self.regex {
            chosen.retain(|c| re.is_match(c));
        }
        if chosen.is_empty() {
            let why = match &self.regex {
                Some(re) => format!(" (--context-regex {:?} matches none)", re.as_str()),
                None => " (it has no contexts)".to_owned(),
            };
            return Err(SelectError::Empty(why));
        }
        Ok(chosen)
    }
}

/// Whether a `--context` value is a glob rather than a name.
pub(crate) fn is_glob(s: &str) -> bool {
    s.contains(['*', '?'])
}

/// A whole-name regex for a glob: `*` any run of characters, `?` one.
fn glob_regex(glob: &str) -> Regex {
    let mut re = String::from("^");
    for c in glob.chars() {
        match c {
            '*' => re.push_str(".*"),
            '?' => re.push('.'),
            c => re.push_str(&regex::escape(&c.to_string())),
        }
    }
    re.push('$');
    Regex::new(&re).expect("an escaped glob is a valid regex")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kubeconfig() -> Vec<String> {
        ["prod-eu", "prod-us", "staging", "kind-dev"]
            .map(String::from)
            .to_vec()
    }

    fn filter(contexts: &[&str], all: bool, regex: Option<&str>) -> ContextFilter {
        ContextFilter {
            contexts: contexts.iter().map(|s| s.to_string()).collect(),
            all,
            regex: regex.map(|r| Regex::new(r).unwrap()),
        }
    }

    #[test]
    fn one_context_is_not_a_fleet_but_any_selection_flag_is() {
        assert!(!filter(&[], false, None).is_fleet());
        assert!(!filter(&["prod-eu"], false, None).is_fleet());
        assert!(filter(&["prod-eu", "staging"], false, None).is_fleet());
        assert!(filter(&["prod-*"], false, None).is_fleet());
        assert!(filter(&[], true, None).is_fleet());
        assert!(filter(&[], false, Some("prod")).is_fleet());
    }

    #[test]
    fn names_keep_their_order_globs_and_all_keep_the_kubeconfigs() {
        let k = kubeconfig();
        let sel = |f: ContextFilter| f.select(&k);
        assert_eq!(
            sel(filter(&["staging", "prod-eu", "staging"], false, None)).unwrap(),
            ["staging", "prod-eu"]
        );
        assert_eq!(
            sel(filter(&["prod-*"], false, None)).unwrap(),
            ["prod-eu", "prod-us"]
        );
        assert_eq!(
            sel(filter(&["prod-??"], false, None)).unwrap(),
            ["prod-eu", "prod-us"]
        );
        assert_eq!(sel(filter(&[], true, None)).unwrap(), k);
        assert_eq!(
            sel(filter(&[], true, Some("^prod-"))).unwrap(),
            ["prod-eu", "prod-us"]
        );
        assert_eq!(
            sel(filter(&[], false, Some("dev|stag"))).unwrap(),
            ["staging", "kind-dev"]
        );
        assert_eq!(
            sel(filter(&["staging", "prod-*"], false, Some("eu|stag"))).unwrap(),
            ["staging", "prod-eu"]
        );
    }

    #[test]
    fn what_matches_nothing_is_a_usage_error() {
        let k = kubeconfig();
        assert_eq!(
            filter(&["prod-eu", "nope"], false, None).select(&k),
            Err(SelectError::NotFound("nope".into()))
        );
        assert_eq!(
            filter(&["qa-*"], false, None).select(&k),
            Err(SelectError::GlobMatchesNothing("qa-*".into()))
        );
        assert!(matches!(
            filter(&[], true, Some("^none$")).select(&k),
            Err(SelectError::Empty(_))
        ));
        assert!(matches!(
            filter(&[], true, None).select(&[]),
            Err(SelectError::Empty(_))
        ));
        // Regex metacharacters in a glob are literal.
        let dotted = vec!["a.b".to_string(), "axb".to_string()];
        assert_eq!(
            filter(&["a.*"], false, None).select(&dotted).unwrap(),
            ["a.b"]
        );
    }
}
