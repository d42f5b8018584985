//! Content negotiation of a response's media type from the `Accept` header, as kube-apiserver
//! does it (k/k `staging/src/k8s.io/apiserver/pkg/endpoints/handlers/negotiation/negotiate.go`,
//! `NegotiateOutputMediaType`): clauses by quality, in the client's order among equals; the first
//! clause the endpoint serves wins; `*/*` and `application/*` get the first served type (JSON); a
//! header naming nothing served is `406 Not Acceptable`.

use crate::error::ApiError;
use crate::protobuf;

/// The media type of a response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Format {
    Json,
    Yaml,
    Protobuf,
}

impl Format {
    fn media_type(self) -> &'static str {
        match self {
            Format::Json => "application/json",
            Format::Yaml => "application/yaml",
            Format::Protobuf => protobuf::MEDIA_TYPE,
        }
    }
}

/// One clause of an `Accept` header: quality, type, subtype and the other parameters.
type Clause<'a> = (f32, &'a str, &'a str, Vec<(&'a str, &'a str)>);

/// The format of the answer to `accept`. Built-in kinds are served as JSON, YAML and protobuf;
/// custom resources have no protobuf form (apiextensions-apiserver's serializers are JSON and
/// YAML: k/k `staging/src/k8s.io/apiextensions-apiserver/pkg/apiserver/customresource_handler.go`,
/// `unstructuredNegotiatedSerializer.SupportedMediaTypes`).
pub(crate) fn negotiate(accept: Option<&str>, protobuf_served: bool) -> Result<Format, ApiError> {
    let served: &[Format] = if protobuf_served {
        &[Format::Json, Format::Yaml, Format::Protobuf]
    } else {
        &[Format::Json, Format::Yaml]
    };
    let Some(accept) = accept.filter(|a| !a.trim().is_empty()) else {
        return Ok(Format::Json);
    };
    let mut clauses: Vec<Clause<'_>> = accept
        .split(',')
        .filter_map(|clause| {
            let mut parts = clause.split(';').map(str::trim);
            let (ty, sub) = parts.next()?.split_once('/')?;
            let mut q = 1.0;
            let mut params = Vec::new();
            for p in parts {
                let (k, v) = p.split_once('=').unwrap_or((p, ""));
                if k.eq_ignore_ascii_case("q") {
                    q = v.parse().unwrap_or(0.0);
                } else {
                    params.push((k, v));
                }
            }
            Some((q, ty, sub, params))
        })
        .filter(|(q, ..)| *q > 0.0)
        .collect();
    // Stable: among equal qualities the client's order stands.
    clauses.sort_by(|a, b| b.0.total_cmp(&a.0));
    for (_, ty, sub, params) in clauses {
        // A transformed answer (`as=Table`, `as=PartialObjectMetadata`) is chosen elsewhere and
        // only as JSON here.
        let transformed = params.iter().any(|(k, _)| *k == "as");
        for &format in served {
            let (fty, fsub) = format.media_type().split_once('/').unwrap_or_default();
            let matches = (ty == "*" && sub == "*") || (ty == fty && (sub == "*" || sub == fsub));
            if matches && !(transformed && format != Format::Json) {
                return Ok(format);
            }
        }
    }
    let accepted: Vec<&str> = served.iter().map(|f| f.media_type()).collect();
    Err(not_acceptable(&accepted))
}

/// kube-apiserver's `406 Not Acceptable`, naming the media types it would have answered in.
pub(crate) fn not_acceptable(accepted: &[&str]) -> ApiError {
    ApiError::new(
        406,
        "NotAcceptable",
        format!(
            "only the following media types are accepted: {}",
            accepted.join(", ")
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubectl_preference_order_is_honoured() {
        let kubectl = Some("application/vnd.kubernetes.protobuf,application/json");
        assert_eq!(negotiate(kubectl, true).ok(), Some(Format::Protobuf));
        assert_eq!(negotiate(kubectl, false).ok(), Some(Format::Json));
        let json_first = Some("application/json, application/vnd.kubernetes.protobuf");
        assert_eq!(negotiate(json_first, true).ok(), Some(Format::Json));
    }

    #[test]
    fn quality_outranks_order_and_wildcards_get_json() {
        let q = Some("application/json;q=0.5, application/vnd.kubernetes.protobuf");
        assert_eq!(negotiate(q, true).ok(), Some(Format::Protobuf));
        assert_eq!(negotiate(Some("*/*"), true).ok(), Some(Format::Json));
        assert_eq!(
            negotiate(Some("application/*"), true).ok(),
            Some(Format::Json)
        );
        assert_eq!(negotiate(None, true).ok(), Some(Format::Json));
        assert_eq!(
            negotiate(Some("application/yaml"), false).ok(),
            Some(Format::Yaml)
        );
    }

    #[test]
    fn nothing_served_is_not_acceptable() {
        let err =
            negotiate(Some("application/vnd.kubernetes.protobuf"), false).expect_err("an error");
        assert_eq!(err.code, 406);
        assert_eq!(
            err.message,
            "only the following media types are accepted: application/json, application/yaml"
        );
        assert_eq!(
            negotiate(Some("text/html"), true)
                .expect_err("an error")
                .code,
            406
        );
    }
}
