//! The one reader of a credential's expiry, for both programs' warnings and
//! metrics (each with its own horizon: a host's credential is enrolled for
//! a year and warned of a month ahead, the controller's a week ahead).
//!
//! A ServiceAccount token is a JWT whose middle part is plain base64url
//! JSON: its `exp` claim is read without any key. Only `exp` is taken;
//! nothing of the token is kept or shown.

use std::path::Path;

use base64::Engine;

/// The `exp` claim of the JWT `token` (unix seconds), if it is one that has
/// it.
pub fn jwt_expiry(token: &str) -> Option<i64> {
    let payload = token.trim().split('.').nth(1)?;
    let json = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload.trim_end_matches('='))
        .ok()?;
    let claims: serde_json::Value = serde_json::from_slice(&json).ok()?;
    claims.get("exp")?.as_i64()
}

/// The `exp` claim of the token in the file `path`, read afresh (a token
/// file is rotated under a running process).
pub fn file_expiry(path: &Path) -> Option<i64> {
    let bytes = std::fs::read(path).ok()?;
    jwt_expiry(std::str::from_utf8(&bytes).ok()?)
}

/// Whether a credential lapsing at `expiry` is within `horizon` seconds of
/// `now` (or already lapsed): when each program starts to warn.
pub fn lapses_within(expiry: i64, now: i64, horizon: i64) -> bool {
    expiry - now <= horizon
}

#[cfg(test)]
mod tests {
    use super::*;

    fn jwt(claims: &str) -> String {
        let b = |s: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(s);
        format!("{}.{}.c2ln", b(r#"{"alg":"RS256"}"#), b(claims))
    }

    #[test]
    fn a_tokens_expiry_is_read_from_its_exp_claim_and_nothing_else() {
        assert_eq!(
            jwt_expiry(&jwt(r#"{"exp":1700000000,"sub":"x"}"#)),
            Some(1_700_000_000)
        );
        assert_eq!(jwt_expiry(&jwt(r#"{"sub":"x"}"#)), None);
        assert_eq!(jwt_expiry("not-a-jwt"), None);
    }

    #[test]
    fn a_token_file_is_read_with_its_trailing_newline_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("token");
        std::fs::write(&f, format!("{}\n", jwt(r#"{"exp":42}"#))).unwrap();
        assert_eq!(file_expiry(&f), Some(42));
        assert_eq!(file_expiry(&dir.path().join("missing")), None);
    }

    #[test]
    fn the_horizon_decides_when_a_lapse_is_near() {
        assert!(!lapses_within(1_000, 0, 999));
        assert!(lapses_within(1_000, 0, 1_000));
        assert!(lapses_within(0, 1_000, 10));
    }
}
