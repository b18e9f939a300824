//! k3s's join token and the supervisor's check of it.
//!
//! More in docs/internals.md, "k3sstandin: k3s::token".

use base64::Engine;

/// A token's user and password.
#[derive(Clone, PartialEq, Eq)]
pub struct Creds {
    /// `server` or `node` (or whatever the token names).
    pub user: String,
    /// The password; never printed.
    pub password: String,
}

impl std::fmt::Debug for Creds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Creds {{ user: {:?}, password: <hidden> }}", self.user)
    }
}

/// Reads a token as k3s's `parseToken` does: `K10<hash>::<user>:<password>`
/// (a `K10` token without `::` is refused), or a bare password for
/// `default_user`. `None` for an empty or malformed token.
pub fn parse(token: &str, default_user: &str) -> Option<Creds> {
    let token = token.trim();
    if token.is_empty() {
        return None;
    }
    if let Some(rest) = token.strip_prefix("K10") {
        let (_hash, creds) = rest.split_once("::")?;
        let (user, password) = creds.split_once(':')?;
        if user.is_empty() || password.is_empty() {
            return None;
        }
        return Some(Creds {
            user: user.into(),
            password: password.into(),
        });
    }
    Some(Creds {
        user: default_user.into(),
        password: token.into(),
    })
}

/// What a supervisor knows: the server token's password and the agent
/// token's.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct Passwd {
    server: Option<String>,
    agent: Option<String>,
}

impl std::fmt::Debug for Passwd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Passwd { <hidden> }")
    }
}

impl Passwd {
    /// From a server's `token` and `agent-token` settings (the agent's
    /// password is the server token's when no agent token is set).
    pub fn new(token: Option<&str>, agent_token: Option<&str>) -> Passwd {
        let server = token.and_then(|t| parse(t, "server")).map(|c| c.password);
        let agent = agent_token
            .and_then(|t| parse(t, "node"))
            .map(|c| c.password)
            .or_else(|| server.clone());
        Passwd { server, agent }
    }
}

/// Who a request is, as k3s's authenticator and `HasRole` judge it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Auth {
    /// User `server` with the server password: role `k3s:server`.
    Server,
    /// User `node` with the agent password: role `k3s:agent` only.
    Agent,
    /// No credentials, or ones the authenticator refuses.
    Refused,
}

/// Judges a request's `Authorization` header.
pub fn authenticate(passwd: &Passwd, authorization: Option<&str>) -> Auth {
    let Some(creds) = authorization
        .and_then(|h| h.trim().strip_prefix("Basic "))
        .and_then(|b| {
            base64::engine::general_purpose::STANDARD
                .decode(b.trim())
                .ok()
        })
        .and_then(|b| String::from_utf8(b).ok())
    else {
        return Auth::Refused;
    };
    let Some((user, password)) = creds.split_once(':') else {
        return Auth::Refused;
    };
    let matches = |p: &Option<String>| p.as_deref().is_some_and(|p| p == password);
    match user {
        "server" if matches(&passwd.server) => Auth::Server,
        "node" if matches(&passwd.agent) => Auth::Agent,
        _ => Auth::Refused,
    }
}

/// The `Authorization` header a client sends with `creds`.
pub fn basic(creds: &Creds) -> String {
    let raw = format!("{}:{}", creds.user, creds.password);
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(raw)
    )
}

#[cfg(test)]
mod tests;
