//! Credentials never reach an output: not stderr, not the report, not a
//! diagnosis.
//!
//! Two walls. First, errors from authentication (kube's [`AuthError`]) are
//! never formatted as kube formats them: its exec-plugin failure prints the
//! whole `Command` (its `env:` values and arguments) and the plugin's
//! output. `describe` names the plugin command and its exit status only.
//! Second, every credential we load (bearer tokens, passwords, exec env
//! values and arguments, client keys) is remembered for the run, and
//! [`scrub`] replaces any of them found in free text before it is written.

use std::sync::RwLock;

use kube::client::AuthError;

/// Shortest value treated as a secret: shorter ones (`-v`, `true`) would
/// scrub ordinary words from messages and protect nothing.
pub(crate) const MIN_SECRET_LEN: usize = 6;

/// What replaces a credential in text.
pub(crate) const REDACTED: &str = "<redacted>";

static SECRETS: RwLock<Vec<String>> = RwLock::new(Vec::new());

/// Remember a credential for the rest of the process. An argument shaped
/// `--flag=value` also registers its value.
pub(crate) fn register(value: &str) {
    let add = |v: &str| {
        let v = v.trim();
        if v.len() >= MIN_SECRET_LEN {
            let mut g = SECRETS.write().unwrap_or_else(|e| e.into_inner());
            if !g.iter().any(|s| s == v) {
                g.push(v.to_owned());
                // Longest first, so a secret containing another is replaced whole.
                g.sort_by_key(|s| std::cmp::Reverse(s.len()));
            }
        }
    };
    add(value);
    if let Some((_, v)) = value.split_once('=') {
        add(v);
    }
}

/// `text` with every registered credential replaced by `REDACTED`.
pub fn scrub(text: &str) -> String {
    let g = SECRETS.read().unwrap_or_else(|e| e.into_inner());
    let mut out = text.to_owned();
    for s in g.iter() {
        if out.contains(s.as_str()) {
            out = out.replace(s.as_str(), REDACTED);
        }
    }
    out
}

/// The whole cause chain of `e` on one line, safe to print: an
/// authentication error anywhere in it is described by [`auth_message`]
/// alone, and registered credentials are scrubbed from the rest.
pub(crate) fn describe(e: &(dyn std::error::Error + 'static)) -> String {
    describe_with(e, None)
}

/// [`describe`], naming `exec_program` (the exec plugin command the
/// client was configured with) in an exec plugin's failure; without it
/// the program is read from kube's error text.
pub(crate) fn describe_with(
    e: &(dyn std::error::Error + 'static),
    exec_program: Option<&str>,
) -> String {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(c) = cur {
        if let Some(auth) = c.downcast_ref::<AuthError>() {
            return auth_message(auth, exec_program);
        }
        if let Some(kube::Error::Auth(auth)) = c.downcast_ref::<kube::Error>() {
            return auth_message(auth, exec_program);
        }
        cur = c.source();
    }
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(c) = src {
        let m = c.to_string();
        if !s.contains(&m) {
            s.push_str(": ");
            s.push_str(&m);
        }
        src = c.source();
    }
    scrub(&s)
}

/// An authentication failure, named without its secrets: for an exec
/// plugin, the command (its first word; never arguments, env or output)
/// and exit status.
pub(crate) fn auth_message(e: &AuthError, configured: Option<&str>) -> String {
    match e {
        AuthError::AuthExecRun { cmd, out } => {
            let program = configured.map_or_else(|| exec_program(cmd), |p| format!("{p:?}"));
            let status = match out.status.code() {
                Some(c) => format!("exit status {c}"),
                None => "killed by a signal".to_owned(),
            };
            format!("authentication failed: the exec credential plugin {program} failed ({status}); its output, arguments and environment are not shown")
        }
        AuthError::AuthExecStart(io) => format!(
            "authentication failed: the exec credential plugin could not be started ({:?})",
            io.kind()
        ),
        AuthError::AuthExecParse(_) | AuthError::AuthExec(_) => {
            "authentication failed: the exec credential plugin (or auth provider) returned an unusable credential; its output is not shown".to_owned()
        }
        AuthError::MissingCommand => {
            "authentication failed: the kubeconfig exec section has no command".to_owned()
        }
        other => scrub(&format!("authentication failed: {other}")),
    }
}

/// The program of kube's `Command` debug text (`"/path/plugin" "arg" ...`,
/// possibly preceded by `VAR="value"` pairs): the first quoted word that is
/// not an environment assignment.
fn exec_program(cmd: &str) -> String {
    // `Command`'s Debug puts env assignments before the program as
    // NAME="value": a quoted word right after `=` is a value.
    let parts: Vec<&str> = cmd.split('"').collect();
    (1..parts.len())
        .step_by(2)
        .find(|&i| !parts[i - 1].trim_end().ends_with('='))
        .map_or_else(|| "(unknown)".to_owned(), |i| format!("{:?}", parts[i]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registered_secrets_are_scrubbed() {
        register("--oidc-client-secret=s3cr3t-value");
        register("abc"); // too short to be a secret
        let s = scrub("args: --oidc-client-secret=s3cr3t-value and abc");
        assert!(!s.contains("s3cr3t-value"), "{s}");
        assert!(s.contains("abc"), "{s}");
    }

    #[test]
    fn exec_program_skips_env_assignments() {
        assert_eq!(
            exec_program(r#"VAULT_TOKEN="hvs.x" "/bin/plugin" "--secret=y""#),
            "\"/bin/plugin\""
        );
        assert_eq!(exec_program(r#""/bin/plugin" "a""#), "\"/bin/plugin\"");
    }

    #[test]
    fn exec_failures_name_the_program_and_status_only() {
        use std::os::unix::process::ExitStatusExt;
        let out = std::process::Output {
            status: std::process::ExitStatus::from_raw(7 << 8),
            stdout: b"token-printed".to_vec(),
            stderr: b"more".to_vec(),
        };
        let e = AuthError::AuthExecRun {
            cmd: r#"VAULT_TOKEN="hvs.secret" "/bin/plugin" "--oidc-client-secret=zz""#.into(),
            out: Box::new(out),
        };
        let m = auth_message(&e, None);
        assert!(
            m.contains("/bin/plugin") && m.contains("exit status 7"),
            "{m}"
        );
        for secret in ["hvs.secret", "zz", "token-printed", "more"] {
            assert!(!m.contains(secret), "{m}");
        }
        // The client's own configured program wins over kube's text (a
        // fleet: each cluster's errors name its own plugin).
        let m = auth_message(&e, Some("/opt/cluster-b/plugin"));
        assert!(m.contains("\"/opt/cluster-b/plugin\""), "{m}");
        assert!(!m.contains("/bin/plugin"), "{m}");
    }
}
