//! Query parameters as kube-apiserver decodes them. A leaf: authorization reads the request's
//! `watch` parameter with it too.

/// A boolean query parameter as kube-apiserver reads it: the options' query decoding
/// (`apimachinery/pkg/runtime/conversion.go`, `Convert_Slice_string_To_bool` and `_Pointer_bool`)
/// and the request-info resolver's `watch` (`apiserver/pkg/endpoints/request/requestinfo.go`)
/// take only `0` and `false` in any case as false, anything else (`True`, `1`, `yes`) as true.
pub(crate) fn query_bool(v: &str) -> bool {
    !(v == "0" || v.eq_ignore_ascii_case("false"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_booleans_are_false_only_for_0_and_false() {
        for v in ["0", "false", "False", "FALSE", "fAlSe"] {
            assert!(!query_bool(v), "{v}");
        }
        for v in ["1", "true", "True", "t", "yes", ""] {
            assert!(query_bool(v), "{v}");
        }
    }
}
