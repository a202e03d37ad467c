//! Continue tokens (reference §2), as kube-apiserver encodes and decodes
//! them: base64 of `{"v":"meta.k8s.io/v1","rv":RV,"start":KEY}`, and
//! refused with its messages. The test below pins a token as the real
//! server writes it, so a client that decodes one sees what it would see
//! from kube-apiserver.

use base64::Engine;
use serde::Deserialize;
use serde_json::json;

/// A decoded token.
#[derive(Deserialize)]
struct Token {
    v: String,
    rv: i64,
    start: String,
}

/// Encode a continue token like apiserver's `EncodeContinue`.
pub(crate) fn encode_token(rv: i64, start: &str) -> String {
    let raw = json!({"v": "meta.k8s.io/v1", "rv": rv, "start": start});
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(raw.to_string())
}

/// Why a continue token is refused, in apiserver's words (the text of
/// the 400 answer).
#[derive(Debug, thiserror::Error)]
pub(crate) enum BadContinue {
    /// Not base64.
    #[error("continue key is not valid: {0}")]
    Base64(base64::DecodeError),
    /// Not the token's JSON.
    #[error("continue key is not valid: {0}")]
    Json(serde_json::Error),
    /// Another version, or a resourceVersion no token carries.
    #[error("continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)")]
    ResourceVersion,
    /// An empty start key, or one leaving the prefix.
    #[error("continue key is not valid: continue key is not valid")]
    Start,
}

/// Decode a continue token into its resourceVersion and start key, or
/// say why it is refused.
pub(crate) fn decode_token(t: &str) -> Result<(i64, String), BadContinue> {
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(t.trim_end_matches('='))
        .map_err(BadContinue::Base64)?;
    let tok: Token = serde_json::from_slice(&bytes).map_err(BadContinue::Json)?;
    if tok.v != "meta.k8s.io/v1" || tok.rv == 0 || tok.rv < -1 {
        return Err(BadContinue::ResourceVersion);
    }
    let start = tok
        .start
        .strip_suffix('\u{0}')
        .unwrap_or(&tok.start)
        .to_owned();
    if start.is_empty() || start.contains("..") {
        return Err(BadContinue::Start);
    }
    Ok((tok.rv, start))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_round_trip_and_look_like_the_real_ones() {
        let t = encode_token(7340, "100\u{0}");
        assert_eq!(
            t,
            "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6NzM0MCwic3RhcnQiOiIxMDBcdTAwMDAifQ"
        );
        assert_eq!(decode_token(&t).unwrap(), (7340, "100".to_owned()));
        assert!(decode_token("not-a-token").is_err());
        assert_eq!(decode_token(&encode_token(-1, "5\u{0}")).unwrap().0, -1);
    }
}
