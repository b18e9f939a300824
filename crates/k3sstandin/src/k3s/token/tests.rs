use super::*;

const SERVER: &str = "K10abc123::server:s3cret";

#[test]
fn a_k10_token_names_its_user_and_a_bare_one_takes_the_default() {
    let c = parse(SERVER, "server").unwrap();
    assert_eq!((c.user.as_str(), c.password.as_str()), ("server", "s3cret"));
    let c = parse("K10abc123::node:agentpass", "server").unwrap();
    assert_eq!(c.user, "node");
    let c = parse("justapassword\n", "server").unwrap();
    assert_eq!(
        (c.user.as_str(), c.password.as_str()),
        ("server", "justapassword")
    );
    for bad in [
        "",
        "  ",
        "K10abc123",
        "K10abc123::nocolon",
        "K10abc::server:",
    ] {
        assert_eq!(parse(bad, "server"), None, "{bad:?}");
    }
}

#[test]
fn a_token_is_never_shown() {
    let c = parse(SERVER, "server").unwrap();
    assert!(!format!("{c:?}").contains("s3cret"));
    let p = Passwd::new(Some(SERVER), None);
    assert!(!format!("{p:?}").contains("s3cret"));
}

#[test]
fn the_server_token_has_the_server_role_the_agent_token_only_the_agents_and_a_wrong_one_none() {
    let passwd = Passwd::new(Some(SERVER), Some("K10abc123::node:agentpass"));
    let with = |token: &str| {
        let creds = parse(token, "server").unwrap();
        authenticate(&passwd, Some(&basic(&creds)))
    };
    assert_eq!(with(SERVER), Auth::Server);
    // A bare server password is the server user's.
    assert_eq!(with("s3cret"), Auth::Server);
    assert_eq!(with("K10abc123::node:agentpass"), Auth::Agent);
    // The agent password under the server user, a wrong password, a user
    // the supervisor does not know: refused.
    assert_eq!(with("agentpass"), Auth::Refused);
    assert_eq!(with("K10abc123::server:wrong"), Auth::Refused);
    assert_eq!(with("K10abc123::admin:s3cret"), Auth::Refused);
    assert_eq!(authenticate(&passwd, None), Auth::Refused);
    assert_eq!(authenticate(&passwd, Some("Bearer s3cret")), Auth::Refused);
}

#[test]
fn without_an_agent_token_the_agent_user_has_the_server_tokens_password() {
    let passwd = Passwd::new(Some(SERVER), None);
    let node = basic(&parse("K10abc123::node:s3cret", "server").unwrap());
    assert_eq!(authenticate(&passwd, Some(&node)), Auth::Agent);
    // A server with no token knows nobody.
    let none = Passwd::new(None, None);
    let server = basic(&parse(SERVER, "server").unwrap());
    assert_eq!(authenticate(&none, Some(&server)), Auth::Refused);
}
